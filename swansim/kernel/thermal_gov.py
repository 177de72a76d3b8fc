"""Thermal governors: the kernel's CPU thermal zone, polled, capping cpufreq domains.

One zone per device: the profile's ``sensor_node`` of the RC network, its trips, its polling
delays, and cpufreq cooling devices on every CPU domain (cooling state n = n OPPs below
f_max). The zone is a SimPy process that sleeps ``polling_passive_ms`` while it is above its
first passive trip or mitigating, ``polling_idle_ms`` otherwise (monitor_thermal_zone() in
drivers/thermal/thermal_core.c). Each poll settles the integrals to now, reads the sensor,
runs the governor and updates the Android thermal status.

- `StepWise` (drivers/thermal/gov_step_wise.c): per passive trip and cooling device, a state
  that goes one step deeper per poll while the zone is at or above the trip and rising, holds
  while it is above and not rising, and comes back one step per poll once it is below the
  trip minus its hysteresis and not rising. The device takes the deepest state any trip asks
  for. Assumption: the release rule is the 4.x-5.x one (throttling and dropping holds; Linux
  6.x releases one step there too), with 6.x's hysteresis on the trip threshold.
- `PowerAllocator` (IPA, Documentation/driver-api/thermal/power_allocator.rst and
  drivers/thermal/gov_power_allocator.c): below ``switch_on_c`` no capping and the PID is
  reset; above it a PID on ``control_c - T`` feeds forward the sustainable power, grants the
  budget to the CPU domains in proportion to their (weighted) requested power, capped at each
  domain's maximum with the excess re-divided, and turns each grant into the highest OPP
  whose estimated power fits.

Android thermal status (android.os.PowerManager.THERMAL_STATUS_*) is our mapping, an
assumption: the skin node against the thresholds of Pixel's thermal HAL "VIRTUAL-SKIN" sensor
(thermal_info_config.json: LIGHT 39, MODERATE 43, SEVERE 45, CRITICAL 46.5, EMERGENCY 52,
SHUTDOWN 55 C; hysteresis 1.9 C; not for boards), raised to EMERGENCY when the CPU zone
passes a ``hot`` trip and to SHUTDOWN at a ``critical`` trip. The simulation keeps running past a critical
trip (a real phone powers off); `ThermalZone.shutdown_s` records when it happened.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Sequence

from swansim.hw.power import dynamic_power_w, leakage_factor, leakage_w
from swansim.hw.profile import ThermalSpec
from swansim.hw.thermal import TempBounds
from swansim.kernel.cpufreq import KERNEL, CpufreqPolicy
from swansim.kernel.sched import Scheduler
from swansim.registry import Registry


class ThermalStatus(IntEnum):
    """Android's thermal status levels (PowerManager.THERMAL_STATUS_NONE .. _SHUTDOWN)."""

    NONE = 0
    LIGHT = 1
    MODERATE = 2
    SEVERE = 3
    CRITICAL = 4
    EMERGENCY = 5
    SHUTDOWN = 6


# Pixel thermal HAL, VIRTUAL-SKIN HotThreshold for LIGHT..SHUTDOWN and its HotHysteresis (C).
SKIN_STATUS_THRESHOLDS_C = (39.0, 43.0, 45.0, 46.5, 52.0, 55.0)
SKIN_STATUS_HYSTERESIS_C = 1.9


class StatusMonitor:
    """Android thermal status from the skin temperature and the CPU zone's hot/critical trips."""

    def __init__(self, thresholds_c: Sequence[float] = SKIN_STATUS_THRESHOLDS_C,
                 hysteresis_c: float = SKIN_STATUS_HYSTERESIS_C):
        self.thresholds_c, self.hysteresis_c = tuple(thresholds_c), hysteresis_c
        self.skin_level = ThermalStatus.NONE

    def update(self, skin_c: float | None, hot: bool, critical: bool) -> ThermalStatus:
        if skin_c is not None:
            level = self.skin_level
            # up as far as the temperature reaches; down only past threshold - hysteresis
            while level < ThermalStatus.SHUTDOWN and skin_c >= self.thresholds_c[level]:
                level = ThermalStatus(level + 1)
            while level > ThermalStatus.NONE and skin_c < self.thresholds_c[level - 1] - self.hysteresis_c:
                level = ThermalStatus(level - 1)
            self.skin_level = level
        status = self.skin_level
        if hot:
            status = max(status, ThermalStatus.EMERGENCY)
        if critical:
            status = ThermalStatus.SHUTDOWN
        return ThermalStatus(status)

    def holds(self, lo_c: float, hi_c: float) -> bool:
        """Does the skin level stay where it is for any reading in ``[lo_c, hi_c]``?"""
        level = self.skin_level
        return ((level == ThermalStatus.SHUTDOWN or hi_c < self.thresholds_c[level])
                and (level == ThermalStatus.NONE or lo_c >= self.thresholds_c[level - 1] - self.hysteresis_c))


