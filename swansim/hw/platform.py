"""One device's silicon at run time: core frequencies, activity, power, energy, temperatures.

The kernel tells the platform what changed (`set_freq`, `set_activity`); the platform keeps
power piecewise constant between those changes, so `advance(now)` integrates energy and the
RC network exactly. Leakage depends on temperature, so it is re-evaluated at every advance
(power stays constant *within* an interval, which keeps the energy account exact).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from swansim.hw.power import IDLE_LEAK_FRACTION, components, dynamic_power_w, leakage_w
from swansim.hw.profile import DeviceSpec
from swansim.hw.thermal import ThermalNetwork

# A probe: called with (t0_s, t1_s, platform) after each interval is integrated, power as it was.
IntervalProbe = Callable[[float, float, "Platform"], None]


class Platform:
    """Frequencies, utilisation, power per component, energy account and temperatures."""

    def __init__(self, spec: DeviceSpec, screen_on: bool = False):
        self.spec = spec
        soc = spec.soc
        self.clusters = soc.clusters
        self.n_cpus = soc.n_cpus
        self.cluster_of_cpu = [0] * self.n_cpus
        for k, c in enumerate(self.clusters):
            for cpu in c.cpus:
                self.cluster_of_cpu[cpu] = k
        self.freq_mhz = [c.fmax_mhz for c in self.clusters]
        # Per-cluster figures that change only with frequency, cached for the hot path.
        self._busy_dyn_w = [0.0] * len(self.clusters)
        self._v_ratio = [1.0] * len(self.clusters)
        self._leak_w = [0.0] * len(self.clusters)   # per core at reference temperature
        for k in range(len(self.clusters)):
            self._freq_changed(k)
        self.util = [0.0] * self.n_cpus
        self.dram_bytes_per_s = 0.0
        self.screen_on = screen_on
        self.thermal = ThermalNetwork(spec.rc, spec.ambient_c)
        comps = components(spec)
        self.component_names = tuple(c.name for c in comps)
        self._comp_node = np.zeros((len(self.thermal.nodes), len(comps)))
        for j, c in enumerate(comps):
            self._comp_node[self.thermal.index[c.node], j] = 1.0
        self._cluster_node = [self.thermal.index[c.name] for c in self.clusters]
        self.power_w = np.zeros(len(comps))
        self.energy_j = np.zeros(len(comps))
        self.time_s = 0.0
        self.probes: list[IntervalProbe] = []
        # Heat of the charger's conversion loss (W), set by the battery; a component only with a battery.
        self.charging_loss_w = 0.0
        self._has_charger = "charging_loss" in self.component_names
        self._recompute()

    # -- changes ------------------------------------------------------------------------------

    def set_freq(self, cluster: int, freq_mhz: float) -> None:
        """Caller has advanced to now; the new frequency holds from now on."""
        self.freq_mhz[cluster] = freq_mhz
        self._freq_changed(cluster)
        self._recompute()

    def _freq_changed(self, k: int) -> None:
        c, f = self.clusters[k], self.freq_mhz[k]
        self._busy_dyn_w[k] = dynamic_power_w(c, f)
        self._v_ratio[k] = c.voltage_v(f) / (c.opp_voltage_mv[-1] / 1000.0)
        self._leak_w[k] = leakage_w(c, f, self.spec.soc.leakage_ref_c, self.spec.soc.leakage_ref_c,
                                    self.spec.soc.leakage_doubling_c)

    def set_activity(self, util: list[float], dram_bytes_per_s: float) -> None:
        self.util = util
        self.dram_bytes_per_s = dram_bytes_per_s
        self._recompute()

    def set_screen(self, on: bool) -> None:
        self.screen_on = on
        self._recompute()

    def set_charging_loss(self, loss_w: float) -> None:
        """The charger's loss heats the battery node from now on (no-op without a battery)."""
        self.charging_loss_w = loss_w if self._has_charger else 0.0
        self._recompute()

    # -- time ---------------------------------------------------------------------------------

    def advance(self, now_s: float) -> None:
        """Integrate energy and temperatures up to ``now_s`` with the power of the interval."""
        dt = now_s - self.time_s
        if dt <= 0.0:
            return
        t0 = self.time_s
        self.energy_j += self.power_w * dt
        self.thermal.step(dt, self._comp_node @ self.power_w)
        self.time_s = now_s
        for probe in self.probes:
            probe(t0, now_s, self)
        self._recompute()  # leakage follows the new temperatures

    # -- readings -----------------------------------------------------------------------------

    @property
    def total_power_w(self) -> float:
        return float(self.power_w.sum())

    @property
    def total_energy_j(self) -> float:
        return float(self.energy_j.sum())

    def energy_by_component(self) -> dict[str, float]:
        return dict(zip(self.component_names, self.energy_j.tolist()))

    def temp_c(self, node: str) -> float:
        return self.thermal.temp(node)

    # -- power --------------------------------------------------------------------------------

    def _recompute(self) -> None:
        soc = self.spec.soc
        temps = self.thermal.temp_c
        ref_c, doubling_c = soc.leakage_ref_c, soc.leakage_doubling_c
        p = self.power_w
        util = self.util
        j = 0
        any_busy = 0.0
        for k, c in enumerate(self.clusters):
            busy_dyn = self._busy_dyn_w[k]
            leak = self._leak_w[k] * 2.0 ** ((temps[self._cluster_node[k]] - ref_c) / doubling_c)
            idle_leak = leak * IDLE_LEAK_FRACTION
            cluster_busy = 0.0
            for cpu in c.cpus:
                u = util[cpu]
                p[j] = busy_dyn * u
                p[j + 1] = leak * u + idle_leak * (1.0 - u)
                j += 2
                if u > cluster_busy:
                    cluster_busy = u
            # Shared cluster logic runs at the cluster clock: scale with f and V^2 like a core.
            v = self._v_ratio[k]
            p[j] = c.cluster_active_mw * 1e-3 * cluster_busy * v * v * self.freq_mhz[k] / c.fmax_mhz
            j += 1
            if cluster_busy > any_busy:
                any_busy = cluster_busy
        p[j] = soc.soc_active_mw * 1e-3 * any_busy
        p[j + 1] = self.dram_bytes_per_s * soc.dram_energy_pj_per_byte * 1e-12
        p[j + 2] = self.spec.base_power_mw * 1e-3
        p[j + 3] = self.spec.screen_power_mw * 1e-3 if self.screen_on else 0.0
        if self._has_charger:
            p[j + 4] = self.charging_loss_w
