"""cpufreq: one policy per frequency domain (cluster) and the governor that picks its OPP.

A `CpufreqPolicy` holds a domain's OPP table, its floor (``scaling_min_freq``, as the phone's
init scripts write it) and its thermal cap (``scaling_max_freq``); a `Governor` chooses a
frequency and the policy clamps it between the two. Two parties limit it, as on
a phone: the kernel's thermal framework (its cpufreq cooling device) and the vendor's user-space
thermal engine (writing a frequency limit, `kernel.thermal_engine`). Each sets its own limit
(`set_limit`); the cap is the lowest of them, as cpufreq's policy limits are resolved
(cpufreq_set_policy: the minimum of every max-frequency request). Frequencies enter the
simulation only through `Scheduler.set_freq`, so work, energy and temperature integrals stay
exact.

Governors (Documentation/admin-guide/pm/cpufreq.rst):

- ``performance``: the highest OPP allowed. ``powersave``: the lowest.
- ``userspace``: a fixed frequency (the lowest OPP at or above the one asked, as
  CPUFREQ_RELATION_L resolves it), still under the cap.
- ``schedutil``: ``next_f = 1.25 * f_max * util / capacity`` rounded up to an OPP
  (kernel/sched/cpufreq_schedutil.c, get_next_freq/map_util_freq), with ``util`` the maximum
  over the domain's cores of a PELT-like average of "the core was busy", half-life 32 ms
  (kernel/sched/pelt.c: LOAD_AVG_PERIOD = 32 periods of 1024 us, y^32 = 1/2).

schedutil is event-driven, never ticked. While a core's busy state is constant its
utilisation has a closed form,
    busy: u(t) = 1 - (1 - u0) * 2^(-t/h)        idle: u(t) = u0 * 2^(-t/h),
so the governor re-evaluates only when the scheduler's plan changes (`Scheduler.on_replan`),
when a thermal cap changes, and at one timer armed for the moment the utilisation crosses
the next OPP threshold (or the rate limit expires, if a change is waiting for it). A crossing
with nothing else happening is seen at the next scheduler tick (a busy CPU updates its
utilisation, and calls the governor, from scheduler_tick): the timer is put on the tick grid,
``TICK_S``. Without it, a governor with no rate limit (Qualcomm's 0/0) and a load whose busy
share depends on the clock (work interleaved with sleep) would flip between two OPPs every
nanosecond.

Assumptions, stated:
- Rate limits: Android common kernels' schedutil has separate ``up_rate_limit_us`` and
  ``down_rate_limit_us``, set per phone by its init scripts: a phone profile's `[kernel]` table
  carries them (`schedutil_limits`; the Pixel 3 writes 500 us up and 20000 us down, stock
  Qualcomm kona/msmnile scripts 0 and 0). A device without a `[kernel]` table gets the Pixel 3's
  (``UP_RATE_LIMIT_S``/``DOWN_RATE_LIMIT_S``).
- Utilisation is *not* frequency-invariant by default: a fully busy core's util tends to 1
  whatever its frequency, as in the formula above. Mainline PELT scales running time by
  f_cur/f_max (frequency invariance), which makes the climb from a low OPP go in ~1.25x steps;
  ``Schedutil(invariant=True)`` models that (the busy target becomes f_cur/f_max).
- util_est, uclamp and iowait boost are not modelled; the tick only as the HZ=300 grid on
  which a crossing is seen. When a thermal cap
  changes the governor re-evaluates at once, ignoring the rate limit, as Linux does through
  ``need_freq_update`` in sugov_limits().
"""
from __future__ import annotations

import bisect
import math
from typing import Sequence

from swansim.kernel.sched import PELT_HALF_LIFE_S, Scheduler
from swansim.registry import Registry

