"""The phone's owner as data: foreground-app sessions and device-state change points.

A trace set is a directory with two CSV tables keyed by ``user_id`` (``sessions.csv`` and
``states.csv``) and an optional ``manifest.json``. Times are seconds since the trace start,
local midnight of day 0. The schema, units and validation rules are documented in
``traces/README.md``; every malformed row raises :class:`~swansim.errors.InputError` naming
the file, the line, the field and the reason.

Loading is columnar (the csv module for structure, numpy/pandas for conversion and
checks); a 100-user, 30-day synthetic trace (~275k state rows) loads in one to two seconds,
most of it spent building the record objects.
"""
from __future__ import annotations

import bisect
import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from swansim.errors import InputError

DAY_S = 86_400.0
CATEGORIES = ("messaging", "browsing", "video", "audio", "maps", "game3d", "camera")
NETWORKS = ("wifi", "cellular", "none")
SESSIONS_FILE = "sessions.csv"
STATES_FILE = "states.csv"
MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
# assumption: a session at a hundred times its category's CPU demand is beyond what any modelled
# phone runs (the heaviest category already fills its cores); a larger value is a unit mistake.
LOAD_SCALE_MAX = 100.0
# The longest trace span taken (also what `traces synth --days` may ask for): ten years.
MAX_SPAN_DAYS = 3_650
SESSION_COLUMNS = ("user_id", "start_s", "duration_s", "app_category", "load_scale")
STATE_COLUMNS = ("user_id", "time_s", "screen_on", "charging", "battery_pct", "network")
# Sessions written with millisecond times may touch after rounding; only a real overlap is an error.
_OVERLAP_TOLERANCE_S = 1e-6


@dataclass(frozen=True, slots=True)
class Session:
    """One foreground session: the owner uses one app category with the screen on."""

    user_id: str
    start_s: float
    duration_s: float
    app_category: str
    load_scale: float = 1.0  # multiplier on the category's CPU demand

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True, slots=True)
class DeviceState:
    """A change point of the device state; it holds until the user's next change point."""

    user_id: str
    time_s: float
    screen_on: bool
    charging: bool
    battery_pct: float
    network: str


@dataclass(frozen=True)
class Trace:
    """Sessions and device states of a set of users over ``[0, duration_s)``.

    ``sessions[user]`` is ordered and non-overlapping; ``states[user]`` has strictly
    increasing times. Before a user's first state row the device state is unknown.
    """

    sessions: Mapping[str, tuple[Session, ...]]
    states: Mapping[str, tuple[DeviceState, ...]]
    duration_s: float

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.sessions) | set(self.states)))

    @property
    def days(self) -> float:
        return self.duration_s / DAY_S

    def sessions_of(self, user: str) -> tuple[Session, ...]:
        return self.sessions.get(user, ())

    def states_of(self, user: str) -> tuple[DeviceState, ...]:
        return self.states.get(user, ())

    def state_at(self, user: str, time_s: float) -> DeviceState | None:
        """The state in force at ``time_s`` (None before the user's first change point)."""
        rows = self.states_of(user)
        i = bisect.bisect_right(rows, time_s, key=lambda s: s.time_s) - 1
        return rows[i] if i >= 0 else None

    def availability_windows(self, user: str, require_wifi: bool = False) -> list[tuple[float, float]]:
        """Intervals ``(start_s, end_s)`` where the phone charges with the screen off.

        This is the idle-and-charging condition of Google's FL system (Bonawitz et al.,
        MLSys'19); ``require_wifi`` adds its unmetered-network condition. Adjacent
        intervals are merged; the last state holds until ``duration_s``.
        """
        rows = self.states_of(user)
        windows: list[tuple[float, float]] = []
        for i, s in enumerate(rows):
            if s.time_s >= self.duration_s:
                break
            if not (s.charging and not s.screen_on and (s.network == "wifi" or not require_wifi)):
                continue
            end_s = rows[i + 1].time_s if i + 1 < len(rows) else self.duration_s
            end_s = min(end_s, self.duration_s)
            if windows and windows[-1][1] >= s.time_s:
                windows[-1] = (windows[-1][0], end_s)
            else:
                windows.append((s.time_s, end_s))
        return windows

    def sessions_per_day(self, user: str | None = None) -> float:
        """Mean sessions per day of one user, or the mean over all users."""
        if user is not None:
            return len(self.sessions_of(user)) / self.days
        users = self.users
        return sum(len(self.sessions_of(u)) for u in users) / (len(users) * self.days) if users else 0.0

    def session_durations_s(self, user: str | None = None) -> np.ndarray:
        users = self.users if user is None else (user,)
        return np.array([s.duration_s for u in users for s in self.sessions_of(u)], dtype=float)

    def median_session_s(self, user: str | None = None) -> float:
        """Median session length of one user, or over all sessions (nan if none)."""
        d = self.session_durations_s(user)
        return float(np.median(d)) if d.size else math.nan

    def mean_session_s(self, user: str | None = None) -> float:
        d = self.session_durations_s(user)
        return float(d.mean()) if d.size else math.nan


