"""What a client's phone is doing at any time: its base user's traced state, shifted and replayed.

A fleet client is a base user's trace seen through a time shift (the paper's recipe: each base
user copied 24 times, one hour apart). Server time ``t_s`` starts at 0; a client shifted by
``shift_s`` lives at local time ``u = t_s + shift_s`` and sees its base user's trace at
``u mod D`` (``D`` = the trace's duration): traces are **replayed cyclically**, as FedScale
replays its availability trace. Before a user's first change point the state is the last
row's (the previous cycle's), so a user with any row has a known state at every time; a user
with no row is never known, hence never online.

:class:`UserTraces` holds the base users' rows once, as flat numpy arrays: clients reference a
base user and a shift, never a copy. :func:`snapshot` reads the state of every client at one
time (vectorised per base user); :class:`Timeline` is one client's view over time, handed to the
local-cost callable so that a policy can see what happens during its training.

Which states allow training is not decided here: that is the policy's ``admit(state)``.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from swansim.apps.traces import CATEGORIES, DAY_S, NETWORKS, Trace

_CHARGING, _SCREEN = 1, 2  # bits of UserTraces.flags
NO_APP = -1


@dataclass(frozen=True, slots=True)
class ClientState:
    """A client's state at one time: what a policy's ``admit`` sees.

    ``battery_pct`` is the owner's battery with the training loan taken out
    (``traced_battery_pct - 100 * loan_j / capacity``), the level the phone would really show.
    """

    time_s: float                # server time
    local_time_s: float          # the client's clock: time since local midnight of its day 0
    battery_pct: float
    traced_battery_pct: float
    charging: bool
    screen_on: bool
    network: str
    app: str | None              # foreground app category, None when no session runs
    loan_j: float

    @property
    def hour(self) -> float:
        """Local hour of day, 0-24."""
        return (self.local_time_s % DAY_S) / 3600.0


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of local time with one traced battery level and charging state."""

    start_s: float
    end_s: float
    battery_pct: float
    charging: bool


