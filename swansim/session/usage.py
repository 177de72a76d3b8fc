"""The phone's owner over one run: foreground sessions, charger, battery, a benchmark session.

From a trace set (`swansim.apps.traces`), a synthetic owner drawn from a seed
(`swansim.apps.synth`, one user, one day) or nobody (an idle phone: screen off, discharging).
A trace window is shifted so that the run starts at 0; sessions cut by the window are cut.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from swansim.apps.traces import Session, Trace, load_trace
from swansim.errors import InputError

if TYPE_CHECKING:
    from swansim.session.phone import RunConfig

# With --start auto, this share of the run (at most AUTO_LEAD_MAX_S) leads up to the owner's
# first session: a short run sees the idle phone (Swan explores) and then the owner at work.
AUTO_LEAD_SHARE = 0.5
AUTO_LEAD_MAX_S = 120.0
# A run's battery without a trace: a phone that is not low (assumption: 80 %, well above any
# policy's minimum level, so admission does not depend on it).
IDLE_BATTERY_PCT = 80.0
# A benchmark session's share of the trace window when a run lasts until it ends (a bound: the
# benchmark, as long as PCMark's Work test, takes ~10 min alone, up to twice that loaded).
BENCH_WINDOW_S = 3600.0


@dataclass(frozen=True)
class Usage:
    """The owner over one run, in run time (0 = the run's start)."""

    sessions: tuple[Session, ...] = ()
    charging: tuple[tuple[float, bool], ...] = ((0.0, False),)   # change points, the first at 0
    battery_pct: float = IDLE_BATTERY_PCT
    start_s: float = 0.0     # trace time of the run's start
    user: str = "-"
    bench_at_s: float | None = None   # the Work-like benchmark app starts then (run time)

    @classmethod
    def idle(cls) -> "Usage":
        """Nobody touches the phone: screen off, discharging."""
        return cls()

    @classmethod
    def from_trace(cls, trace: Trace, user: str, start_s: float | None, duration_s: float) -> "Usage":
        """``user``'s sessions and charger over ``[start, start + duration)``, shifted to 0."""
        sessions = trace.sessions_of(user)
        if start_s is None:
            start_s = auto_start_s(trace, user, duration_s)
        if start_s >= trace.duration_s:
            raise InputError("--start", "start_s", f"{start_s:g} s is past the trace's end ({trace.duration_s:g} s)")
        end_s = start_s + duration_s
        shifted = tuple(replace(s, start_s=max(s.start_s, start_s) - start_s,
                                duration_s=min(s.end_s, end_s) - max(s.start_s, start_s))
                        for s in sessions if s.end_s > start_s and s.start_s < end_s)
        first = trace.state_at(user, start_s)
        charging = [(0.0, bool(first.charging) if first else False)]
        for st in trace.states_of(user):
            if start_s < st.time_s < end_s and st.charging != charging[-1][1]:
                charging.append((st.time_s - start_s, st.charging))
        battery = first.battery_pct if first else IDLE_BATTERY_PCT
        return cls(shifted, tuple(charging), battery, start_s, user)


def auto_start_s(trace: Trace, user: str, duration_s: float) -> float:
    """The run starts so that its first part (AUTO_LEAD_*) leads up to the first session the
    owner starts on battery after a lead-up on battery (else the first session, else 0)."""
    sessions = trace.sessions_of(user)
    if not sessions:
        return 0.0
    lead = min(AUTO_LEAD_SHARE * duration_s, AUTO_LEAD_MAX_S)
    for s in sessions:
        start = max(0.0, s.start_s - lead)
        st = trace.state_at(user, start)
        on_charger = st is not None and st.charging
        on_charger |= any(x.charging for x in trace.states_of(user) if start < x.time_s <= s.start_s)
        if not on_charger:
            return start
    return max(0.0, sessions[0].start_s - lead)


def usage_of(cfg: RunConfig) -> Usage:
    return replace(_owner(cfg), bench_at_s=cfg.bench_at_s)


def _owner(cfg: RunConfig) -> Usage:
    if cfg.trace is None and not cfg.synthetic:
        return Usage.idle()
    if cfg.synthetic:
        from swansim.apps.synth import synthesize
        trace = synthesize(1, 1, cfg.seed)
    else:
        trace = load_trace(cfg.trace)
    users = trace.users
    if not users:
        raise InputError(cfg.trace or "--synthetic", "user_id", "the trace has no users")
    user = cfg.user or users[0]
    if user not in users:
        raise InputError("--user", "user", f"unknown user {user!r} (the trace has {', '.join(users[:5])}"
                                           f"{', ...' if len(users) > 5 else ''})")
    # without a duration (until the benchmark ends) the trace window is the benchmark's lead-up
    return Usage.from_trace(trace, user, cfg.start_s, cfg.duration_s or cfg.bench_at_s + BENCH_WINDOW_S)