# ---------------------------------------------------------------- validation helpers


class _FirstProblem:
    """Collects failed checks and reports the one on the earliest line, as a reader would meet it."""

    def __init__(self, file: str):
        self.file = file
        self.best: tuple[int, int, str, str] | None = None  # (line, order, field, reason)
        self._order = 0

    def check(self, bad: np.ndarray, lines: np.ndarray, field: str, reason) -> None:
        """``bad`` marks failing rows; ``reason`` is a string or a function of the row index."""
        self._order += 1
        idx = np.flatnonzero(bad)
        if idx.size == 0:
            return
        i = int(idx[np.argmin(lines[idx])])
        candidate = (int(lines[i]), self._order, field, reason(i) if callable(reason) else reason)
        if self.best is None or candidate[:2] < self.best[:2]:
            self.best = candidate

    def raise_if_any(self) -> None:
        if self.best is not None:
            line, _, field, reason = self.best
            raise InputError(self.file, field, reason, line=line)


class _CsvColumns:
    """A CSV file read as columns of strings, with each row's line number for errors."""

    _TEXT_COLUMNS = ("user_id", "app_category", "screen_on", "charging", "network")

    def __init__(self, path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = ()):
        self.file = str(path)
        try:
            with open(path, newline="", encoding="utf-8-sig") as f:
                text = f.read()
        except FileNotFoundError:
            raise InputError(self.file, "path", "file not found") from None
        except OSError as e:
            raise InputError(self.file, "path", f"cannot read ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise InputError(self.file, "encoding", f"not UTF-8 text ({e.reason})") from None
        except ValueError as e:   # a NUL byte in the path
            raise InputError(self.file, "path", f"not a usable path ({e})") from None
        try:
            rows, lines = self._rows(text)
        except csv.Error as e:
            raise InputError(self.file, "row", f"malformed CSV ({e})") from None
        if not rows:
            raise InputError(self.file, "header", "empty file, expected a header row", line=1)
        header = [h.strip() for h in rows[0]]
        self._check_header(header, required, optional)
        rows, lines = rows[1:], lines[1:]
        keep = [i for i, r in enumerate(rows) if r and not (len(r) == 1 and not r[0].strip())]
        if len(keep) != len(rows):  # blank lines
            rows, lines = [rows[i] for i in keep], [lines[i] for i in keep]
        for r, line in zip(rows, lines):
            if len(r) != len(header):
                raise InputError(self.file, "row", f"expected {len(header)} fields, got {len(r)}", line=line)
        self.lines = np.array(lines, dtype=np.int64)
        self.columns = {}
        for j, h in enumerate(header):
            col = [r[j].strip() for r in rows] if h in self._TEXT_COLUMNS else [r[j] for r in rows]
            self.columns[h] = np.array(col, dtype=object)
        self.n = len(rows)

    @staticmethod
    def _rows(text: str) -> tuple[list[list[str]], list[int]]:
        """Parsed rows and their line numbers; without quotes a row is a line (the fast path)."""
        reader = csv.reader(text.splitlines())
        if '"' not in text:
            rows = list(reader)
            return rows, list(range(1, len(rows) + 1))
        rows, lines = [], []
        for row in reader:
            rows.append(row)
            lines.append(reader.line_num)
        return rows, lines

    def _check_header(self, header: list[str], required: tuple[str, ...], optional: tuple[str, ...]) -> None:
        known = required + optional
        for h in header:
            if h not in known:
                raise InputError(self.file, h or "header", f"unknown column (expected {', '.join(known)})", line=1)
            if header.count(h) > 1:
                raise InputError(self.file, h, "duplicate column", line=1)
        for r in required:
            if r not in header:
                raise InputError(self.file, r, "missing column", line=1)

    def text(self, name: str) -> np.ndarray:
        return self.columns[name]

    def number(self, name: str, problems: _FirstProblem, default: float | None = None) -> np.ndarray:
        """Column as floats; an empty cell takes ``default`` or is reported missing."""
        raw = self.columns.get(name)
        if raw is None:
            return np.full(self.n, default, dtype=float)
        try:
            values = raw.astype(float)  # fast path; a bad cell sends us to the cell-by-cell parse
        except ValueError:
            values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=float, copy=True)
        empty = np.char.str_len(raw.astype(str)) == 0 if np.isnan(values).any() else np.zeros(self.n, dtype=bool)
        if default is not None:
            values[empty] = default
        else:
            problems.check(empty, self.lines, name, "missing value")
        problems.check(~empty & ~np.isfinite(values), self.lines, name,
                       lambda i: f"not a finite number: {raw[i]!r}")
        return values


