"""Sourced TOML: the one reader of the project's data files - device profiles, runtime
profiles, the app models - where every figure has a source next to it.

A `SourcedTable` is a TOML table with its file and dotted prefix, so every error can say
where it is. A table that holds figures has a ``sources`` sub-table naming, per field, where
the figure comes from; a reader refuses a figure without one (``provenance``: what a source
must look like, e.g. the runtime profiles' "calibrated: ..." or "assumption: ..."). Every
reader records the key it asked for, present or not; `done` then refuses any key nobody asked
for (a misspelt optional field would otherwise fall back to its default).
"""
from __future__ import annotations

import difflib
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from swansim.checks import did_you_mean, is_int, is_number
from swansim.errors import InputError

SOURCE_RULE = "every figure needs a source or 'assumption: <reason>'"


class SourcedTable:
    """A TOML table with its file and dotted prefix (module doc). ``sourced``: its figures need
    sources; ``provenance``: a pattern every source must match (None: any non-empty text),
    ``rule`` the error that says so. Sub-tables inherit both."""

    def __init__(self, data: dict, path: Path, prefix: str, sourced: bool = True,
                 provenance: re.Pattern | None = None, rule: str = SOURCE_RULE):
        if not isinstance(data, dict):
            raise InputError(path, prefix or "<root>", "expected a table")
        self.data, self.path, self.prefix = data, path, prefix
        self.provenance, self.rule = provenance, rule
        self.known: set[str] = {"sources"} if sourced else set()
        self.sources = data.get("sources", {}) if sourced else None
        if sourced and not isinstance(self.sources, dict):
            raise InputError(path, self._f("sources"), "expected a table of field = \"source\"")

    def _f(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def err(self, key: str, reason: str) -> InputError:
        return InputError(self.path, self._f(key), reason)

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as written (None if absent), for readers that check it themselves."""
        self.known.add(key)
        return self.data.get(key, default)

    def missing(self, key: str, what: str) -> InputError:
        """A required key is absent; a near-miss key in the table is probably it, misspelt."""
        near = difflib.get_close_matches(key, [k for k in self.data if k not in self.known], n=1)
        hint = f" (is {near[0]!r} it, misspelt?)" if near else ""
        return self.err(key, f"missing required {what}{hint}")

    def done(self, also: tuple[str, ...] = ()) -> None:
        """Refuse keys no reader asked for (``also``: keys that are valid but not read here),
        naming the nearest known key; and sources for figures the table does not hold."""
        known = self.known | set(also)
        for key in self.data:
            if key not in known:
                raise self.err(key, f"unknown field{did_you_mean(key, known - {'sources'})}")
        for key in self.sources or {}:
            if key.split(".")[0] not in known:
                raise InputError(self.path, self._f(f"sources.{key}"),
                                 f"source for an unknown field{did_you_mean(key, known - {'sources'})}")

    def _present(self, key: str, required: bool, what: str = "field") -> bool:
        """Whether ``key`` is there (recorded as asked for); absent and ``required``: an error."""
        self.known.add(key)
        if key in self.data:
            return True
        if required:
            raise self.missing(key, what)
        return False

    def _get(self, key: str, default: Any):
        self.known.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise self.missing(key, "field")
            return default
        return self.data[key]

    def need_source(self, key: str) -> None:
        if self.sources is None:
            return
        src = self.sources.get(key)
        if not isinstance(src, str) or not src.strip() or (self.provenance and not self.provenance.match(src.strip())):
            raise InputError(self.path, self._f(f"sources.{key}"), self.rule)

    def get(self, key: str) -> Any:
        """The value as written; a missing key is an error."""
        return self._get(key, _REQUIRED)

    def str(self, key: str, default: Any = None, choices: tuple[str, ...] | None = None) -> str:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, str) or not v:
            raise self.err(key, f"expected a non-empty string, got {v!r}")
        if choices and v not in choices:
            raise self.err(key, f"{v!r} is not one of {', '.join(choices)}")
        return v

    def bool(self, key: str, default: bool | None = None) -> bool:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, bool):
            raise self.err(key, f"expected true or false, got {v!r}")
        return v

    def num(self, key: str, lo: float = 0.0, hi: float = math.inf, unit: str = "",
            required: bool = True) -> float | None:
        if not self._present(key, required):
            return None
        v = self.data[key]
        if not is_number(v):
            raise self.err(key, f"expected a number, got {v!r}")
        if v < lo:
            raise self.err(key, f"{v} is below {lo} {unit}" + (" (negative)" if v < 0 else "")
                           + (" - wrong unit?" if unit else ""))
        if v > hi:
            raise self.err(key, f"{v} is above {hi} {unit} - wrong unit?")
        self.need_source(key)
        return float(v)

    def nums(self, key: str, lo: float, hi: float, unit: str, required: bool = True,
             increasing: bool = False) -> tuple[float, ...] | None:
        if not self._present(key, required):
            return None
        v = self.data[key]
        if not isinstance(v, list) or not v:
            raise self.err(key, f"expected a non-empty list of numbers ({unit})")
        for i, x in enumerate(v):
            if not is_number(x):
                raise self.err(f"{key}[{i}]", f"expected a number, got {x!r}")
            if not lo <= x <= hi:
                raise self.err(f"{key}[{i}]", f"{x} is outside {lo}..{hi} {unit}"
                               + (" (negative)" if x < 0 else " - wrong unit?"))
        if increasing:
            for i in range(1, len(v)):
                if v[i] <= v[i - 1]:
                    raise self.err(f"{key}[{i}]", f"not strictly increasing ({v[i - 1]} then {v[i]})")
        self.need_source(key)
        return tuple(float(x) for x in v)

    def int(self, key: str, lo: int, hi: int, required: bool = True) -> "int | None":
        """A whole number in lo..hi (a count), sourced like every figure."""
        if not self._present(key, required):
            return None
        v = self.data[key]
        if not is_int(v):
            raise self.err(key, f"expected a whole number, got {v!r}")
        if not lo <= v <= hi:
            raise self.err(key, f"{v} is outside {lo}..{hi}")
        self.need_source(key)
        return v

    def flag(self, key: str, default: bool) -> bool:
        """A sourced true/false setting (a kernel tunable), ``default`` when absent."""
        self.known.add(key)
        if key not in self.data:
            return default
        v = self.bool(key)
        self.need_source(key)
        return v

    def ints(self, key: str, lo: int = 0, hi: int = 63) -> tuple[int, ...]:
        v = self._get(key, _REQUIRED)
        if not isinstance(v, list) or not v or not all(is_int(x) for x in v):
            raise self.err(key, f"expected a non-empty list of integers, got {v!r}")
        if len(set(v)) != len(v) or any(not lo <= x <= hi for x in v):
            raise self.err(key, f"cpu ids must be distinct integers in {lo}..{hi}, got {v!r}")
        return tuple(v)

    def sub(self, key: str, required: bool = True, sourced: bool = True) -> "SourcedTable | None":
        if not self._present(key, required, "table"):
            return None
        return SourcedTable(self.data[key], self.path, self._f(key), sourced, self.provenance, self.rule)


_REQUIRED = object()


def read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(path, "<file>", "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "<file>", "is a directory, expected a TOML file") from None
    except OSError as e:
        raise InputError(path, "<file>", f"cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise InputError(path, "<file>", f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(path, "<syntax>", f"not valid TOML: {e}") from None
    except ValueError as e:   # a NUL byte in the path (after its subclasses above)
        raise InputError(str(path), "<file>", f"not a usable path ({e})") from None


