"""What several subcommands parse alike."""
from __future__ import annotations

import argparse
import contextlib

from swansim.checks import listed, weighted


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


class Weighted:
    """An option's kind for a tuple of (name, weight) pairs, typed ``NAME[:WEIGHT],...``."""


def _kind(hint):
    """An option's type from a field's: bool, int, float, str, list (a tuple of names) or
    `Weighted` (a tuple of (name, weight) pairs)."""
    import typing

    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if type(None) in typing.get_args(hint) else hint
    if typing.get_origin(base) is tuple:
        inner = typing.get_args(base)
        return Weighted if inner and typing.get_origin(inner[0]) is tuple else list
    return base if base in (bool, int, float, str) else str


def add_options(p: argparse.ArgumentParser, config) -> None:
    """One option per documented field of the dataclass ``config`` (`swansim.options`): its
    flag, type, default and help come from the field, so the CLI and the API cannot disagree."""
    import typing

    from swansim.options import documented, flag_of

    hints = typing.get_type_hints(config)
    shown = [f for f in documented(config) if f.metadata["cli"]]
    # argparse prints a mutually exclusive group only when its options are adjacent
    first = {}
    for i, f in enumerate(shown):
        first.setdefault(f.metadata["exclusive"] or f.name, i)
    shown.sort(key=lambda f: first[f.metadata["exclusive"] or f.name])
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f in shown:
        md = f.metadata
        target = p
        if md["exclusive"]:
            if md["exclusive"] not in groups:
                groups[md["exclusive"]] = p.add_mutually_exclusive_group()
            target = groups[md["exclusive"]]
        default, kind = f.default, _kind(hints[f.name])
        help_text = md["help"].replace("%", "%%")
        if kind is list:
            help_text += ", comma-separated"
        if kind is Weighted:
            help_text += ", comma-separated NAME[:WEIGHT] (weight 1 if left out)"
            default, kind = ",".join(f"{n}:{w:g}" for n, w in default), str
        if md["known"] is not None:
            help_text += f"; known: {', '.join(md['known']())}"
        if kind is bool:
            target.add_argument(flag_of(f), dest=f.name, action="store_false" if default else "store_true",
                                default=default, help=help_text)
            continue
        if kind is list:
            default, kind = (None if default is None else ",".join(default)), str
        if default not in (None, ""):
            help_text += f" (default: {default})"
        metavar = flag_of(f)[2:].upper().replace("-", "_")
        target.add_argument(flag_of(f), dest=f.name, type=kind, default=default, metavar=metavar, help=help_text)


def config_from(args: argparse.Namespace, config, **values):
    """The ``config`` dataclass from the options `add_options` made (lists split at commas),
    and ``values`` for the fields the command fills itself."""
    import typing

    from swansim.options import documented, flag_of

    hints = typing.get_type_hints(config)
    for f in documented(config):
        if f.name not in values and hasattr(args, f.name):
            v, kind = getattr(args, f.name), _kind(hints[f.name])
            if kind is Weighted and isinstance(v, str):
                v = weighted(v, flag_of(f))
            values[f.name] = split_names(v) if kind is list and isinstance(v, str) else v
    return config(**values)


@contextlib.contextmanager
def as_options(config, where: str):
    """Within the block, an InputError a config's validation raised about one of its fields
    (at ``where``, e.g. "fleet config") names the field's option instead: on the command line
    the user typed ``--deadline``, not ``deadline_s``."""
    from swansim.errors import InputError
    from swansim.options import documented, flag_of

    try:
        yield
    except InputError as e:
        f = {f.name: f for f in documented(config)}.get(e.field.split(".")[0])   # ("devices.pixel3": --devices)
        if e.where != where or f is None or not f.metadata["cli"]:
            raise
        raise InputError(flag_of(f), e.field, e.reason, e.line) from None