@dataclass(frozen=True)
class CapChange:
    """One change of a domain's cap: when, which domain, from/to (MHz, the cap in force: the
    lowest limit), the reading that moved it, and whose limit it was (``party``: the kernel's
    zone or the vendor's thermal engine)."""

    time_s: float
    domain: str
    old_mhz: float
    new_mhz: float
    temp_c: float
    rising: bool
    party: str = KERNEL


class ThermalZone:
    """The CPU thermal zone: polling loop, sensor, caps on cpufreq domains, status."""

    name = ""

    def __init__(self, sched: Scheduler, policies: Sequence[CpufreqPolicy], spec: ThermalSpec,
                 domains: Sequence[int] | None = None):
        self.sched, self.env, self.platform = sched, sched.env, sched.platform
        self.policies = list(policies)
        self.spec = spec
        self.domains = list(range(len(self.policies))) if domains is None else list(domains)
        self.sensor = spec.sensor_node
        self.temp_c = self.platform.temp_c(self.sensor)
        self.last_temp_c: float | None = None
        self.status_monitor = StatusMonitor()
        self.status = ThermalStatus.NONE
        self.cap_log: list[CapChange] = []
        self.status_log: list[tuple[float, ThermalStatus]] = []
        self.first_throttle_s: float | None = None
        self.shutdown_s: float | None = None
        self.n_polls = 0
        self.on_cap_change: list = []   # listeners, called with each CapChange (probes, fast-forward)
        self._hot = [tp.temp_c for tp in spec.trips if tp.kind == "hot"]
        self._critical = [tp.temp_c for tp in spec.trips if tp.kind == "critical"]
        # Boards have no user holding them: their status comes from the CPU trips only.
        self._has_skin = "skin" in self.platform.thermal.index and self.platform.spec.kind != "board"
        self.process = None

    def start(self):
        self.process = self.env.process(self._run())
        return self.process

    def _run(self):
        while True:
            self.poll()
            yield self.env.timeout(self.delay_s())

    def delay_s(self) -> float:
        passive = self.passive()
        return (self.spec.polling_passive_ms if passive else self.spec.polling_idle_ms) / 1000.0

    def passive(self) -> bool:
        """Poll at the passive rate? (above the first trip, or mitigating)."""
        return self.throttling

    @property
    def throttling(self) -> bool:
        """Is the zone's own cooling device limiting a domain? (The engine's limits don't count.)"""
        return any(self.policies[d].limit_mhz(KERNEL) < self.policies[d].fmax_mhz for d in self.domains)

    def poll(self) -> None:
        self.sched.sync()
        now = self.env.now
        self.last_temp_c = self.temp_c if self.n_polls else None  # no trend on the first poll
        self.temp_c = self.platform.temp_c(self.sensor)
        self.n_polls += 1
        self.throttle(self.temp_c)
        critical = any(self.temp_c >= t for t in self._critical)
        if critical and self.shutdown_s is None:
            self.shutdown_s = now
        skin = self.platform.temp_c("skin") if self._has_skin else None
        status = self.status_monitor.update(skin, any(self.temp_c >= t for t in self._hot), critical)
        if status != self.status:
            self.status = status
            self.status_log.append((now, status))

    def throttle(self, temp_c: float) -> None:
        raise NotImplementedError

    # -- quiet stretches (skipped by a fast-forward: `swansim.device.Device.skip_quiet`) ------

    @property
    def quiet_period_s(self) -> float:
        """The polling delay while quiet (below every trip, not mitigating)."""
        return self.spec.polling_idle_ms / 1000.0

    def quiet(self, bounds: TempBounds) -> bool:
        """Would every poll leave the caps, the governor's state and the status as they are,
        whatever the readings within ``bounds``? Then skipping polls changes nothing."""
        lo, hi = bounds.of(self.sensor)
        if any(hi >= t for t in self._hot) or any(hi >= t for t in self._critical):
            return False
        if self.status != self.status_monitor.skin_level:   # a hot or critical trip's status would end
            return False
        if self._has_skin and not self.status_monitor.holds(*bounds.of("skin")):
            return False
        return all(self.policies[d].limit_mhz(KERNEL) == self.policies[d].fmax_mhz for d in self.domains) \
            and self._governor_quiet(lo, hi)

    def _governor_quiet(self, lo_c: float, hi_c: float) -> bool:
        return False

    def skipped(self, polls: int) -> None:
        """``polls`` polls were skipped as quiet."""
        self.n_polls += polls

    @property
    def rising(self) -> bool:
        return self.last_temp_c is not None and self.temp_c > self.last_temp_c

    @property
    def dropping(self) -> bool:
        return self.last_temp_c is not None and self.temp_c < self.last_temp_c

    def caps_mhz(self) -> list[float]:
        return [p.cap_mhz for p in self.policies]

    def _set_cap(self, d: int, cap_mhz: float) -> None:
        self.limit(d, cap_mhz, KERNEL, self.temp_c, self.rising)

    def limit(self, d: int, cap_mhz: float, party: str, temp_c: float, rising: bool) -> None:
        """Set ``party``'s limit on domain ``d``; a change of the cap in force is logged and
        told to the listeners, whoever made it (one log for the kernel's and the engine's caps)."""
        p = self.policies[d]
        old = p.cap_mhz
        p.set_limit(party, cap_mhz)
        if p.cap_mhz != old:
            now = self.env.now
            change = CapChange(now, p.name, old, p.cap_mhz, temp_c, rising, party)
            self.cap_log.append(change)
            if p.cap_mhz < p.fmax_mhz and self.first_throttle_s is None:
                self.first_throttle_s = now
            for listener in self.on_cap_change:
                listener(change)