# kernel/sched/cpufreq_schedutil.c: next_freq = 1.25 * max_freq * util / max (25% headroom).
SCHEDUTIL_HEADROOM = 1.25
# Android schedutil up/down rate limits for a device whose profile names none: the Pixel 3's
# (LineageOS/android_device_google_crosshatch init.hardware.rc: up_rate_limit_us 500,
# down_rate_limit_us 20000 on both policies).
UP_RATE_LIMIT_S = 0.0005
DOWN_RATE_LIMIT_S = 0.020
# A crossing timer lands this much after the computed instant, so the crossing surely happened
# despite rounding (the utilisation moves ~1e-8 in that time, far above float error).
_CROSS_EPS_S = 1e-9
# The scheduler tick: CONFIG_HZ_300 (GrapheneOS-Archive/kernel_google_crosshatch
# crosshatch_defconfig); assumption: the same HZ on every device.
TICK_S = 1.0 / 300.0
_EPS = 1e-12
# The parties that limit a domain's frequency (`CpufreqPolicy.set_limit`).
KERNEL, ENGINE = "kernel", "engine"


def opp_at_or_above(opps_mhz: Sequence[float], freq_mhz: float) -> float:
    """Lowest OPP >= ``freq_mhz`` (the top OPP if none): CPUFREQ_RELATION_L."""
    i = bisect.bisect_left(opps_mhz, freq_mhz - 1e-9)
    return opps_mhz[min(i, len(opps_mhz) - 1)]


def opp_at_or_below(opps_mhz: Sequence[float], freq_mhz: float) -> float:
    """Highest OPP <= ``freq_mhz`` (the lowest OPP if none): CPUFREQ_RELATION_H."""
    i = bisect.bisect_right(opps_mhz, freq_mhz + 1e-9) - 1
    return opps_mhz[max(i, 0)]


def schedutil_freq_mhz(opps_mhz: Sequence[float], util: float, cap_mhz: float,
                       headroom: float = SCHEDUTIL_HEADROOM) -> float:
    """The OPP schedutil asks for at utilisation ``util`` (0..1 of capacity), under ``cap_mhz``."""
    want = opp_at_or_above(opps_mhz, headroom * opps_mhz[-1] * util)
    return min(want, opp_at_or_below(opps_mhz, cap_mhz))


class CpufreqPolicy:
    """One frequency domain: its OPPs, its floor (``scaling_min_freq``), the thermal cap, and
    the governor choosing within them."""

    def __init__(self, sched: Scheduler, cluster: int, governor: "Governor", min_freq_mhz: float | None = None):
        self.sched = sched
        self.index = cluster
        spec = sched.platform.clusters[cluster]
        self.name = spec.name
        self.cpus = spec.cpus
        self.opps_mhz = spec.opp_freq_mhz
        # scaling_min_freq as the init scripts write it (None: the lowest OPP), resolved to an OPP
        # at or above it, as cpufreq resolves a frequency request (CPUFREQ_RELATION_L)
        self.min_mhz = self.opps_mhz[0] if min_freq_mhz is None else opp_at_or_above(self.opps_mhz, min_freq_mhz)
        self.limits_mhz: dict[str, float] = {}   # per party ("kernel", "engine"): its limit
        self.last_change_s = -math.inf
        self.n_changes = 0
        self.governor = governor
        governor.attach(self)

    @property
    def cur_mhz(self) -> float:
        self.governor.catch_up()
        return self.sched.platform.freq_mhz[self.index]

    @property
    def cap_mhz(self) -> float:
        """policy->max: the OPP at or below the lowest party's limit. Held by the platform (its
        `max_freq_mhz`), where the scheduler scales capacity by it, as the kernel keeps it per
        CPU for the scheduler (max_freq_scale)."""
        return self.sched.platform.max_freq_mhz[self.index]

    @property
    def fmax_mhz(self) -> float:
        return self.opps_mhz[-1]

    @property
    def fmin_mhz(self) -> float:
        """policy->min: the floor (a cap below it wins, see `clamp`)."""
        return self.min_mhz

    def clamp(self, freq_mhz: float) -> float:
        """``freq_mhz`` within the policy's limits: at least the floor, at most the cap; a cap
        below the floor wins (cpufreq_set_policy lowers policy->min to policy->max)."""
        return min(max(freq_mhz, self.min_mhz), self.cap_mhz)

    def set_floor(self, min_freq_mhz: float) -> None:
        """scaling_min_freq: the floor becomes the OPP at or above ``min_freq_mhz`` and the
        governor re-decides at once."""
        self.governor.catch_up()
        self.min_mhz = opp_at_or_above(self.opps_mhz, min_freq_mhz)
        self.governor.limits_changed()

    def set_cap(self, cap_mhz: float) -> None:
        """The kernel's thermal limit (its cooling device); see `set_limit`."""
        self.set_limit(KERNEL, cap_mhz)

    def set_limit(self, party: str, cap_mhz: float) -> None:
        """``party``'s frequency limit; the cap becomes the OPP at or below the lowest limit and
        the governor re-decides at once. A limit set again unchanged changes nothing (a thermal
        zone sets its limits at every poll)."""
        if self.limits_mhz.get(party) == cap_mhz:
            return
        self.governor.catch_up()   # decisions left for later were taken under the old cap
        self.limits_mhz[party] = cap_mhz
        cap = opp_at_or_below(self.opps_mhz, min(self.limits_mhz.values()))
        if cap != self.cap_mhz:
            self.sched.platform.max_freq_mhz[self.index] = cap
            self.governor.limits_changed()

    def limit_mhz(self, party: str) -> float:
        """``party``'s own limit as an OPP (f_max when it has set none)."""
        return opp_at_or_below(self.opps_mhz, self.limits_mhz.get(party, self.fmax_mhz))

    def apply(self, freq_mhz: float, at_s: float | None = None) -> None:
        """Run at ``freq_mhz`` (within the floor and the cap) from now on; ``at_s``: the instant
        the governor decided it, if earlier (a deferred timer, `Schedutil.catch_up`)."""
        f = self.clamp(freq_mhz)
        if f != self.sched.platform.freq_mhz[self.index]:
            self.sched.set_freq(self.index, f)
            self.last_change_s = self.sched.env.now if at_s is None else at_s
            self.n_changes += 1


