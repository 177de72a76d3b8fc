"""Importers of public availability traces into :class:`~swansim.apps.traces.Trace`.

Two sources, both derived from the FLASH measurement (136k users of an input-method app,
one week of 2020; Yang et al., WWW'21, redistributed by FedScale, Lai et al., ICML'22):

* FedScale ``client_behave_trace`` (a pickle): per client, availability windows
  ``active[i]..inactive[i]`` in seconds, cyclic with period ``finish_time``.
  :func:`load_fedscale` turns each window into "charging, screen off" device states and
  :func:`write_fedscale` writes a trace's availability windows back in that format.
* FLASH ``state_traces.json``: per device a ``messages`` string of
  ``"YYYY-mm-dd HH:MM:SS<TAB>event"`` lines. :func:`load_flash` replays the events into
  device-state change points. FLASH logs no app, so no foreground sessions are produced.

The mappings and their assumptions are documented in ``traces/README.md``.
"""
from __future__ import annotations

import math
import pickle
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from swansim.apps.traces import DAY_S, DeviceState, Trace, read_json_object
from swansim.errors import InputError

# FedScale carries no battery level; a constant stands in (see traces/README.md).
FEDSCALE_BATTERY_PCT = 50.0
# FLASH devices that never log a level get this one.
FLASH_UNKNOWN_BATTERY_PCT = 50.0
# Android's defaults: the low-battery broadcast at 15 %, "okay" again above 15 + 5 %.
FLASH_LOW_PCT = 15.0
FLASH_OKAY_PCT = 20.0
_FLASH_TIME_FORMAT_LEN = len("YYYY-mm-dd HH:MM:SS")


# ---------------------------------------------------------------- FedScale


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain containers, numbers and numpy scalars/arrays only: a trace must not run code."""

    _ALLOWED = {
        ("collections", "OrderedDict"),
        ("numpy", "dtype"), ("numpy", "ndarray"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not plain trace data")


def _number(value: Any, file: str, field: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(file, field, f"expected a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise InputError(file, field, f"expected a finite non-negative number, got {value!r}")
    return x


# What a FedScale trace may expand to when its clients' windows are replayed over the horizon: a
# year, and at most a million windows per client (a period of a microsecond would otherwise
# take forever to unroll).
MAX_HORIZON_S = 366 * 86400.0
MAX_WINDOWS_PER_CLIENT = 1_000_000


class _FedScaleClient:
    """One client's availability windows within one period, validated and clipped to the period."""

    def __init__(self, client_id: str, entry: Any, file: str):
        if not isinstance(entry, Mapping):
            raise InputError(file, client_id, "expected a dict with active, inactive, finish_time")
        for key in ("active", "inactive", "finish_time"):
            if key not in entry:
                raise InputError(file, f"{client_id}.{key}", "missing")
        self.period_s = _number(entry["finish_time"], file, f"{client_id}.finish_time")
        if self.period_s <= 0:
            raise InputError(file, f"{client_id}.finish_time", "must be positive")
        starts = self._times(entry["active"], file, f"{client_id}.active")
        ends = self._times(entry["inactive"], file, f"{client_id}.inactive")
        if len(starts) != len(ends):
            raise InputError(file, f"{client_id}.inactive",
                             f"{len(ends)} entries for {len(starts)} in active (must match)")
        self.windows: list[tuple[float, float]] = []
        for i, (a, b) in enumerate(zip(starts, ends)):
            if b < a:
                raise InputError(file, f"{client_id}.inactive[{i}]", f"ends ({b:g} s) before it starts ({a:g} s)")
            if i and a < ends[i - 1]:
                raise InputError(file, f"{client_id}.active[{i}]",
                                 f"starts ({a:g} s) before the previous window ends ({ends[i - 1]:g} s)")
            a, b = min(a, self.period_s), min(b, self.period_s)
            if b > a:  # zero-length windows carry no availability
                self.windows.append((a, b))

    @staticmethod
    def _times(values: Any, file: str, field: str) -> list[float]:
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise InputError(file, field, "expected a list of seconds")
        return [_number(v, file, f"{field}[{i}]") for i, v in enumerate(values)]

    def expansion(self, horizon_s: float) -> float:
        """How many windows replaying this client over ``horizon_s`` makes."""
        return math.ceil(horizon_s / self.period_s) * len(self.windows)

    def unrolled(self, horizon_s: float) -> list[tuple[float, float]]:
        """Windows repeated with the client's period over ``[0, horizon_s)``, touching ones merged."""
        out: list[tuple[float, float]] = []
        for k in range(math.ceil(horizon_s / self.period_s)):
            offset = k * self.period_s
            for a, b in self.windows:
                a, b = a + offset, min(b + offset, horizon_s)
                if a >= horizon_s:
                    break
                if out and out[-1][1] >= a:
                    out[-1] = (out[-1][0], b)
                else:
                    out.append((a, b))
        return out