class StepWise(ThermalZone):
    """One OPP step per poll and trip: deeper while hot and rising, back while cool and not rising."""

    name = "step_wise"

    def __init__(self, sched: Scheduler, policies: Sequence[CpufreqPolicy], spec: ThermalSpec,
                 domains: Sequence[int] | None = None):
        super().__init__(sched, policies, spec, domains)
        self.passive_trips = [tp for tp in spec.trips if tp.kind == "passive"]
        n = len(self.policies)
        self.state = [[0] * n for _ in self.passive_trips]   # per trip, per domain: steps below f_max
        self.crossed = [False] * len(self.passive_trips)      # past the trip, until below trip - hyst

    def passive(self) -> bool:
        first = self.passive_trips[0].temp_c if self.passive_trips else math.inf
        return self.temp_c >= first or any(any(s) for s in self.state)

    def throttle(self, temp_c: float) -> None:
        rising = self.rising
        deepest = [0] * len(self.policies)   # per domain, the most steps any trip asks for
        for i, tp in enumerate(self.passive_trips):
            threshold = tp.temp_c - tp.hysteresis_c if self.crossed[i] else tp.temp_c
            hot = temp_c >= threshold
            self.crossed[i] = hot
            state = self.state[i]
            for d in self.domains:
                s = state[d]
                if hot and rising:
                    s = min(s + 1, len(self.policies[d].opps_mhz) - 1)
                elif not hot and not rising:
                    s = max(s - 1, 0)
                state[d] = s
                if s > deepest[d]:
                    deepest[d] = s
        for d in self.domains:
            opps = self.policies[d].opps_mhz
            self.limit(d, opps[len(opps) - 1 - deepest[d]], KERNEL, self.temp_c, rising)

    def _governor_quiet(self, lo_c: float, hi_c: float) -> bool:
        return (not any(self.crossed) and not any(any(s) for s in self.state)
                and all(hi_c < tp.temp_c for tp in self.passive_trips))