class UserTraces:
    """The base users' device states and sessions, flat and shared by every client.

    Per user ``k`` its rows are ``row_ptr[k]:row_ptr[k+1]`` of the row arrays (the first at
    time 0, see the module docstring), its sessions ``ses_ptr[k]:ses_ptr[k+1]`` and its
    charging intervals ``chg_ptr[k]:chg_ptr[k+1]``, all in trace time ``[0, duration_s)``.
    """

    def __init__(self, trace: Trace, users: Sequence[str]):
        self.user_ids = tuple(users)
        self.duration_s = float(trace.duration_s)
        d = self.duration_s
        times, battery, flags, network, row_ptr = [], [], [], [], [0]
        s_start, s_end, s_app, ses_ptr = [], [], [], [0]
        c_start, c_end, chg_ptr = [], [], [0]
        usage, charged, plugged = [], [], []
        net_code = {n: i for i, n in enumerate(NETWORKS)}
        app_code = {c: i for i, c in enumerate(CATEGORIES)}
        for u in self.user_ids:
            rows = [s for s in trace.states_of(u) if s.time_s < d]
            levels = [s.battery_pct for s in rows]
            if rows and rows[0].time_s > 0.0:  # cyclic replay: the last state holds across the wrap
                rows.insert(0, rows[-1])
                t = [0.0] + [s.time_s for s in rows[1:]]
            else:
                t = [s.time_s for s in rows]
            b = [s.battery_pct for s in rows]
            f = [_CHARGING * s.charging + _SCREEN * s.screen_on for s in rows]
            times += t
            battery += b
            flags += f
            network += [net_code[s.network] for s in rows]
            row_ptr.append(len(times))
            for s in trace.sessions_of(u):
                if s.start_s < d:
                    s_start.append(s.start_s)
                    s_end.append(min(s.end_s, d))
                    s_app.append(app_code[s.app_category])
            ses_ptr.append(len(s_start))
            merged = _merged([(a, e) for a, e, fl in zip(t, t[1:] + [d], f) if fl & _CHARGING])
            c_start += [a for a, _ in merged]
            c_end += [e for _, e in merged]
            chg_ptr.append(len(c_start))
            days = d / DAY_S
            # The wrap from the last row to the first is the replay's seam, not the owner's use.
            steps = [y - x for x, y in zip(levels, levels[1:])]
            usage.append(sum(-x for x in steps if x < 0.0) / days)
            charged.append(sum(x for x in steps if x > 0.0) / days)
            plugged.append(sum(e - a for a, e in merged) / days)
        self.time_s = np.array(times, dtype=np.float64)
        self.battery_pct = np.array(battery, dtype=np.float32)
        self.flags = np.array(flags, dtype=np.uint8)
        self.network = np.array(network, dtype=np.int8)
        self.row_ptr = np.array(row_ptr, dtype=np.int64)
        self.ses_start_s = np.array(s_start, dtype=np.float64)
        self.ses_end_s = np.array(s_end, dtype=np.float64)
        self.ses_app = np.array(s_app, dtype=np.int8)
        self.ses_ptr = np.array(ses_ptr, dtype=np.int64)
        self.chg_start_s = np.array(c_start, dtype=np.float64)
        self.chg_end_s = np.array(c_end, dtype=np.float64)
        self.chg_ptr = np.array(chg_ptr, dtype=np.int64)
        self.usage_pct_per_day = np.array(usage, dtype=np.float64)
        self.charged_pct_per_day = np.array(charged, dtype=np.float64)   # the level's rises
        self.plugged_s_per_day = np.array(plugged, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.user_ids)

    def __getstate__(self) -> dict:
        state = dict(vars(self))
        state.pop("_lists", None)   # a process's own cache, rebuilt on use
        return state

    def user_lists(self, user: int) -> "_UserLists":
        """One user's rows and sessions as Python lists, built once per process: a single
        client's lookups (`Timeline`) bisect them, where numpy's per-call overhead would be
        most of the cost. The values are the arrays' own."""
        cache = vars(self).setdefault("_lists", {})
        got = cache.get(user)
        if got is None:
            r, s = slice(self.row_ptr[user], self.row_ptr[user + 1]), slice(self.ses_ptr[user], self.ses_ptr[user + 1])
            got = cache[user] = _UserLists(
                self.time_s[r].tolist(), self.battery_pct[r].tolist(), self.flags[r].tolist(),
                self.network[r].tolist(), self.ses_start_s[s].tolist(), self.ses_end_s[s].tolist(),
                self.ses_app[s].tolist())
        return got

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))

    def known(self, user: int) -> bool:
        return bool(self.row_ptr[user + 1] > self.row_ptr[user])

    def trace_time(self, local_s: np.ndarray | float) -> np.ndarray | float:
        return np.mod(local_s, self.duration_s)

    def row_at(self, user: int, tau_s: np.ndarray) -> np.ndarray:
        """Global row index in force at trace times ``tau_s`` (user must be known)."""
        lo, hi = self.row_ptr[user], self.row_ptr[user + 1]
        return lo + np.searchsorted(self.time_s[lo:hi], tau_s, side="right") - 1

    def app_at(self, user: int, tau_s: np.ndarray) -> np.ndarray:
        """Foreground category code at trace times ``tau_s`` (NO_APP outside sessions)."""
        lo, hi = self.ses_ptr[user], self.ses_ptr[user + 1]
        tau_s = np.asarray(tau_s, dtype=np.float64)
        if hi == lo:
            return np.full(tau_s.shape, NO_APP, dtype=np.int8)
        i = np.searchsorted(self.ses_start_s[lo:hi], tau_s, side="right") - 1
        j = lo + np.maximum(i, 0)
        inside = (i >= 0) & (tau_s < self.ses_end_s[j])
        return np.where(inside, self.ses_app[j], NO_APP).astype(np.int8)

    def next_change_local(self, user: int, local_s: float) -> float:
        """The first local time after ``local_s`` whose trace time (`trace_time`, what every
        lookup reads) has reached the next row, session start or end, or the wrap.

        Trace times are compared as the lookups compute them: a change is after ``local_s``
        when it lies beyond ``local_s``'s trace time, and the time returned is moved up by
        rounding steps until its own trace time reaches the change (the cycle's start plus
        the change's offset can land a step short of it)."""
        d = self.duration_s
        tau = local_s % d   # `trace_time` for one time: Python's float modulo is numpy's
        lists = self.user_lists(user)
        nxt = d  # the wrap
        for arr in (lists.time_s, lists.ses_start_s, lists.ses_end_s):
            i = bisect_right(arr, tau)
            if i < len(arr) and arr[i] < nxt:
                nxt = arr[i]
        out = local_s - tau + nxt
        while (out % d < nxt) if nxt < d else (out % d > 0.5 * d):
            out = math.nextafter(out, math.inf)
        return out

    def segments(self, user: int, u0_s: float, u1_s: float) -> Iterator[Segment]:
        """Traced battery and charging over local time ``[u0_s, u1_s)``, split at rows, wraps and midnights."""
        lo, hi = int(self.row_ptr[user]), int(self.row_ptr[user + 1])
        if hi == lo or u1_s <= u0_s:
            return
        d = self.duration_s
        cycle = math.floor(u0_s / d)
        i = int(self.row_at(user, np.float64(u0_s - cycle * d)))
        while True:
            base = cycle * d
            start = max(u0_s, base + self.time_s[i])
            if start >= u1_s:
                return
            end = min(u1_s, base + (self.time_s[i + 1] if i + 1 < hi else d))
            battery, charging = float(self.battery_pct[i]), bool(self.flags[i] & _CHARGING)
            for a, b in _split_days(start, end):
                yield Segment(a, b, battery, charging)
            i += 1
            if i == hi:
                i, cycle = lo, cycle + 1

    def charging_segments(self, user: int, u0_s: float, u1_s: float) -> Iterator[Segment]:
        """Only the charging stretches of ``[u0_s, u1_s)`` (battery level not read: NaN)."""
        lo, hi = int(self.chg_ptr[user]), int(self.chg_ptr[user + 1])
        if hi == lo or u1_s <= u0_s:
            return
        d = self.duration_s
        cycle = math.floor(u0_s / d)
        j = lo + int(np.searchsorted(self.chg_end_s[lo:hi], u0_s - cycle * d, side="right"))
        while True:
            if j == hi:
                j, cycle = lo, cycle + 1
            base = cycle * d
            start = max(u0_s, base + self.chg_start_s[j])
            if start >= u1_s:
                return
            end = min(u1_s, base + self.chg_end_s[j])
            for a, b in _split_days(start, end):
                yield Segment(a, b, math.nan, True)
            j += 1