def _group_by_user(users: np.ndarray) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Row order that keeps each user's rows in file order, and each user's slice of that order."""
    codes, uniques = pd.factorize(users)
    order = np.argsort(codes, kind="stable")
    bounds = [0, *(np.flatnonzero(np.diff(codes[order])) + 1).tolist(), order.size]
    return order, [(str(uniques[codes[order[lo]]]), lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _records(cls: type, order: np.ndarray, groups: list[tuple[str, int, int]],
             columns: list[np.ndarray]) -> dict[str, tuple]:
    """Records of ``cls`` per user, built column-wise (one pass per column, not per cell)."""
    cols = [np.asarray(c)[order].tolist() for c in columns]
    return {u: tuple(map(cls, *(c[lo:hi] for c in cols))) for u, lo, hi in groups}


def _same_user_as_previous(users: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Boolean mask over ``order``: this row's user equals the previous row's (in user order)."""
    same = np.zeros(order.size, dtype=bool)
    if order.size > 1:
        same[1:] = users[order[1:]] == users[order[:-1]]
    return same


# ---------------------------------------------------------------- loaders


def load_sessions(path: str | Path) -> dict[str, tuple[Session, ...]]:
    """Read a sessions table; rows of one user must be in time order and must not overlap."""
    t = _CsvColumns(path, SESSION_COLUMNS[:4], SESSION_COLUMNS[4:])
    p = _FirstProblem(t.file)
    users = t.text("user_id")
    p.check(users == "", t.lines, "user_id", "missing value")
    start = t.number("start_s", p)
    p.check(start < 0, t.lines, "start_s", lambda i: f"negative time {start[i]:g} s")
    duration = t.number("duration_s", p)
    p.check(duration < 0, t.lines, "duration_s", lambda i: f"negative duration {duration[i]:g} s")
    p.check(duration == 0, t.lines, "duration_s", "zero duration")
    cats = t.text("app_category")
    p.check(~np.isin(cats, CATEGORIES), t.lines, "app_category",
            lambda i: f"unknown category {cats[i]!r} (expected one of {', '.join(CATEGORIES)})")
    scale = t.number("load_scale", p, default=1.0)
    p.check(scale <= 0, t.lines, "load_scale", lambda i: f"must be positive, got {scale[i]:g}")
    p.check(scale > LOAD_SCALE_MAX, t.lines, "load_scale",
            lambda i: f"{scale[i]:g} is above {LOAD_SCALE_MAX:g} (times the category's CPU demand)")

    order, groups = _group_by_user(users)
    same = _same_user_as_previous(users, order)
    prev_start, prev_end = np.full(order.size, -np.inf), np.full(order.size, -np.inf)
    prev_start[1:], prev_end[1:] = start[order[:-1]], (start + duration)[order[:-1]]
    lines_o = t.lines[order]
    p.check(same & (start[order] < prev_start), lines_o, "start_s",
            lambda i: f"not in time order for user {users[order[i]]!r} ({start[order[i]]:g} s after "
                      f"{prev_start[i]:g} s on line {lines_o[i - 1]})")
    p.check(same & (start[order] >= prev_start) & (start[order] < prev_end - _OVERLAP_TOLERANCE_S), lines_o,
            "start_s", lambda i: f"overlaps the previous session of user {users[order[i]]!r} "
                                 f"(line {lines_o[i - 1]} ends at {prev_end[i]:g} s)")
    p.raise_if_any()

    return _records(Session, order, groups, [users, start, duration, cats, scale])