class Governor:
    """Chooses a domain's frequency; the base re-applies a fixed target when limits change."""

    name = ""

    def attach(self, policy: CpufreqPolicy) -> None:
        self.policy = policy
        policy.apply(self.target_mhz())

    def target_mhz(self) -> float:
        raise NotImplementedError

    def limits_changed(self) -> None:
        self.policy.apply(self.target_mhz())

    def catch_up(self) -> None:
        """Bring decisions left for later (see `Schedutil`) up to now; the others have none."""


class Performance(Governor):
    """Always the highest allowed OPP."""

    name = "performance"

    def target_mhz(self) -> float:
        return self.policy.fmax_mhz


class Powersave(Governor):
    """Always the lowest OPP the policy allows (its floor)."""

    name = "powersave"

    def target_mhz(self) -> float:
        return self.policy.fmin_mhz


class Userspace(Governor):
    """A fixed frequency chosen from outside (None: the domain's f_max)."""

    name = "userspace"

    def __init__(self, freq_mhz: float | None = None):
        self.freq_mhz = freq_mhz

    def target_mhz(self) -> float:
        p = self.policy
        return p.fmax_mhz if self.freq_mhz is None else opp_at_or_above(p.opps_mhz, self.freq_mhz)

    def set_speed(self, freq_mhz: float) -> None:
        """scaling_setspeed: takes effect now."""
        self.freq_mhz = freq_mhz
        self.policy.apply(self.target_mhz())


