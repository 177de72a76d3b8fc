"""What several subcommands parse alike."""
from __future__ import annotations

import argparse

from swansim.checks import listed


def add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=None,
                   help="parallel processes (default: every core); the numbers do not depend on it")
    add_quiet(p)


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bar (it goes to stderr)")


def split_names(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated list (None stays None: the command's default). An empty list is
    passed on: the library refuses it, naming the option."""
    return None if text is None else listed(text)


def out_under(out: str, name: str):
    """OUT/name, the directory a command writes to (``--out ''`` is refused, not taken as ".")."""
    from pathlib import Path

    from swansim.errors import InputError

    if not out:
        raise InputError("--out", "''", "empty path")
    return Path(out) / name