def load_states(path: str | Path) -> dict[str, tuple[DeviceState, ...]]:
    """Read a device-state table; times of one user must strictly increase."""
    t = _CsvColumns(path, STATE_COLUMNS)
    p = _FirstProblem(t.file)
    users = t.text("user_id")
    p.check(users == "", t.lines, "user_id", "missing value")
    time_s = t.number("time_s", p)
    p.check(time_s < 0, t.lines, "time_s", lambda i: f"negative time {time_s[i]:g} s")
    flags = {}
    for name in ("screen_on", "charging"):
        raw = t.text(name)
        p.check(~np.isin(raw, ("0", "1")), t.lines, name, lambda i, raw=raw: f"expected 0 or 1, got {raw[i]!r}")
        flags[name] = raw == "1"
    battery = t.number("battery_pct", p)
    p.check((battery < 0) | (battery > 100), t.lines, "battery_pct",
            lambda i: f"out of range 0-100: {float(battery[i])!r}")
    network = t.text("network")
    p.check(~np.isin(network, NETWORKS), t.lines, "network",
            lambda i: f"unknown network {network[i]!r} (expected one of {', '.join(NETWORKS)})")

    order, groups = _group_by_user(users)
    same = _same_user_as_previous(users, order)
    prev = np.full(order.size, -np.inf)
    prev[1:] = time_s[order[:-1]]
    lines_o = t.lines[order]
    p.check(same & (time_s[order] <= prev), lines_o, "time_s",
            lambda i: f"not increasing for user {users[order[i]]!r} ({time_s[order[i]]:g} s after "
                      f"{prev[i]:g} s on line {lines_o[i - 1]})")
    p.raise_if_any()

    return _records(DeviceState, order, groups,
                    [users, time_s, flags["screen_on"], flags["charging"], battery, network])