def _availability_states(user: str, windows: list[tuple[float, float]], horizon_s: float,
                         battery_pct: float) -> tuple[DeviceState, ...]:
    """Change points: charging with the screen off inside windows, neither outside."""
    def state(t: float, available: bool) -> DeviceState:
        return DeviceState(user, t, False, available, battery_pct, "wifi")

    rows = [] if windows and windows[0][0] == 0 else [state(0.0, False)]
    for a, b in windows:
        rows.append(state(a, True))
        if b < horizon_s:
            rows.append(state(b, False))
    return tuple(rows)


def load_fedscale(path: str | Path, horizon_s: float | None = None,
                  battery_pct: float = FEDSCALE_BATTERY_PCT) -> Trace:
    """Read a FedScale ``client_behave_trace`` pickle into device states.

    The trace lasts ``horizon_s`` (default: the longest ``finish_time``); each client's
    windows repeat with its own ``finish_time``, as FedScale replays them. Time 0 is the
    FedScale trace's own origin (not necessarily local midnight).
    """
    file = str(path)
    try:
        with open(path, "rb") as f:
            data = _PlainUnpickler(f).load()
    except FileNotFoundError:
        raise InputError(file, "path", "file not found") from None
    except Exception as e:  # any unpickling failure is a malformed file
        raise InputError(file, "pickle", f"not a readable trace pickle ({e})") from None
    if not isinstance(data, Mapping):
        raise InputError(file, "pickle", "expected a dict keyed by client id")
    clients = {str(cid): _FedScaleClient(str(cid), entry, file) for cid, entry in data.items()}
    if horizon_s is None:
        horizon_s = max((c.period_s for c in clients.values()), default=DAY_S)
    elif not (math.isfinite(horizon_s) and horizon_s > 0):
        raise InputError(file, "horizon_s", f"must be a positive number, got {horizon_s!r}")
    if horizon_s > MAX_HORIZON_S:
        raise InputError(file, "finish_time", f"a trace of {horizon_s:.4g} s is longer than the bound of "
                                              f"{MAX_HORIZON_S:.4g} s (a year)")
    for cid, c in clients.items():
        n = c.expansion(horizon_s)
        if n > MAX_WINDOWS_PER_CLIENT:
            raise InputError(file, f"{cid}.finish_time", f"replaying {c.period_s:.4g} s periods over {horizon_s:.4g} s "
                                                         f"makes {n:.4g} windows, above the bound of "
                                                         f"{MAX_WINDOWS_PER_CLIENT:,}")
    states = {cid: _availability_states(cid, c.unrolled(horizon_s), horizon_s, battery_pct)
              for cid, c in clients.items()}
    return Trace({}, states, float(horizon_s))


def write_fedscale(trace: Trace, path: str | Path, models: Mapping[str, str] | None = None,
                   require_wifi: bool = False) -> None:
    """Write the trace's availability windows as a FedScale ``client_behave_trace`` pickle.

    ``finish_time`` is the trace length, so FedScale replays the trace cyclically. Users
    with no availability are left out (FedScale cannot replay an empty window list).
    """
    out: dict[str, dict[str, Any]] = {}
    for user in trace.users:
        windows = trace.availability_windows(user, require_wifi=require_wifi)
        if windows:
            out[user] = {
                "active": [a for a, _ in windows],
                "inactive": [b for _, b in windows],
                "finish_time": trace.duration_s,
                "duration": trace.duration_s,
                "model": (models or {}).get(user, "unknown"),
            }
    with open(path, "wb") as f:
        pickle.dump(out, f, protocol=4)


# ---------------------------------------------------------------- FLASH

# event -> (field, value); the values a state row carries.
_FLASH_EVENTS: dict[str, tuple[str, Any]] = {
    "screen_on": ("screen_on", True), "screen_unlock": ("screen_on", True),
    "screen_off": ("screen_on", False), "screen_lock": ("screen_on", False),
    "battery_charged_on": ("charging", True), "battery_charged_off": ("charging", False),
    "battery_low": ("battery_pct", "low"), "battery_okay": ("battery_pct", "okay"),
    "wifi": ("network", "wifi"), "unknown": ("network", "none"),
    "2g": ("network", "cellular"), "3g": ("network", "cellular"),
    "4g": ("network", "cellular"), "5g": ("network", "cellular"),
    "phone_off": ("phone", "off"), "phone_on": ("phone", "on"),
}


