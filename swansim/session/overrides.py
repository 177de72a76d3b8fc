"""Override one figure of a device profile by its dotted path: what ``--set`` sweeps.

``--set PATH=VALUE`` means: as if the profile said so. PATH is a key of the device's file
(``ambient_c``, ``thermal.polling_idle_ms``, ``kernel.sched_upmigrate``...) or, after ``soc.``,
of its SoC's file (``soc.dram_bandwidth_gbps``, ``soc.clusters.big.l2_kib_per_core``); a list
is indexed (``soc.clusters[1]``, ``thermal.trip_c[0]``) and a list of tables also by name
(``soc.clusters.big``). The value is written into the file's content and the profile is read
again by the loader (`swansim.hw.profile`): the same bounds, the same cross-field rules, every
derived figure derived again; a value the loader refuses is one line naming the ``--set``.
The field tables of device_profiles/README.md list what there is. Examples::

    ambient_c                               the room the phone is in (C)
    soc.clusters.big.l2_kib_per_core        a cluster's private L2 size (KiB)
    soc.dram_bandwidth_gbps
    thermal.sustainable_power_mw            the power_allocator governor's tunable
    thermal.trip_c[0]                       the phone's first trip point (C)

Only numbers (and true/false) can be set. A device file's ``thermal`` table holds what the
phone changes of its SoC's (``soc.thermal``); setting a field there that it does not hold adds
it.
"""
from __future__ import annotations

import copy
import re
from typing import Any

from swansim.errors import InputError
from swansim.hw.profile import DeviceSpec, load_device, load_soc
from swansim.hw.sourced import read_toml

_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)$")
_INT = re.compile(r"^[+-]?\d+$")
_SET_SOURCE = "--set (a command-line override)"


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


def _step(node: Any, key: str | int, path: str, last: bool, created: list) -> Any:
    """The key under which ``key`` is found in ``node`` (a list index for a named table)."""
    if isinstance(node, dict) and isinstance(key, str):
        if key not in node and not last:
            node[key] = {}    # a table the file does not have (a phone's own [thermal])
            created.append(node[key])
        return key
    if isinstance(node, list):
        if isinstance(key, int):
            if key >= len(node):
                raise InputError("--set", path, f"index {key} is out of range (0..{len(node) - 1})")
            return key
        for i, item in enumerate(node):
            if isinstance(item, dict) and item.get("name") == key:
                return i
        raise InputError("--set", path, f"no item named {key!r} here")
    raise InputError("--set", path, f"cannot look up {key!r} in a {type(node).__name__}")


def _value(old: Any, text: str, path: str) -> Any:
    """``text`` as the TOML value it stands for: the type of the value it replaces."""
    word = text.strip().lower()
    if isinstance(old, bool) or (old is None and word in ("true", "false")):
        if word not in ("true", "false", "1", "0"):
            raise InputError("--set", path, f"expected true or false, got {text!r}")
        return word in ("true", "1")
    if old is not None and not isinstance(old, (int, float)):
        what = "a list: set its entries ([0], [1], ...)" if isinstance(old, list) else f"a {type(old).__name__}"
        raise InputError("--set", path, f"only numbers and true/false can be set; this is {what}")
    if _INT.match(text.strip()) and (old is None or isinstance(old, int)):
        return int(text)    # TOML's integer; where the loader wants a number it takes one too
    try:
        return float(text)
    except ValueError:
        raise InputError("--set", path, f"expected a number, got {text!r}") from None


def _write(data: dict, parts: list[str | int], text: str, path: str) -> None:
    """Set the value at ``parts`` in a file's ``data``. A key the file did not have gets a
    source (the loader asks one of every figure): in the innermost table that keeps sources
    (a table's own, or its parent's under a dotted key) or in a table made here."""
    chain: list[tuple[Any, str | int]] = []
    created: list[dict] = []
    node: Any = data
    for i, key in enumerate(parts):
        how = _step(node, key, path, i == len(parts) - 1, created)
        chain.append((node, how))
        node = node[how] if i < len(parts) - 1 else node
    parent, how = chain[-1]
    old = parent.get(how) if isinstance(parent, dict) else parent[how]
    parent[how] = _value(old, text, path)
    if old is not None:
        return
    for depth in range(len(chain) - 1, -1, -1):
        table = chain[depth][0]
        if isinstance(table, dict) and (isinstance(table.get("sources"), dict) or any(table is c for c in created)):
            key = ".".join(k for _, k in chain[depth:] if isinstance(k, str))
            table.setdefault("sources", {})[key] = _SET_SOURCE
            return


# The trips are read as a whole, from three lists (profile.py `_thermal`).
_TRIP_LISTS = ("trip_c", "trip_types", "trip_hysteresis_c")


def _own_list(device: dict, soc: dict, key: str) -> None:
    """Before an entry of a thermal list is set on the phone, the phone takes the SoC's list
    (the trips' three lists together) unless its own [thermal] table has it."""
    own, base = device.setdefault("thermal", {}), soc.get("thermal", {})
    keys = _TRIP_LISTS if key in _TRIP_LISTS else (key,)
    if keys[0] in own or keys[0] not in base:
        return
    for k in keys:
        if k in base:
            own[k] = copy.deepcopy(base[k])
            src = base.get("sources", {}).get(k)
            if src:
                own.setdefault("sources", {})[k] = src


def apply_overrides(spec: DeviceSpec, overrides: tuple[tuple[str, str], ...]) -> DeviceSpec:
    """``spec`` read again from its profile files with every override written into them (a field
    given twice is refused, not the last one taken); the loader's error names the ``--set``."""
    if not overrides:
        return spec
    paths = [p for p, _ in overrides]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise InputError("--set", twice[0], "set twice; give each field once")
    device, soc = copy.deepcopy(read_toml(spec.path)), copy.deepcopy(read_toml(spec.soc.path))
    for path, text in overrides:
        parts = _parts(path)
        if parts[0] == "soc":
            if len(parts) == 1:
                raise InputError("--set", path, "name a field of the SoC's file (soc.<field>)")
            _write(soc, parts[1:], text, path)
        else:
            if parts[0] == "thermal" and len(parts) > 2:
                _own_list(device, soc, parts[1])
            _write(device, parts, text, path)
    given = ", ".join(f"{p}={t}" for p, t in overrides)
    try:
        new_soc = load_soc(spec.soc.path, data=soc)
        # a SoC alone is the generic chassis with that SoC in it (Catalogue.device)
        generic = spec.name == spec.soc.name
        return load_device(spec.path, {new_soc.name: new_soc}, soc_override=new_soc.name if generic else None,
                           data=device)
    except InputError as e:
        field = e.field if e.where == str(spec.path) else f"soc.{e.field}"
        raise InputError("--set", given, f"{field}: {e.reason}") from None


def override(spec: DeviceSpec, path: str, text: str) -> DeviceSpec:
    """``spec`` with the one figure at ``path`` set from ``text`` (`apply_overrides`)."""
    return apply_overrides(spec, ((path, text),))


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
