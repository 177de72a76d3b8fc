"""What several subcommands parse alike."""
from __future__ import annotations

import argparse

from swansim.errors import InputError


def add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=None,
                   help="parallel processes (default: every core); the numbers do not depend on it")


def split_names(text: str | None, option: str) -> list[str] | None:
    """A comma-separated list; None stays None (the command's default); empty is an error."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError(option, option.lstrip("-"), "expected a comma-separated list of names, got nothing")
    return names
