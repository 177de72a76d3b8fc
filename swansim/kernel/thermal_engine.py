"""The vendor's user-space thermal engine: skin and virtual sensors, sampled, capping clusters.

On Qualcomm phones sustained throttling is decided mostly by ``thermal-engine``, a daemon that
reads board thermistors (skin, battery, virtual sensors made of several) every few seconds and
writes cpufreq limits, next to the kernel's thermal zones on junction temperatures. Its
``monitor`` algorithm, per configured section: ``thresholds`` with ``thresholds_clr`` and an
action per level (e.g. ``cluster1`` at a frequency); a level is entered when the sensor reaches
its threshold and left when it falls to its clear value; several sections acting on one cluster
resolve to the lowest frequency. The engine's limit and the kernel zone's are both cpufreq
limits: the lower wins (`CpufreqPolicy.set_limit`).

`ThermalEngine` is that daemon for a profile's ``[thermal_engine]`` table
(`hw.profile.ThermalEngineSpec`): one SimPy process per sampling period of its monitors (the
Pixel 3's engine samples its skin monitors every 1 and 2 s: 1.5 events a simulated second), which
settles the integrals to now, reads those monitors' sensors (an RC node, or a virtual sensor: a
weighted sum of nodes), moves their levels by the thresholds and clear values, and sets the
engine's limit on every cluster from every monitor's level through the thermal zone
(`ThermalZone.limit`), so one cap log and one set of listeners (probes, the batch model's
fast-forward) see the caps of both parties. Above ``shutdown_c`` on its ``shutdown_sensor`` it
records the time a phone would power off (the simulation keeps running, as for the zone's
critical trip).
"""
from __future__ import annotations

import math
from typing import Sequence

from swansim.hw.profile import ThermalEngineSpec
from swansim.hw.thermal import TempBounds
from swansim.kernel.cpufreq import ENGINE
from swansim.kernel.thermal_gov import ThermalZone


def step_level(level: int, temp_c: float, thresholds_c: Sequence[float], clear_c: Sequence[float]) -> int:
    """A monitor's next level: up past every threshold reached, down past every clear value
    reached (level i + 1 is left at ``clear_c[i]`` or below)."""
    n = len(thresholds_c)
    while level < n and temp_c >= thresholds_c[level]:
        level += 1
    while level > 0 and temp_c <= clear_c[level - 1]:
        level -= 1
    return level


class ThermalEngine:
    """Sampled monitors on skin, battery and virtual sensors; the engine's cpufreq limits."""

    def __init__(self, zone: ThermalZone, spec: ThermalEngineSpec):
        self.zone, self.spec = zone, spec
        self.env, self.sched, self.platform = zone.env, zone.sched, zone.platform
        self.domain_of = {p.name: d for d, p in enumerate(zone.policies)}
        self.levels = [0] * len(spec.rules)
        self.last_c: dict[str, float] = {}
        self.caps_by_rule: list[tuple[float, str, float]] = [(math.inf, "", math.nan)] * len(spec.rules)
        # (time_s, monitor index, sensor, temp_c, old level, new level): every level change
        self.level_log: list[tuple[float, int, str, float, int, int]] = []
        self.shutdown_s: float | None = None
        self.n_samples = 0
        self.periods_ms = sorted({r.sampling_ms for r in spec.rules})
        self.processes: list = []   # one SimPy process per sampling period, in the order of periods_ms

    def start(self) -> None:
        self.processes = [self.env.process(self._run(ms)) for ms in self.periods_ms]

    def _run(self, period_ms: float):
        rules = [i for i, r in enumerate(self.spec.rules) if r.sampling_ms == period_ms]
        while True:
            self.sample(rules)
            yield self.env.timeout(period_ms / 1000.0)

    def read_c(self, sensor: str) -> float:
        """A sensor's temperature now: an RC node's, or a virtual sensor's weighted sum."""
        v = self.spec.virtual.get(sensor)
        if v is None:
            return self.platform.temp_c(sensor)
        return v.offset_c + sum(w * self.platform.temp_c(n) for n, w in zip(v.nodes, v.weights))

    def sensor_range_c(self, sensor: str, bounds: TempBounds) -> tuple[float, float]:
        """The lowest and highest reading of a sensor within ``bounds``."""
        v = self.spec.virtual.get(sensor)
        if v is None:
            return bounds.of(sensor)
        lo = hi = v.offset_c
        for n, w in zip(v.nodes, v.weights):
            a, b = bounds.of(n)
            lo, hi = (lo + w * a, hi + w * b) if w >= 0 else (lo + w * b, hi + w * a)
        return lo, hi

    def quiet(self, bounds: TempBounds, period_ms: float) -> bool:
        """Would every sample of the monitors sampled every ``period_ms`` leave their levels (so
        the engine's limits) as they are, whatever the readings within ``bounds``?"""
        for rule, level in zip(self.spec.rules, self.levels):
            if rule.sampling_ms != period_ms:
                continue
            lo, hi = self.sensor_range_c(rule.sensor, bounds)
            if level < len(rule.thresholds_c) and hi >= rule.thresholds_c[level]:
                return False
            if level > 0 and lo <= rule.clear_c[level - 1]:
                return False
        spec = self.spec
        return spec.shutdown_c is None or self.shutdown_s is not None \
            or self.sensor_range_c(spec.shutdown_sensor, bounds)[1] < spec.shutdown_c

    def skipped(self, samples: int) -> None:
        """``samples`` samples were skipped as quiet."""
        self.n_samples += samples

    def sample(self, rules: Sequence[int] | None = None) -> None:
        """One pass over monitors ``rules`` (None: all): read, move their levels, then set every
        cluster's limit from the levels of all monitors."""
        self.sched.sync()
        now = self.env.now
        self.n_samples += 1
        spec = self.spec
        temps = {}
        for i in range(len(spec.rules)) if rules is None else rules:
            rule = spec.rules[i]
            t = temps.get(rule.sensor)
            if t is None:
                t = temps[rule.sensor] = self.read_c(rule.sensor)
            level = step_level(self.levels[i], t, rule.thresholds_c, rule.clear_c)
            if level != self.levels[i]:
                self.level_log.append((now, i, rule.sensor, t, self.levels[i], level))
                self.levels[i] = level
            self.caps_by_rule[i] = (rule.caps_mhz[level - 1] if level else math.inf, rule.sensor, t)
        want: dict[int, tuple[float, str, float]] = {}
        for rule, got in zip(spec.rules, self.caps_by_rule):
            d = self.domain_of[rule.cluster]
            if got[0] < want.get(d, (math.inf,))[0]:
                want[d] = got
        for d, policy in enumerate(self.zone.policies):
            fmax = policy.fmax_mhz
            cap, sensor, t = want.get(d, (fmax, "", math.nan))
            cap = min(cap, fmax)
            if policy.limits_mhz.get(ENGINE, fmax) != cap:
                rising = sensor in self.last_c and t > self.last_c[sensor]
                self.zone.limit(d, cap, ENGINE, t, rising)
        self.last_c.update(temps)
        if spec.shutdown_c is not None and self.shutdown_s is None \
                and self.read_c(spec.shutdown_sensor) >= spec.shutdown_c:
            self.shutdown_s = now
