"""One simulated phone: a SimPy environment wired to the silicon and the kernel.

Components are built here and wired explicitly (desmod style): platform, scheduler, cpufreq
policies, the thermal zone and the battery; runs start the owner's apps and the training job
on it (swansim.runs, swansim.batchmodel, swansim.federated). Probes are attached from outside
(`platform.probes`, `sched.on_replan`, `thermal.on_cap_change`). Nothing here draws random
numbers: each consumer keys its own stream by ``config.seed`` (common random numbers), so the
same config gives the same run anywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import simpy

from swansim.errors import InputError
from swansim.hw.battery import CHARGER_POWER_W, Battery
from swansim.hw.platform import HELD_LEAK_STEP_C, Platform
from swansim.hw.profile import DeviceSpec
from swansim.hw.thermal import TempBounds
from swansim.kernel.cpufreq import GOVERNORS, CpufreqPolicy, make_governor
from swansim.kernel.engine import Environment
from swansim.kernel.placement import AUTO, PLACEMENTS, resolve_placement
from swansim.kernel.sched import Scheduler
from swansim.kernel.thermal_engine import ThermalEngine
from swansim.kernel.thermal_gov import THERMAL_GOVERNORS, ThermalStatus, ThermalZone, make_thermal_governor


# A quiet stretch (`Device.skip_quiet`) is integrated in steps over which no cluster's temperature
# moves more than about HELD_STEP_C, each at least HELD_MIN_STEP_S long; a longer step over which
# they move more than HELD_LEAK_STEP_C has its leakage at the clusters' mean temperatures over it
# (`Platform.lead_leakage`), the others the leakage the platform holds (it follows in
# HELD_LEAK_STEP_C steps). Measured on a Pixel 3 heating 40 C in ten minutes
# (tests/test_batchmodel.py): 0.02% of the energy and 0.06 C off 20 ms steps, in 41 steps
# (leakage held at each 0.25 C step's start: 0.21% and 0.10 C in 102). Its bounds are widened by
# QUIET_MARGIN_C. Both are assumptions, checked against the event path and full simulation
# (tests/test_batchmodel.py).
HELD_STEP_C = 1.0
QUIET_MARGIN_C = 0.05
# Such a stretch's steps are at least this long: a phone heating fast (the first seconds of a
# dense load) takes one step a second. It is also the first step after the power changes.
HELD_MIN_STEP_S = 1.0
# A phone found not quiet (hot, throttling) is tried again after QUIET_RETRY_S, then after twice
# as long each time it still is not, up to QUIET_RETRY_MAX_S: when to try only decides how much
# is skipped, never what happens.
QUIET_RETRY_S, QUIET_RETRY_MAX_S = 1.0, 64.0
# Fewer polls than this are not worth the bounds (measured: benchmarks/bench_fastforward.py).
QUIET_MIN_SKIPS = 8


@dataclass(frozen=True)
class _Poller:
    """A sampling process of the thermal zone or the engine, seen by `Device.skip_quiet`."""

    process: simpy.Process
    period_s: float
    quiet: Callable[[TempBounds], bool]
    skipped: Callable[[int], None]


@dataclass
class DeviceConfig:
    """The one flat configuration of a device run (the profile itself is the `Device`'s spec)."""

    seed: int = 0
    screen_on: bool = False
    ambient_c: float | None = None        # None: the profile's ambient
    placement: str = AUTO                 # thread placement (kernel.placement.PLACEMENTS); "auto":
                                          # the profile's kernel flavour (walt), else wakeup
    governor: str = "schedutil"           # cpufreq governor of every domain
    userspace_freq_mhz: tuple[float, ...] | None = None  # per domain, for governor "userspace"
    thermal_governor: str | None = None   # None: the profile's; "off": caps stay as set
    thermal_engine: bool = True           # run the profile's vendor thermal engine, if it has one
                                          # (never with thermal_governor "off")
    frozen_temps: bool = False            # every node held at ambient (the batch model's measurements)
    charging: bool = False
    charger_power_w: float = CHARGER_POWER_W
    initial_soc_pct: float = 100.0


_ACCUMULATE_FROM = 64   # periods: below it the loop is the cheaper


def _last_poll(t_s: float, period_s: float, horizon_s: float) -> tuple[float, int]:
    """The last of ``t_s``, ``t_s + period_s``, ... before ``horizon_s`` and how many periods
    on it is, summed as a poller's own sleeps sum them (one period at a time, so the times are
    the process's to the last bit). Thousands of periods (a request's bet over a slow poller)
    are summed by numpy's accumulate, which adds in order, one element at a time, as the loop."""
    if horizon_s - t_s > _ACCUMULATE_FROM * period_s:
        steps = np.full(int((horizon_s - t_s) / period_s) + 2, period_s)
        steps[0] = t_s
        sums = np.add.accumulate(steps)
        if sums[-1] >= horizon_s:
            n = int(np.searchsorted(sums[1:], horizon_s, side="left"))
            return float(sums[n]), n
    last, n = t_s, 0
    while last + period_s < horizon_s:
        last += period_s
        n += 1
    return last, n


class Device:
    """A phone at run time: env, platform, scheduler, and the processes that drive them."""

    def __init__(self, spec: DeviceSpec, config: DeviceConfig | None = None):
        """``spec``: the resolved profile (`Catalogue.device`); a name is resolved where it
        enters (a CLI option, a config's check), never here."""
        self.config = config = config or DeviceConfig()
        if config.ambient_c is not None:
            spec = replace(spec, ambient_c=config.ambient_c)
        self.spec = spec
        self.env = Environment()
        self.platform = Platform(spec, screen_on=config.screen_on, frozen_temps=config.frozen_temps)
        if config.placement != AUTO and config.placement not in PLACEMENTS:
            raise InputError("config", "placement",
                             f"{config.placement!r} is not one of {AUTO}, {', '.join(PLACEMENTS)}")
        self.placement = resolve_placement(config.placement, spec)
        if self.placement.startswith("walt") and spec.kernel is None:
            raise InputError(spec.path, "kernel", f"placement {self.placement!r} needs the profile's [kernel] table")
        self.sched = Scheduler(self.env, self.platform, PLACEMENTS[self.placement](spec))
        self._build_power_management(config, spec)

    def _build_power_management(self, config: DeviceConfig, spec: DeviceSpec) -> None:
        """cpufreq policies (one per cluster), the CPU thermal zone, the vendor's thermal engine
        and the battery."""
        GOVERNORS.get(config.governor, "DeviceConfig.governor")
        thermal_name = config.thermal_governor or spec.thermal.governor
        THERMAL_GOVERNORS.get(thermal_name, "DeviceConfig.thermal_governor")
        n = len(spec.soc.clusters)
        freqs = config.userspace_freq_mhz
        if freqs is not None and len(freqs) != n:
            raise InputError("config", "userspace_freq_mhz", f"expected {n} frequencies (one per cluster)")
        self.cpufreq: list[CpufreqPolicy] = []
        for k in range(n):
            kw = {"freq_mhz": freqs[k] if freqs else None} if config.governor == "userspace" else {}
            floor = spec.kernel.min_freq_mhz.get(spec.soc.clusters[k].name) if spec.kernel else None
            self.cpufreq.append(CpufreqPolicy(self.sched, k, make_governor(config.governor, spec.kernel, **kw), floor))
        self.thermal: ThermalZone = make_thermal_governor(thermal_name, self.sched, self.cpufreq, spec.thermal)
        self.thermal.start()
        self.thermal_engine: ThermalEngine | None = None
        if spec.thermal_engine is not None and config.thermal_engine and thermal_name != "off":
            self.thermal_engine = ThermalEngine(self.thermal, spec.thermal_engine)
            self.thermal_engine.start()
        self._pollers: list[_Poller] = []
        self.n_skipped_polls = 0   # thermal polls and samples skipped as quiet (`skip_quiet`)
        self._quiet_retry_s = 0.0  # after a stretch found not quiet, no new try before this time,
        self._quiet_backoff_s = QUIET_RETRY_S    # which doubles while tries keep failing
        if self.thermal.process is not None:
            z = self.thermal
            self._pollers.append(_Poller(z.process, z.quiet_period_s, z.quiet, z.skipped))
        if self.thermal_engine is not None:
            e = self.thermal_engine
            for proc, ms in zip(e.processes, e.periods_ms):
                self._pollers.append(_Poller(proc, ms / 1000.0, lambda b, ms=ms: e.quiet(b, ms), e.skipped))
        self._polls_per_s = sum(1.0 / p.period_s for p in self._pollers)
        # polls skipped ahead of the present (`skip_quiet`): id(event) -> (event, the time the
        # skipped run of its polls began, how many were skipped, its poller)
        self._skips: dict[int, tuple] = {}
        self.platform.on_power_change.append(self._unskip)
        self._held_step_s = HELD_MIN_STEP_S   # `integrate_held`'s step, kept while the power stays held
        self._held_rate_c_per_s = math.inf    # and how fast the clusters moved over its last step
        self.platform.on_power_change.append(self._restart_held_steps)
        self.battery: Battery | None = None
        if spec.battery_capacity_j is not None:
            try:
                self.battery = Battery(self.platform, spec.battery_capacity_j, config.initial_soc_pct,
                                       config.charging, config.charger_power_w)
            except ValueError as e:
                raise InputError("config", "battery", str(e)) from None

    @property
    def now_s(self) -> float:
        return self.env.now

    @property
    def battery_temp_c(self) -> float | None:
        """Battery temperature (Swan declines training above 35 C); None for boards."""
        return self.platform.temp_c("battery") if self.battery is not None else None

    @property
    def soc_pct(self) -> float | None:
        return self.battery.soc_pct if self.battery is not None else None

    @property
    def thermal_status(self) -> ThermalStatus:
        """Android thermal status as of the last thermal poll."""
        return self.thermal.status

    def set_caps(self, caps_mhz) -> None:
        """Cap each cluster's clock (one MHz figure per cpufreq policy, in cluster order)."""
        for policy, mhz in zip(self.cpufreq, caps_mhz):
            policy.set_cap(mhz)

    def set_charging(self, on: bool, charger_power_w: float | None = None) -> None:
        """Plug or unplug the charger now."""
        if self.battery is not None:
            self.sched.sync()
            self.battery.set_charging(on, charger_power_w)

    def skip_quiet(self, until_s: float, ahead_s: float | None = None) -> bool:
        """With the power held (the batch model's fast-forward), skip the thermal polls due
        before ``ahead_s`` (default ``until_s``) - or before the first other event, if earlier -
        when none of them could change anything: the node temperatures' bounds over the stretch
        (`Platform.held_temp_bounds`) keep every poller's readings where its caps, levels and
        status stay (`ThermalZone.quiet`, `ThermalEngine.quiet`). Each poller's sleep is moved
        to its last poll in the stretch, which runs as usual (so its readings are that
        instant's); the ones before it are counted as skipped. The phone is integrated up to
        the first queued event or ``until_s``, whichever is first, in steps that keep its
        leakage following its temperature.

        ``ahead_s`` past ``until_s`` is a bet that the power stays held that long (the batches
        of a request to come): if the held power, the screen or the charger's loss changes
        first, every poll still postponed goes back to its own schedule and counts as run, not
        skipped (`_unskip`). Each mode of the RC network moves monotonically while the power is
        held, so the bounds over the whole stretch hold over any part of it that ran.
        Returns False when there was nothing to skip or the stretch is not quiet."""
        env, platform = self.env, self.platform
        now = env.now
        queued = self._queued_polls()
        if queued is None:
            return False
        due, other = queued
        head = env.head()
        if not any(ev is head for _, _, ev, _ in due):
            return False   # something else happens before any poll
        # the bet first; if that stretch is not quiet, this batch's alone
        tried = False
        for end in dict.fromkeys((until_s if ahead_s is None else max(until_s, ahead_s), until_s)):
            horizon = min(end, other)
            if (horizon - now) * self._polls_per_s < QUIET_MIN_SKIPS:
                continue   # too short to be worth it
            moves = self._moves(due, horizon)
            if sum(move[3] for move in moves) < QUIET_MIN_SKIPS:
                continue
            tried = True
            if platform.held_temp_bounds(horizon - now, QUIET_MARGIN_C,
                                         lambda b: all(move[4].quiet(b) for move in moves)) is not None:
                break
        else:
            if tried:   # found not quiet
                self._back_off(True)
            return False
        self._back_off(False)
        self._skip(moves)
        self.integrate_held(min(env.peek(), until_s))
        return True

    @staticmethod
    def _moves(due, horizon: float) -> list:
        """Each poller's sleep moved to its last poll before ``horizon``: (event, due time, last
        poll, polls skipped, poller) for those that skip any (``due``: (id, time, event, poller))."""
        moves = []
        for _eid, t, ev, p in due:
            last, n = _last_poll(t, p.period_s, horizon)
            if t < horizon and n:
                moves.append((ev, t, last, n, p))
        return moves

    def _skip(self, moves) -> None:
        skips = {k: v for k, v in self._skips.items() if not v[0].processed}
        for ev, t, last, n, p in moves:
            self.env.reschedule(ev, last)
            p.skipped(n)
            self.n_skipped_polls += n
            _, t0, n0, _ = skips.get(id(ev), (ev, t, 0, p))   # skipped ahead before: from where it began
            skips[id(ev)] = (ev, t0, n0 + n, p)
        self._skips = skips

    def quiet_stretch(self, end_s: float, admit: Callable[[TempBounds], bool]) -> bool:
        """With the power held, may the phone run to ``end_s`` as one stretch? Yes if nothing but
        thermal polls is queued before ``end_s``, none of them could change a cap, level or
        status at any temperature the stretch can reach (the bounds `skip_quiet` tests), and
        ``admit`` takes those bounds, and the charger's loss cannot step within it (the
        constant-voltage taper's next step, at the most the phone can draw within those bounds:
        `Battery.loss_steady_for_s`; a step would change the power, wake every skipped poll and
        could move a cap mid-stretch); then every poll but each poller's last in the stretch is
        skipped, so the stretch runs at the clocks it starts with. A phone found not quiet is
        asked again only after `skip_quiet`'s back-off."""
        queued = self._queued_polls()
        if queued is None or queued[1] <= end_s:
            return False
        due = [d for d in queued[0] if d[1] <= end_s]
        bounds = self.platform.held_temp_bounds(end_s - self.env.now, QUIET_MARGIN_C,
                                                lambda b: all(d[3].quiet(b) for d in due))
        self._back_off(bounds is None)
        if bounds is None or not admit(bounds):
            return False
        if self.battery is not None and end_s - self.env.now > self.battery.loss_steady_for_s(
                self.platform.held_max_power_w(bounds)):
            return False
        self._skip(self._moves(due, end_s))
        return True

    def _queued_polls(self) -> tuple[list, float] | None:
        """What is queued, with the power held: the thermal polls as (event id, time, event,
        poller), in event order, and when the first other event is (inf: none). None when not
        worth asking: nothing held, a phone found not quiet still backing off, or this instant
        not over (it is ended first, as stepping would)."""
        env = self.env
        if env.now < self._quiet_retry_s or not self.platform.held:
            return None
        env.end_instant()
        if env.instant_busy:
            return None
        sleeping = {id(p.process.target): p for p in self._pollers
                    if isinstance(p.process.target, simpy.events.Timeout)}
        other, due = math.inf, []
        for t, eid, ev in env.queued():
            p = sleeping.get(id(ev))
            if p is None:
                other = min(other, t)
            else:
                due.append((eid, t, ev, p))
        due.sort()
        return due, other

    def _back_off(self, not_quiet: bool) -> None:
        """A phone found not quiet is tried again after the back-off, which doubles each time."""
        if not_quiet:
            self._quiet_retry_s = self.env.now + self._quiet_backoff_s
            self._quiet_backoff_s = min(2.0 * self._quiet_backoff_s, QUIET_RETRY_MAX_S)
        else:
            self._quiet_backoff_s = QUIET_RETRY_S

    def _unskip(self) -> None:
        """The power changed: every poll skipped ahead of now is due again on its own schedule
        (its process's sleeps from where its skip began), and counts as not skipped."""
        if not self._skips:
            return
        now = self.env.now
        for ev, t, n, p in self._skips.values():
            if ev.processed:
                continue
            k = 0
            while t < now and k < n:   # the same sums as the process's own sleeps
                t += p.period_s
                k += 1
            if k < n:
                self.env.reschedule(ev, t)
                p.skipped(k - n)
                self.n_skipped_polls -= n - k
        self._skips.clear()

    def integrate_held(self, until_s: float) -> None:
        """Advance to ``until_s`` (nothing is queued before it) in steps over which no cluster's
        temperature moves more than about HELD_STEP_C, at least HELD_MIN_STEP_S long. A step longer
        than that over which the clusters, at the pace of the step before, would move more than
        HELD_LEAK_STEP_C (the platform's own leakage step) has its leakage at its mean
        temperatures (`Platform.lead_leakage`); shorter ones (to the next poll) keep the leakage
        the platform holds. The step and the pace carry over from one call to the next while the
        power stays held (a request's batches), and start again when it changes."""
        env, platform = self.env, self.platform
        temps, step_s, rate = platform.cluster_temp_c, self._held_step_s, self._held_rate_c_per_s
        while env.now < until_s:
            dt = min(step_s, until_s - env.now)
            if dt > HELD_MIN_STEP_S and rate * dt > HELD_LEAK_STEP_C:
                platform.lead_leakage(dt)
            env.advance_to(env.now + dt)
            self.sched.sync()
            new = platform.cluster_temp_c
            moved = max(abs(a - b) for a, b in zip(new, temps))
            temps, rate = new, moved / dt
            # the step that would move the fastest cluster HELD_STEP_C, at most doubling
            want_s = HELD_STEP_C * dt / moved if moved > 0.0 else math.inf
            step_s = max(HELD_MIN_STEP_S, min(2.0 * step_s, max(0.5 * step_s, want_s)))
        self._held_step_s, self._held_rate_c_per_s = step_s, rate

    def _restart_held_steps(self) -> None:
        self._held_step_s, self._held_rate_c_per_s = HELD_MIN_STEP_S, math.inf

    def run(self, until_s: float) -> None:
        """Run to ``until_s`` and settle every integral there."""
        self.env.run(until=until_s)
        self.sched.sync()
