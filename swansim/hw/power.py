"""Power of the silicon, component by component, for a given activity.

Per core, following the Linux Energy Model: dynamic power C * V^2 * f * utilisation, with C the
device tree's `dynamic-power-coefficient` (uW/MHz/V^2); where a vendor energy table exists its
per-OPP busy power replaces C * V^2 * f. Leakage scales with voltage and doubles every
`leakage_doubling_c` above the reference temperature; a core in idle keeps a fraction of it
(clock-gated WFI; deeper power collapse is not modelled). A cluster's shared logic (L2/DSU
slice) draws power while busy, the SoC's uncore while any core is busy or has been idle less than
`SocSpec.uncore_sleep_us` (the platform's `uncore_hold`); DRAM costs energy per byte moved.
"""
from __future__ import annotations

from dataclasses import dataclass

from swansim.hw.profile import ClusterSpec, DeviceSpec

# Assumption: clock-gated idle cores keep this share of their leakage (cpuidle WFI state).
IDLE_LEAK_FRACTION = 0.25


def dynamic_power_w(cluster: ClusterSpec, freq_mhz: float, util: float = 1.0) -> float:
    """Busy dynamic power of one core at ``freq_mhz`` times its utilisation."""
    if cluster.power_table_mw is not None:
        i = cluster.opp_freq_mhz.index(freq_mhz) if freq_mhz in cluster.opp_freq_mhz else _opp_index(cluster, freq_mhz)
        return cluster.power_table_mw[i] / 1000.0 * util
    v = cluster.voltage_v(freq_mhz)
    return cluster.dyn_power_coeff_uw_mhz_v2 * v * v * freq_mhz * util * 1e-6


def _opp_index(cluster: ClusterSpec, freq_mhz: float) -> int:
    for i, f in enumerate(cluster.opp_freq_mhz):
        if f >= freq_mhz - 1e-9:
            return i
    return len(cluster.opp_freq_mhz) - 1


def leakage_factor(temp_c: float, ref_c: float, doubling_c: float) -> float:
    """Leakage at ``temp_c`` over leakage at ``ref_c``: it doubles every ``doubling_c``."""
    return 2.0 ** ((temp_c - ref_c) / doubling_c)


def leakage_w(cluster: ClusterSpec, freq_mhz: float, temp_c: float, ref_c: float, doubling_c: float) -> float:
    """Static power of one powered core: voltage-scaled, doubling every ``doubling_c``."""
    v_ratio = cluster.voltage_v(freq_mhz) / (cluster.opp_voltage_mv[-1] / 1000.0)
    return cluster.leakage_mw_per_core / 1000.0 * v_ratio * leakage_factor(temp_c, ref_c, doubling_c)


@dataclass(frozen=True)
class Component:
    """One line of the energy account and the thermal node its heat goes to."""

    name: str
    node: str


def components(spec: DeviceSpec) -> list[Component]:
    """Every power component of a device, in a fixed order (the energy account's rows)."""
    out = []
    for c in spec.soc.clusters:
        for cpu in c.cpus:
            out += [Component(f"cpu{cpu}.dynamic", c.name), Component(f"cpu{cpu}.leakage", c.name)]
        out.append(Component(f"{c.name}.cluster", c.name))
    out += [Component("soc.uncore", "soc"), Component("dram", "soc"),
            Component("base", "board"), Component("screen", "skin")]
    if spec.battery_capacity_mah is not None:
        # The charger's conversion loss, dissipated next to the cell (see hw/battery.py).
        out.append(Component("charging_loss", "battery"))
    return out