def read_json_object(path: str | Path, field: str, reason: str) -> dict:
    """A JSON file whose top level must be an object; any failure is an InputError."""
    file = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise InputError(file, "path", "file not found") from None
    except OSError as e:
        raise InputError(file, "path", f"cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise InputError(file, "encoding", f"not UTF-8 text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise InputError(file, "json", e.msg, line=e.lineno) from None
    if not isinstance(data, dict):
        raise InputError(file, field, reason)
    return data


def load_manifest(path: str | Path) -> dict[str, Any]:
    """Read ``manifest.json``: a JSON object; ``duration_s``, if given, must be a positive number."""
    file = str(path)
    manifest = read_json_object(path, "manifest", "expected a JSON object")
    duration = manifest.get("duration_s")
    if duration is not None and not (isinstance(duration, (int, float)) and math.isfinite(duration)
                                     and duration > 0):
        raise InputError(file, "duration_s", f"expected a positive number, got {duration!r}")
    return manifest


def load_trace(directory: str | Path) -> Trace:
    """Read a trace set: ``sessions.csv``, ``states.csv`` and, if present, ``manifest.json``.

    Without a manifest ``duration_s`` is the last time in the data rounded up to whole days.
    """
    d = Path(directory)
    if not d.is_dir():
        raise InputError(str(d), "path", ("not a directory" if d.exists() else "no such directory")
                         + f" (a trace set is a directory with {SESSIONS_FILE} and {STATES_FILE})")
    sessions = load_sessions(d / SESSIONS_FILE)
    states = load_states(d / STATES_FILE)
    # A user with device states but no session in the file had no foreground use: keep them.
    # One with sessions but no states has no charger, screen or battery to simulate.
    stateless = sorted(set(sessions) - set(states))
    if stateless:
        raise InputError(str(d / SESSIONS_FILE), "user_id",
                         f"{stateless[0]!r} has sessions but no rows in {STATES_FILE} (its charger, screen and "
                         "battery are unknown)")
    sessions = {u: sessions.get(u, ()) for u in sorted(set(sessions) | set(states))}
    last_s = _last_time_s(sessions, states)
    if (d / MANIFEST_FILE).exists():
        duration_s = load_manifest(d / MANIFEST_FILE).get("duration_s")
        if duration_s is not None and last_s > duration_s + _OVERLAP_TOLERANCE_S:
            raise InputError(str(d / MANIFEST_FILE), "duration_s",
                             f"data extends to {last_s:g} s, past duration_s {duration_s:g} s")
    else:
        duration_s = None
    if duration_s is None:
        duration_s = max(1, math.floor(last_s / DAY_S) + 1) * DAY_S
    if duration_s > MAX_SPAN_DAYS * DAY_S:
        where = d / MANIFEST_FILE if (d / MANIFEST_FILE).exists() else d / STATES_FILE
        raise InputError(str(where), "duration_s" if where.name == MANIFEST_FILE else "time_s",
                         f"the trace spans {duration_s / DAY_S:.3g} days, more than {MAX_SPAN_DAYS} (ten years): "
                         "seconds given in another unit?")
    return Trace(sessions, states, float(duration_s))


def _last_time_s(sessions: Mapping[str, tuple[Session, ...]], states: Mapping[str, tuple[DeviceState, ...]]) -> float:
    ends = [rows[-1].end_s for rows in sessions.values() if rows]
    ends += [rows[-1].time_s for rows in states.values() if rows]
    return max(ends, default=0.0)


# ---------------------------------------------------------------- writers


def _write_csv(path: str | Path, header: tuple[str, ...], rows: Iterable[tuple]) -> None:
    from swansim.results import atomic

    with atomic(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def write_sessions(sessions: Mapping[str, Iterable[Session]], path: str | Path) -> None:
    """Write a sessions table (times at ms resolution), users in sorted order."""
    _write_csv(path, SESSION_COLUMNS, (
        (s.user_id, f"{s.start_s:.3f}", f"{s.duration_s:.3f}", s.app_category, f"{s.load_scale:g}")
        for u in sorted(sessions) for s in sessions[u]))


def write_states(states: Mapping[str, Iterable[DeviceState]], path: str | Path) -> None:
    """Write a device-state table (times at ms, battery at 0.1 % resolution), users in sorted order."""
    _write_csv(path, STATE_COLUMNS, (
        (s.user_id, f"{s.time_s:.3f}", int(s.screen_on), int(s.charging), f"{s.battery_pct:.1f}", s.network)
        for u in sorted(states) for s in states[u]))


def write_trace(trace: Trace, directory: str | Path, manifest: Mapping[str, Any] | None = None) -> Path:
    """Write a trace set to ``directory`` (created if needed); returns the directory.

    The manifest always records ``format_version`` and ``duration_s``; ``manifest`` adds keys.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    write_sessions(trace.sessions, d / SESSIONS_FILE)
    write_states(trace.states, d / STATES_FILE)
    from swansim.results import sha256_of, write_text

    meta = {"format_version": FORMAT_VERSION, "duration_s": trace.duration_s, "files": [SESSIONS_FILE, STATES_FILE],
            "sha256": {f: sha256_of(d / f) for f in (SESSIONS_FILE, STATES_FILE)},
            "users": len(trace.users), **(manifest or {})}
    write_text(d / MANIFEST_FILE, json.dumps(meta, indent=2) + "\n")
    return d