class Schedutil(Governor):
    """Utilisation-driven DVFS with a PELT-like average per core, evaluated only on change.

    While the scheduler replays a held batch on a phone with no thread runnable
    (`Scheduler.replaying`), nothing reads the domain's clock: the power and the busy shares
    are the batch's own. The governor then keeps its pending timer as a time only, and fires
    the timers that fell due, in order and at their own instants, when anything next asks
    (a replan, a limit change, a reading of the clock: `catch_up`). The clock it reaches, the
    instant of its last change and the count of changes are the ones the timers would have
    left; only the moment the platform's clock is written moves (to the catch-up)."""

    name = "schedutil"
    # the replayed-batch shortcut above (off: a timer queued at every crossing, as elsewhere)
    defer_while_replaying = True

    def __init__(self, half_life_s: float = PELT_HALF_LIFE_S, up_rate_limit_s: float = UP_RATE_LIMIT_S,
                 down_rate_limit_s: float = DOWN_RATE_LIMIT_S, headroom: float = SCHEDUTIL_HEADROOM,
                 invariant: bool = False):
        self.half_life_s = half_life_s
        self.up_rate_limit_s = up_rate_limit_s
        self.down_rate_limit_s = down_rate_limit_s
        self.headroom = headroom
        self.invariant = invariant
        self.n_evaluations = 0
        self._timer_s = math.inf   # when the one pending timer fires (inf: none)
        self._deferred = False     # that timer is a time only (`catch_up` fires it)
        self._catching_up = False
        self._band: tuple | None = None   # (clock, cap) the utilisation bounds below were found for
        self._bounds: tuple = (None, None)

    def attach(self, policy: CpufreqPolicy) -> None:
        self.policy = policy
        self.env = policy.sched.env
        self._sched = policy.sched
        self._freq = policy.sched.platform.freq_mhz   # the domain's clock is self._freq[policy.index]
        self._cpus = policy.sched.platform.clusters[policy.index].cpu_slice
        self._util = [0.0] * len(policy.cpus)      # PELT-like average per core, at _time_s
        self._busy = policy.sched.busy_now          # the busy shares the targets are for
        self._target = self._targets()              # what each core's average tends to now
        self._busy_version = policy.sched.busy_version
        self._time_s = self.env.now
        policy.sched.on_replan.append(self._on_replan)
        self._evaluate(self.env.now, force=True)

    # -- utilisation --------------------------------------------------------------------------

    def util(self) -> float:
        """Domain utilisation now: the busiest core's average (0..1)."""
        self.catch_up()
        self._settle(self.env.now)
        return max(self._util)

    def core_util(self) -> list[float]:
        self.catch_up()
        self._settle(self.env.now)
        return list(self._util)

    def _targets(self) -> list[float]:
        busy = self._busy
        if not self.invariant:
            return busy[self._cpus] if self._cpus is not None else [busy[c] for c in self.policy.cpus]
        scale = self._freq[self.policy.index] / self.policy.fmax_mhz
        return [busy[c] * scale for c in self.policy.cpus]

    def _settle(self, now: float) -> None:
        """Bring each core's average to ``now`` along its closed form."""
        dt = now - self._time_s
        if dt > 0.0:
            decay = 2.0 ** (-dt / self.half_life_s)
            self._util = [g + (u - g) * decay for u, g in zip(self._util, self._target)]
            self._time_s = now

    # -- decisions ----------------------------------------------------------------------------

    def target_mhz(self) -> float:
        self.catch_up()
        return self._want_mhz(self.env.now)

    def _want_mhz(self, now: float) -> float:
        p = self.policy   # get_next_freq, then cpufreq_driver_resolve_freq's clamp to the policy's limits
        self._settle(now)
        return p.clamp(schedutil_freq_mhz(p.opps_mhz, max(self._util), p.cap_mhz, self.headroom))

    def limits_changed(self) -> None:
        self.catch_up()
        self._evaluate(self.env.now, force=True)

    def catch_up(self) -> None:
        """Fire the timers a replayed batch deferred that are due by now, each at its instant."""
        if not self._deferred:
            return
        self._deferred, self._catching_up = False, True
        now = self.env.now
        try:
            while self._timer_s <= now:
                at, self._timer_s = self._timer_s, math.inf
                self._evaluate(at)
        finally:
            self._catching_up = False
        if self._timer_s < math.inf and not self._defer():
            self.env.call_in(self._timer_s - now, lambda at=self._timer_s: self._on_timer(at))

    def _defer(self) -> bool:
        """Leave the pending timer as a time only, if a batch is replayed (class doc)."""
        if self.defer_while_replaying and self._sched.replaying:
            self._deferred = True
            return True
        return False

    def _on_replan(self) -> None:
        self.catch_up()
        version = self._sched.busy_version
        if version == self._busy_version and not self.invariant:
            return  # no core's busy state changed: the targets and the armed timer still hold
        self._busy_version = version
        self._busy = self._sched.busy_now
        target = self._targets()
        if target == self._target:
            return  # nothing this domain sees changed; the armed timer still holds
        now = self.env.now
        self._settle(now)
        self._target = target
        self._evaluate(now)

    def _evaluate(self, now: float, force: bool = False) -> None:
        """Decide at ``now`` (the present, or a deferred timer's instant in `catch_up`)."""
        self.n_evaluations += 1
        p = self.policy
        want = self._want_mhz(now)
        cur = self._freq[p.index]
        if want != cur:
            limit = self.up_rate_limit_s if want > cur else self.down_rate_limit_s
            release_s = p.last_change_s + limit
            if not force and now < release_s - _EPS:
                self._arm(now, release_s - now)  # decide again when the rate limit lets us
                return
            p.apply(want, now)
            if self.invariant:   # the busy target follows f
                self._target = self._targets()
        self._arm(now, self._next_crossing_s(now))

    def _next_crossing_s(self, now: float) -> float:
        """Time from ``now`` until the domain's utilisation may leave the band that maps to the
        current OPP."""
        p = self.policy
        band = (self._freq[p.index], p.cap_mhz)
        if band != self._band:
            opps, scale = p.opps_mhz, self.headroom * p.fmax_mhz
            i = bisect.bisect_left(opps, band[0] - 1e-9)
            i_cap = bisect.bisect_left(opps, band[1] - 1e-9)
            i_min = bisect.bisect_left(opps, p.min_mhz - 1e-9)
            self._band = band
            self._bounds = (opps[i - 1] / scale if i > i_min else None,   # util <= lower: a lower OPP
                            opps[i] / scale if i < i_cap else None)        # util > upper: a higher OPP
        lower, upper = self._bounds
        h = self.half_life_s
        best = math.inf
        for u, g in zip(self._util, self._target):
            if upper is not None and g > upper + _EPS and u <= upper:
                best = min(best, h * math.log2((g - u) / (g - upper)))
            elif lower is not None and g < lower - _EPS and u > lower:
                best = min(best, h * math.log2((u - g) / (lower - g)))
        if best == math.inf:
            return best
        at = math.ceil((now + best + _CROSS_EPS_S) / TICK_S) * TICK_S   # the tick that sees it
        return max(at - now, _CROSS_EPS_S)

    def _arm(self, now: float, dt_s: float) -> None:
        """Make sure a timer fires at ``now + dt_s`` at the latest. One timer is pending at a
        time: an earlier one stays (evaluating early changes nothing: the governor decides from
        the utilisation at that moment, and re-arms), a later one is replaced. While a batch is
        replayed the timer is only a time (class doc)."""
        at = now + max(dt_s, 0.0)
        if at >= self._timer_s:
            return
        self._timer_s = at
        if self._catching_up or self._defer():
            return   # `catch_up` fires it
        self.env.call_in(max(dt_s, 0.0), lambda: self._on_timer(at))

    def _on_timer(self, at: float) -> None:
        if at != self._timer_s:
            return   # superseded by an earlier timer, which has re-armed since
        self._timer_s = math.inf
        self._evaluate(self.env.now)


