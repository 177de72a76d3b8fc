"""Override one figure of a device profile by its dotted path: what ``--set`` sweeps.

A path walks the `DeviceSpec` dataclasses from the device: fields by name, tuples by index
(``clusters[1]``) or, for clusters and trip points, by name or kind (``clusters.big``),
dicts by key (``rc.capacity_j_per_k.battery``). Examples::

    ambient_c                               the room the phone is in (C)
    soc.clusters.big.l2_kib_per_core        a cluster's private L2 size (KiB)
    soc.dram_bandwidth_gbps
    thermal.sustainable_power_mw            the power_allocator governor's tunable
    thermal.trips[0].temp_c

Only numbers (and true/false) can be set, with the field's own type; a figure that cannot be
negative (any name but a temperature in C) must not be. The device's own thermal zone is
``thermal`` (``soc.thermal`` is the SoC file's default, used only where a device gives none).
"""
from __future__ import annotations

import math
import re
from dataclasses import fields, is_dataclass, replace
from typing import Any

from swansim.errors import InputError

_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)$")


def _parts(path: str) -> list[str | int]:
    """``soc.clusters[1].l2_kib_per_core`` -> ["soc", "clusters", 1, "l2_kib_per_core"]."""
    out: list[str | int] = []
    for piece in path.split("."):
        m = _PART.match(piece)
        if not m:
            raise InputError("--set", path, f"{piece!r} is not a field name or name[index]")
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def _child(obj: Any, key: str | int, path: str) -> tuple[Any, Any]:
    """(child, how to address it) of ``obj`` at ``key``; InputError naming the path if none."""
    if is_dataclass(obj) and isinstance(key, str):
        names = [f.name for f in fields(obj)]
        if key not in names:
            raise InputError("--set", path, f"no field {key!r} here (fields: {', '.join(names)})")
        return getattr(obj, key), key
    if isinstance(obj, tuple):
        if isinstance(key, int):
            if key >= len(obj):
                raise InputError("--set", path, f"index {key} is out of range (0..{len(obj) - 1})")
            return obj[key], key
        for i, item in enumerate(obj):
            if getattr(item, "name", None) == key or getattr(item, "kind", None) == key:
                return item, i
        raise InputError("--set", path, f"no item named {key!r} here")
    if isinstance(obj, dict) and isinstance(key, str):
        if key not in obj:
            raise InputError("--set", path, f"no key {key!r} here (keys: {', '.join(map(str, obj))})")
        return obj[key], key
    raise InputError("--set", path, f"cannot look up {key!r} in a {type(obj).__name__}")


def _with(obj: Any, how: Any, value: Any) -> Any:
    if is_dataclass(obj):
        return replace(obj, **{how: value})
    if isinstance(obj, tuple):
        return obj[:how] + (value,) + obj[how + 1:]
    return {**obj, how: value}


def _convert(old: Any, text: str, name: str, path: str) -> Any:
    if isinstance(old, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise InputError("--set", path, f"expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if not isinstance(old, (int, float)):
        raise InputError("--set", path, f"only numbers can be set; this is a {type(old).__name__}")
    try:
        value = int(text) if isinstance(old, int) else float(text)
    except ValueError:
        kind = "an integer" if isinstance(old, int) else "a number"
        raise InputError("--set", path, f"expected {kind}, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError("--set", path, f"expected a finite number, got {text!r}")
    if value < 0 and not name.endswith("_c"):
        raise InputError("--set", path, f"must not be negative, got {text!r}")
    return value


def override(spec: Any, path: str, text: str) -> Any:
    """A copy of ``spec`` (a dataclass tree) with the figure at ``path`` set from ``text``."""
    parts = _parts(path)
    chain = [(spec, None)]
    for key in parts:
        child, how = _child(chain[-1][0], key, path)
        chain[-1] = (chain[-1][0], how)
        chain.append((child, None))
    leaf_name = next(p for p in reversed(parts) if isinstance(p, str))
    value = _convert(chain[-1][0], text, leaf_name, path)
    for obj, how in reversed(chain[:-1]):
        value = _with(obj, how, value)
    return value


def apply_overrides(spec: Any, overrides: tuple[tuple[str, str], ...]) -> Any:
    """``spec`` with every override applied; a field given twice is refused (not the last wins)."""
    paths = [p for p, _ in overrides]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise InputError("--set", twice[0], "set twice; give each field once")
    for path, text in overrides:
        spec = override(spec, path, text)
    return spec


def parse_set(text: str) -> tuple[str, tuple[str, ...]]:
    """``FIELD=V1,V2`` -> (FIELD, (V1, V2)); the values are checked against a spec later."""
    field, sep, values = text.partition("=")
    field = field.strip()
    vals = tuple(v.strip() for v in values.split(",") if v.strip())
    if not sep or not field or not vals:
        raise InputError("--set", "set", f"expected FIELD=V1,V2,..., got {text!r}")
    return field, distinct_values(field, vals)


def distinct_values(field: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """``values`` of one swept field, refused if one is given twice (the same configuration twice)."""
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise InputError("--set", field, f"value {twice[0]!r} given twice (each would run the same configuration)")
    return values