@dataclass(frozen=True, slots=True)
class _UserLists:
    """One base user's rows and sessions as Python lists (`UserTraces.user_lists`)."""

    time_s: list[float]
    battery_pct: list[float]
    flags: list[int]
    network: list[int]
    ses_start_s: list[float]
    ses_end_s: list[float]
    ses_app: list[int]

    def app_at(self, tau_s: float) -> int:
        """`UserTraces.app_at` at one trace time."""
        i = bisect_right(self.ses_start_s, tau_s) - 1
        return self.ses_app[i] if i >= 0 and tau_s < self.ses_end_s[i] else NO_APP


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted intervals with touching ones joined."""
    out: list[tuple[float, float]] = []
    for a, e in intervals:
        if out and out[-1][1] >= a:
            out[-1] = (out[-1][0], e)
        else:
            out.append((a, e))
    return out


def _split_days(a: float, b: float) -> Iterator[tuple[float, float]]:
    """``[a, b)`` cut at local midnights."""
    while a < b:
        midnight = (math.floor(a / DAY_S) + 1) * DAY_S
        end = min(b, midnight)
        if end > a:
            yield a, end
        a = end if end > a else midnight


@dataclass(frozen=True)
class Snapshot:
    """Traced state of every client at one server time (arrays indexed by client)."""

    time_s: float
    known: np.ndarray          # bool: the base user has a trace
    battery_pct: np.ndarray    # traced level
    charging: np.ndarray
    screen_on: np.ndarray
    network: np.ndarray        # code into NETWORKS
    app: np.ndarray            # code into CATEGORIES, NO_APP when none

    def state(self, i: int, shift_s: float, loan_j: float, capacity_j: float) -> ClientState:
        flags = _CHARGING * bool(self.charging[i]) + _SCREEN * bool(self.screen_on[i])
        return _state(self.time_s, shift_s, float(self.battery_pct[i]), flags, int(self.network[i]),
                      int(self.app[i]), loan_j, capacity_j)


def _state(t_s: float, shift_s: float, traced_pct: float, flags: int, network: int, app: int,
           loan_j: float, capacity_j: float) -> ClientState:
    return ClientState(
        time_s=t_s, local_time_s=t_s + shift_s,
        battery_pct=traced_pct - 100.0 * loan_j / capacity_j, traced_battery_pct=traced_pct,
        charging=bool(flags & _CHARGING), screen_on=bool(flags & _SCREEN), network=NETWORKS[network],
        app=None if app == NO_APP else CATEGORIES[app], loan_j=loan_j)


def snapshot(traces: UserTraces, user_idx: np.ndarray, shift_s: np.ndarray, t_s: float) -> Snapshot:
    """The traced state of every client (base user ``user_idx[i]``, shift ``shift_s[i]``) at ``t_s``."""
    n = user_idx.size
    known = np.zeros(n, dtype=bool)
    battery = np.full(n, np.nan)
    flags = np.zeros(n, dtype=np.uint8)
    network = np.zeros(n, dtype=np.int8)
    app = np.full(n, NO_APP, dtype=np.int8)
    order = np.argsort(user_idx, kind="stable")
    users, starts = np.unique(user_idx[order], return_index=True)
    for u, lo, hi in zip(users.tolist(), starts.tolist(), [*starts[1:].tolist(), n]):
        if not traces.known(u):
            continue
        idx = order[lo:hi]
        tau = traces.trace_time(t_s + shift_s[idx])
        rows = traces.row_at(u, tau)
        known[idx] = True
        battery[idx] = traces.battery_pct[rows]
        flags[idx] = traces.flags[rows]
        network[idx] = traces.network[rows]
        app[idx] = traces.app_at(u, tau)
    return Snapshot(t_s, known, battery, (flags & _CHARGING) > 0, (flags & _SCREEN) > 0, network, app)


class Timeline:
    """One client's traced states over time, with its loan as of the request: a policy's window on the future.

    ``state_at`` and ``changes`` hold the loan fixed at ``loan_j``; the energy the training
    itself draws is the caller's to account for.
    """

    def __init__(self, traces: UserTraces, user: int, shift_s: float, loan_j: float, capacity_j: float):
        self.traces, self.user, self.shift_s = traces, user, float(shift_s)
        self.loan_j, self.capacity_j = float(loan_j), float(capacity_j)

    def state_at(self, t_s: float) -> ClientState | None:
        """The state at server time ``t_s`` (None if the base user has no trace)."""
        tr, u = self.traces, self.user
        if not tr.known(u):
            return None
        lists = tr.user_lists(u)
        tau = (t_s + self.shift_s) % tr.duration_s   # `UserTraces.trace_time` for one time
        r = bisect_right(lists.time_s, tau) - 1
        return _state(t_s, self.shift_s, lists.battery_pct[r], lists.flags[r], lists.network[r],
                      lists.app_at(tau), self.loan_j, self.capacity_j)

    def next_change_s(self, t_s: float) -> float:
        """Server time of the next traced change (a state row, or a session start or end) after
        ``t_s``: the first time whose state (`state_at`) is the one the change brings."""
        shift = self.shift_s
        local = self.traces.next_change_local(self.user, t_s + shift)
        t = local - shift
        while t + shift < local:   # the shift's sum a rounding step short
            t = max(t + math.ulp(local), math.nextafter(t, math.inf))
        return t

    def changes(self, t0_s: float, t1_s: float) -> Iterator[ClientState]:
        """The state at ``t0_s`` and at every traced change in ``(t0_s, t1_s)``."""
        if not self.traces.known(self.user):
            return
        t = t0_s
        while t < t1_s:
            yield self.state_at(t)
            t = self.next_change_s(t)