# The cpufreq governors by their sysfs names (scaling_governor).
GOVERNORS: Registry[type[Governor]] = Registry("cpufreq governor")
for _name, _cls in (("schedutil", Schedutil), ("performance", Performance), ("powersave", Powersave),
                    ("userspace", Userspace)):
    GOVERNORS.register(_name, _cls)


def schedutil_limits(kernel) -> dict[str, float]:
    """schedutil's rate limits from a phone's `[kernel]` table (hw.profile.KernelSpec; None:
    the defaults), as `Schedutil` keyword arguments."""
    if kernel is None:
        return {"up_rate_limit_s": UP_RATE_LIMIT_S, "down_rate_limit_s": DOWN_RATE_LIMIT_S}
    return {"up_rate_limit_s": kernel.schedutil_up_rate_limit_us * 1e-6,
            "down_rate_limit_s": kernel.schedutil_down_rate_limit_us * 1e-6}


def make_governor(name: str, kernel=None, **kwargs) -> Governor:
    """A governor by its sysfs name (scaling_governor); schedutil takes its rate limits from
    ``kernel`` (a phone's hw.profile.KernelSpec) unless given."""
    cls = GOVERNORS.get(name, "governor")
    if name == "schedutil":
        kwargs = {**schedutil_limits(kernel), **kwargs}
    return cls(**kwargs)