class PowerAllocator(ThermalZone):
    """IPA: a PID on temperature sets a power budget, divided among CPU domains, turned into caps."""

    name = "power_allocator"

    def __init__(self, sched: Scheduler, policies: Sequence[CpufreqPolicy], spec: ThermalSpec,
                 domains: Sequence[int] | None = None, k_po: float | None = None, k_pu: float | None = None,
                 k_i: float | None = None, k_d: float = 0.0, integral_cutoff_c: float = 0.0,
                 weights: Sequence[float] | None = None):
        super().__init__(sched, policies, spec, domains)
        self.sustainable_w = spec.sustainable_power_mw / 1000.0
        span_c = spec.control_c - spec.switch_on_c
        # estimate_pid_constants(): k_po = P_sus / span, k_pu = 2 P_sus / span, k_i = k_pu / 10
        # (W/K; k_i per poll, as the kernel accumulates the error once per poll).
        self.k_po = self.sustainable_w / span_c if k_po is None else k_po
        self.k_pu = 2.0 * self.sustainable_w / span_c if k_pu is None else k_pu
        self.k_i = self.k_pu / 10.0 if k_i is None else k_i
        self.k_d = k_d
        # Kernel default 0: the error integrates only while the zone is above control_c.
        self.integral_cutoff_c = integral_cutoff_c
        self.weights = [1.0] * len(self.domains) if weights is None else list(weights)
        self.err_integral_c = 0.0
        self.prev_err_c = 0.0
        self.budget_w: float | None = None
        self.granted_w: list[float] = [0.0] * len(self.domains)
        self._busy_prev = list(sched.busy_s)
        self._t_prev = self.env.now
        self._opp_w: dict[tuple[int, float], tuple[float, float]] = {}   # (dynamic, leakage at ref) per OPP

    def passive(self) -> bool:
        return self.temp_c >= self.spec.switch_on_c or self.throttling

    # -- the energy model ---------------------------------------------------------------------

    def domain_power_w(self, d: int, freq_mhz: float, load: float, leak: float | None = None) -> float:
        """Estimated power of domain ``d`` at ``freq_mhz`` with ``load`` busy cores (0..n).

        Dynamic power from the energy model times the busy cores, plus leakage of all cores at
        the cluster's present temperature (older kernels' cpu_cooling "static power" callback);
        ``leak``: that temperature's leakage factor, when the caller has it (`_leak`).
        """
        per_opp = self._opp_w.get((d, freq_mhz))
        if per_opp is None:
            c = self.platform.clusters[self.policies[d].index]
            soc = self.platform.spec.soc
            per_opp = self._opp_w[(d, freq_mhz)] = (
                dynamic_power_w(c, freq_mhz),
                leakage_w(c, freq_mhz, soc.leakage_ref_c, soc.leakage_ref_c, soc.leakage_doubling_c) * len(c.cpus))
        dyn_w, leak_ref_w = per_opp
        return dyn_w * load + leak_ref_w * (self._leak(d) if leak is None else leak)

    def _leak(self, d: int) -> float:
        """Domain ``d``'s leakage at its cluster's present temperature, relative to the reference."""
        p = self.platform
        soc = p.spec.soc
        return leakage_factor(p.temp_c(p.clusters[self.policies[d].index].name), soc.leakage_ref_c,
                              soc.leakage_doubling_c)

    def _loads(self) -> list[float]:
        """Busy cores per domain averaged since the last poll (cpufreq_cooling get_load())."""
        s = self.sched
        now = self.env.now
        dt = now - self._t_prev
        busy = s.busy_s
        out = []
        for d in self.domains:
            cpus = self.policies[d].cpus
            if dt > 0:
                out.append(sum(busy[c] - self._busy_prev[c] for c in cpus) / dt)
            else:
                out.append(sum(s.busy_now[c] for c in cpus))
        self._busy_prev, self._t_prev = list(busy), now
        return out

    # -- the control loop ---------------------------------------------------------------------

    def throttle(self, temp_c: float) -> None:
        loads = self._loads()
        if temp_c < self.spec.switch_on_c:
            self.err_integral_c = self.prev_err_c = 0.0
            self.budget_w = None
            for d in self.domains:
                self._set_cap(d, self.policies[d].fmax_mhz)
            return
        # the temperatures do not move within one poll: each domain's leakage is read once
        leaks = [self._leak(d) for d in self.domains]
        req = [self.domain_power_w(d, self.policies[d].cur_mhz, load, leak)
               for d, load, leak in zip(self.domains, loads, leaks)]
        max_w = [self.domain_power_w(d, self.policies[d].fmax_mhz, len(self.policies[d].cpus), leak)
                 for d, leak in zip(self.domains, leaks)]
        budget = self.pid(temp_c, sum(max_w))
        self.budget_w = budget
        self.granted_w = divvy_up_power([w * r for w, r in zip(self.weights, req)], max_w, budget)
        for d, granted, load, leak in zip(self.domains, self.granted_w, loads, leaks):
            self._set_cap(d, self.power_to_freq_mhz(d, granted, load, leak))

    def _governor_quiet(self, lo_c: float, hi_c: float) -> bool:
        # below switch-on every poll resets the PID and lifts the caps: nothing to change once done
        return hi_c < self.spec.switch_on_c and self.budget_w is None and self.err_integral_c == 0.0

    def pid(self, temp_c: float, max_w: float) -> float:
        """pid_controller(): the power budget for the next period, W."""
        err = self.spec.control_c - temp_c
        p = (self.k_po if err < 0 else self.k_pu) * err
        i = self.k_i * self.err_integral_c
        if err < self.integral_cutoff_c:
            i_next = i + self.k_i * err
            if abs(i_next) < max_w:  # integral clamp: never more than the whole allocatable power
                i = i_next
                self.err_integral_c += err
        d = self.k_d * (err - self.prev_err_c) / (self.spec.polling_passive_ms / 1000.0)
        self.prev_err_c = err
        return min(max(self.sustainable_w + p + i + d, 0.0), max_w)

    def power_to_freq_mhz(self, d: int, power_w: float, load: float, leak: float | None = None) -> float:
        """cpufreq_power2state(): the highest OPP whose estimated power fits ``power_w``."""
        load = max(load, 0.01)  # the kernel divides by last_load ?: 1 (percent)
        leak = self._leak(d) if leak is None else leak
        opps = self.policies[d].opps_mhz
        # the estimate rises with the OPP (tests/test_thermal.py checks every profile): bisect
        lo, hi = 0, len(opps)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.domain_power_w(d, opps[mid], load, leak) <= power_w:
                lo = mid + 1
            else:
                hi = mid
        return opps[max(lo - 1, 0)]