class _FlashDevice:
    """One device's log: parsed, validated, and replayed into change points."""

    def __init__(self, device_id: str, entry: Any, file: str):
        self.device_id, self.file = device_id, file
        field = f"{device_id}.messages"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("messages"), str):
            raise InputError(file, field, "expected an object with a 'messages' string")
        events = []
        for k, line in enumerate(entry["messages"].split("\n"), start=1):
            line = line.strip()
            if line:
                events.append(self._parse(line, k, field))
        events.sort(key=lambda e: e[0])  # logs are not always in order; stable for equal times
        self.events = events

    def _parse(self, line: str, k: int, field: str) -> tuple[datetime, str, Any]:
        stamp, sep, event = line.partition("\t")
        stamp, event = stamp.strip(), event.strip().lower()
        if not sep or not event:
            raise InputError(self.file, field, f"line {k}: expected 'YYYY-mm-dd HH:MM:SS<TAB>event', got {line!r}")
        try:
            if len(stamp) != _FLASH_TIME_FORMAT_LEN:
                raise ValueError
            when = datetime.fromisoformat(stamp)
        except ValueError:
            raise InputError(self.file, field, f"line {k}: bad time {stamp!r} (expected YYYY-mm-dd HH:MM:SS)") from None
        if event.endswith("%"):
            try:
                level = float(event[:-1])
            except ValueError:
                raise InputError(self.file, field, f"line {k}: bad battery level {event!r}") from None
            if not 0 <= level <= 100:
                raise InputError(self.file, field, f"line {k}: battery level out of range 0-100: {event!r}")
            return when, "battery_pct", level
        if event not in _FLASH_EVENTS:
            raise InputError(self.file, field, f"line {k}: unknown event {event!r}")
        return (when, *_FLASH_EVENTS[event])

    def _initial(self) -> dict[str, Any]:
        """The state before the first event: a toggle's first value implies the opposite before
        it; a battery level or network is taken from its first report."""
        first: dict[str, Any] = {}
        for _, name, value in self.events:
            first.setdefault(name, value)
        level = first.get("battery_pct", FLASH_UNKNOWN_BATTERY_PCT)
        return {
            "screen_on": not first["screen_on"] if "screen_on" in first else False,
            "charging": not first["charging"] if "charging" in first else False,
            "battery_pct": {"low": FLASH_LOW_PCT, "okay": FLASH_OKAY_PCT}.get(level, level),
            "network": first.get("network", "none"),
        }

    def states(self, origin: datetime) -> tuple[DeviceState, ...]:
        state = self._initial()
        rows: list[DeviceState] = []
        for i, (when, name, value) in enumerate(self.events):
            self._apply(state, name, value)
            if i + 1 < len(self.events) and self.events[i + 1][0] == when:
                continue  # one row per timestamp, after all its events
            row = DeviceState(self.device_id, (when - origin).total_seconds(), state["screen_on"],
                              state["charging"], state["battery_pct"], state["network"])
            if not rows or (row.screen_on, row.charging, row.battery_pct, row.network) != (
                    rows[-1].screen_on, rows[-1].charging, rows[-1].battery_pct, rows[-1].network):
                rows.append(row)
        return tuple(rows)

    @staticmethod
    def _apply(state: dict[str, Any], name: str, value: Any) -> None:
        if name == "phone":
            if value == "off":
                state["screen_on"], state["network"] = False, "none"
        elif name == "battery_pct" and value == "low":
            state["battery_pct"] = min(state["battery_pct"], FLASH_LOW_PCT)
        elif name == "battery_pct" and value == "okay":
            state["battery_pct"] = max(state["battery_pct"], FLASH_OKAY_PCT)
        else:
            state[name] = value


def load_flash(path: str | Path) -> Trace:
    """Read a FLASH ``state_traces.json`` into device states (no sessions: FLASH logs no apps).

    Time 0 is local midnight of the earliest day logged by any device; the trace lasts whole
    days up to the last event.
    """
    file = str(path)
    data = read_json_object(path, "json", "expected an object keyed by device id")
    devices = [_FlashDevice(str(dev), entry, file) for dev, entry in data.items()]
    devices = [d for d in devices if d.events]
    if not devices:
        return Trace({}, {}, DAY_S)
    first = min(d.events[0][0] for d in devices)
    origin = first.replace(hour=0, minute=0, second=0, microsecond=0)
    states = {d.device_id: d.states(origin) for d in devices}
    last_s = max(rows[-1].time_s for rows in states.values())
    return Trace({}, states, (math.floor(last_s / DAY_S) + 1) * DAY_S)
