"""Checks of user-given values: numbers in range, names from a list, output paths.

Each check returns the value (converted) or raises an `InputError` naming where the value came
from (a command-line option such as ``--batch``, or ``config``), the value as given, and why.
Commands run every check before any simulation starts. Like `swansim.errors`, this module is
a leaf: every layer may import it.
"""
from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import os
import tempfile
from pathlib import Path
from typing import Iterable

from swansim.errors import InputError

# Seeds go to numpy's SeedSequence, which takes any non-negative integer; 32 bits are plenty.
MAX_SEED = 2**32 - 1


def shown(value) -> str:
    """A value as an error message shows it: strings quoted, numbers as they print."""
    return repr(value) if isinstance(value, str) else str(value)


def is_int(value) -> bool:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A finite real number, and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def integer(value, where: str, lo: int, hi: int) -> int:
    """``value`` as an int in ``lo..hi``."""
    if not is_int(value) or not lo <= value <= hi:
        raise InputError(where, shown(value), f"must be an integer from {lo} to {hi}")
    return int(value)


def number(value, where: str, lo: float, hi: float, unit: str = "") -> float:
    """``value`` as a finite float in ``[lo, hi]``."""
    if not is_number(value) or not lo <= value <= hi:
        of = f" {unit}" if unit else ""
        raise InputError(where, shown(value), f"must be a finite number{of} from {lo:g} to {hi:g}")
    return float(value)


def seed(value, where: str = "--seed") -> int:
    """A random seed: an integer from 0 to MAX_SEED."""
    return integer(value, where, 0, MAX_SEED)


def work(estimate: float, bound: float, unit: str, where: str, no_limit: bool = False) -> float:
    """A command's estimated work, refused above ``bound`` unless ``no_limit`` (``--no-limit``):
    a typo must not start a run of days, and the message says how much was asked."""
    if estimate > bound and not no_limit:
        raise InputError(where, f"{estimate:.4g} {unit}", f"more work than the bound of {bound:.4g} {unit}; "
                                                           "--no-limit (no_limit=True) lifts it")
    return estimate


def listed(value, where: str = "value") -> tuple:
    """One rule for list arguments: a string is a comma-separated list, anything else an
    iterable (else one InputError naming ``where``)."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    try:
        return tuple(value)
    except TypeError:
        raise InputError(where, shown(value), "expected a comma-separated string or a list") from None


def weighted(value, where: str = "value") -> tuple[tuple[str, float], ...]:
    """One rule for (name, weight) arguments: ``"pixel3,galaxy-s10e:2"`` (a weight 1 if left
    out), a mapping ``{name: weight}`` or pairs, as ``(("pixel3", 1.0), ("galaxy-s10e", 2.0))``.
    A weight that is not a finite number is refused here; the names and the weights' range are
    the caller's to check."""
    if isinstance(value, str):
        items = listed(value)
        if value.strip() and not items:
            raise InputError(where, repr(value), "no name in the list (leave it out for the default)")
        pairs = [(item, *item.split(":", 1)) if ":" in item else (item, item, 1.0) for item in items]
    else:   # (label, name, weight); an entry that is no pair is refused below
        entries = value.items() if isinstance(value, dict) else listed(value, where)
        pairs = [(shown(p), *p) if isinstance(p, (tuple, list)) and len(p) == 2 else (shown(p), None, None)
                 for p in entries]
    out = []
    for label, name, weight in pairs:
        try:
            w = math.nan if isinstance(weight, bool) else float(weight)
        except (TypeError, ValueError):
            w = math.nan
        if not (isinstance(name, str) and math.isfinite(w)):
            raise InputError(where, label, "expected NAME or NAME:WEIGHT, the weight a number")
        out.append((name, w))
    return tuple(out)


def keywords(kwargs: dict, config, where: str) -> dict:
    """``kwargs`` if each is a field of the dataclass ``config`` (or one of the names
    ``config`` lists); else one InputError naming the keyword as the caller spelled it, the
    nearest valid one and the valid ones."""
    from dataclasses import fields, is_dataclass

    names = [f.name for f in fields(config)] if is_dataclass(config) else list(config)
    for k in kwargs:
        if k not in names:
            raise InputError(where, k, f"unknown keyword{did_you_mean(k, names)} (valid: {', '.join(names)})")
    return kwargs


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """The nearest known name as " (did you mean 'x'?)", or "" if none is near. Names match
    exactly everywhere; one that differs only in case is named as the nearest."""
    known = list(known)
    same = [k for k in known if k.lower() == str(name).lower()]
    near = same or difflib.get_close_matches(str(name), known, n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def one_of(value, where: str, known: Iterable[str], what: str = "name") -> str:
    """``value`` if it is one of ``known``; else an error listing them."""
    known = list(known)
    if not isinstance(value, str) or value not in known:
        raise InputError(where, shown(value), f"unknown {what}{did_you_mean(str(value), known)}; "
                                              f"known: {', '.join(known)}")
    return value


def names(values: Iterable[str], where: str, known: Iterable[str], what: str = "name") -> tuple[str, ...]:
    """A non-empty list of distinct names, each one of ``known``."""
    values, known = tuple(values), list(known)
    if not values:
        raise InputError(where, "''", f"expected a comma-separated list of {what}s, got none")
    for v in values:
        one_of(v, where, known, what)
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise InputError(where, shown(twice[0]), "named twice")
    return values


def out_dir(path, where: str = "--out") -> Path:
    """``path`` as a directory that takes files: created if missing. An InputError if it or a
    parent is a file, or it cannot be created or written."""
    if str(path) == "":
        raise InputError(where, "''", "empty path")
    return _writable_dir(Path(path), where, str(path))


def out_file(path, where: str = "--out") -> Path:
    """``path`` as a file that can be written (its directory created if missing). An InputError
    if it is a directory or cannot be written."""
    text = str(path)
    if text == "" or text.endswith(("/", os.sep)) or Path(text).is_dir():
        raise InputError(where, shown(text), "is a directory, expected a file name")
    p = Path(text)
    _writable_dir(p.parent, where, text)
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(where, text, "exists and cannot be written")
    return p


def _writable_dir(p: Path, where: str, field: str) -> Path:
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise InputError(where, field, f"{q} is a file, not a directory")
            break
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except (OSError, ValueError) as e:   # ValueError: a NUL byte in the path
        raise InputError(where, field, f"cannot write files in {p} ({getattr(e, 'strerror', None) or e})") from None
    return p


@contextlib.contextmanager
def as_keywords(func: str, *configs, renames: dict[str, str] | None = None):
    """Within the block, an InputError that names a command-line option (``--duration``) names
    the caller's keyword instead (``swansim.run(duration_s=...)``), the field of ``configs``
    (`swansim.options`) whose option it is: the configs are checked by the same code whether
    the CLI or Python built them."""
    from swansim.options import keyword_of

    try:
        yield
    except InputError as e:
        if not e.where.startswith("--"):
            raise
        kw = (renames or {}).get(e.where) or keyword_of(e.where, *configs)
        raise InputError(f"{func}({kw}=...)", e.field, e.reason, e.line) from None