def divvy_up_power(req_w: Sequence[float], max_w: Sequence[float], budget_w: float) -> list[float]:
    """divvy_up_power(): share ``budget_w`` in proportion to requests, re-dividing any excess."""
    total = sum(req_w) or 1.0
    granted = [r * budget_w / total for r in req_w]
    extra = 0.0
    room = []
    for i, m in enumerate(max_w):
        if granted[i] > m:
            extra += granted[i] - m
            granted[i] = m
        room.append(m - granted[i])
    capped = sum(room)
    if extra > 0.0 and capped > 0.0:
        extra = min(extra, capped)
        granted = [g + r * extra / capped for g, r in zip(granted, room)]
    return granted


class Off(ThermalZone):
    """No thermal management: caps stay where they are set (the batch model measures a batch at
    given caps, with temperatures held at ambient)."""

    name = "off"

    def start(self):
        return None

    def throttle(self, temp_c: float) -> None:
        pass


# The thermal governors by their sysfs names; "off" (no kernel throttling) is an experiment's
# choice, never a device tree's (hw.profile.DT_THERMAL_GOVERNORS are the names a profile may give).
THERMAL_GOVERNORS: Registry[type[ThermalZone]] = Registry("thermal governor")
for _name, _cls in (("step_wise", StepWise), ("power_allocator", PowerAllocator), ("off", Off)):
    THERMAL_GOVERNORS.register(_name, _cls)


def make_thermal_governor(name: str, sched: Scheduler, policies: Sequence[CpufreqPolicy], spec: ThermalSpec,
                          **kwargs) -> ThermalZone:
    return THERMAL_GOVERNORS.get(name, "thermal governor")(sched, policies, spec, **kwargs)
