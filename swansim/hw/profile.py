"""Device profiles: SoCs and phones as data, loaded into frozen dataclasses and validated.

A profile is a TOML file. Every table that holds figures has a ``sources`` sub-table naming,
for each figure, where it comes from or why it is an assumption; the validator refuses a
figure without one. The schema is documented in ``device_profiles/README.md``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swansim.checks import did_you_mean, is_number, one_of
from swansim.errors import InputError
from swansim.hw.sourced import SourcedTable, read_toml

# assumption: idle load-to-use DRAM latency of an LPDDR4X phone SoC, ~110 ns (published latency
# sweeps of Snapdragon 845/855 and Exynos 9820 phones put the DRAM plateau at ~100-120 ns). Used
# when a SoC file gives no `dram_latency_ns`; drives the memory-queueing slowdown in kernel.sched.
DEFAULT_DRAM_LATENCY_NS = 110.0


def _opt(v: float | None, default: float) -> float:
    return default if v is None else v


# Cache line size of every core in the catalogue (Arm Cortex-A53..X4 TRMs: 64-byte lines).
CACHE_LINE_BYTES = 64

PROFILE_DIR = Path(os.environ.get("SWANSIM_PROFILES", Path(__file__).resolve().parents[2] / "device_profiles"))
AMBIENT = "ambient"
# The phone a command or API call runs when none is named: the Swan paper's Fig. 2 phone.
DEFAULT_DEVICE = "pixel3"
# The Swan paper's five phones (Singapuram et al., arXiv 2206.04687, sec. 5, Experimental Setup:
# "5 mobile-devices: Galaxy Tab S6, OnePlus 8, Samsung S10e, Google Pixel 3 and Xiaomi Mi 10, to
# obtain their performance profiles"; the same profiles drive its FedScale fleet).
SWAN_PHONES = ("pixel3", "galaxy-s10e", "galaxy-tab-s6", "oneplus8", "mi10")
TRIP_TYPES = ("active", "passive", "hot", "critical")
DEVICE_KINDS = ("phone", "tablet", "board")
# The thermal governors a device tree may name (kernel.thermal_gov.THERMAL_GOVERNORS registers
# one for each, and "off" besides; tests/test_one_truth.py checks).
DT_THERMAL_GOVERNORS = ("step_wise", "power_allocator")
# Android's cpuset (and schedtune) groups as init.rc creates them, TOML-friendly spellings.
ANDROID_GROUPS = ("top_app", "foreground", "background", "system_background", "restricted")
TOP_APP = "top_app"   # the app on the screen (and, by inheritance at fork, Swan's Termux python)
# Vendor kernel scheduler flavours a phone profile may name (`[kernel] flavour`): all place
# threads with WALT task demand and EAS find_best_target (kernel.walt.WaltPlacement); they
# differ in where a boosted task starts its search on SoCs with three or more clusters
# (Android 4.9 start_cpu(): the biggest cluster; msm-4.14/4.19 get_start_cpu(): the middle one).
SCHED_FLAVOURS = ("android-4.9-walt", "msm-4.14-walt", "msm-4.19-walt")


@dataclass(frozen=True)
class ClusterSpec:
    """Identical cores sharing one frequency domain (a cpufreq policy)."""

    name: str
    uarch: str
    cpus: tuple[int, ...]
    capacity_dmips_mhz: float
    opp_freq_mhz: tuple[float, ...]
    opp_voltage_mv: tuple[float, ...]
    voltage_derived: bool
    dyn_power_coeff_uw_mhz_v2: float
    gemm_flop_per_cycle: float
    vector_flop_per_cycle: float
    scalar_ipc: float
    leakage_mw_per_core: float
    cluster_active_mw: float
    l2_kib_per_core: float
    # Vendor energy model (e.g. Pixel 6 "pixel-em"): busy power per CPU at each OPP, mW.
    power_table_mw: tuple[float, ...] | None = None
    # Cores per vector unit: 2 for Cortex-A510 merged-core complexes (two cores, one shared
    # FP/NEON unit), 1 otherwise. Complexes are consecutive cpus of the cluster; cores of one
    # complex that compute at the same time share the unit's gemm/vector FLOP rate.
    vector_unit_shared_by: int = 1

    def complex_of(self, cpu: int) -> tuple[int, ...]:
        """The cpus sharing ``cpu``'s vector unit (``cpu`` alone unless it is shared)."""
        i = self.cpus.index(cpu)
        k = self.vector_unit_shared_by
        return self.cpus[i - i % k: i - i % k + k]

    @property
    def cpu_slice(self) -> slice | None:
        """Its cores as a slice of a per-CPU list where they are numbered in a row (else None):
        the hot paths read a cluster's share of per-CPU state this way."""
        a, b = self.cpus[0], self.cpus[-1] + 1
        return slice(a, b) if self.cpus == tuple(range(a, b)) else None

    @property
    def fmax_mhz(self) -> float:
        return self.opp_freq_mhz[-1]

    @property
    def fmin_mhz(self) -> float:
        return self.opp_freq_mhz[0]

    @property
    def capacity(self) -> float:
        """What the kernel believes one core can do at its top clock (arch_topology's
        capacity_orig before normalisation): the device tree's capacity-dmips-mhz x f_max.
        Placement, the core classes (little/big/prime) and the choice order all rank by it."""
        return self.capacity_dmips_mhz * self.fmax_mhz

    def voltage_v(self, freq_mhz: float) -> float:
        """Voltage of the lowest OPP at or above ``freq_mhz`` (the OPP the domain runs at)."""
        for f, v in zip(self.opp_freq_mhz, self.opp_voltage_mv):
            if f >= freq_mhz - 1e-9:
                return v / 1000.0
        return self.opp_voltage_mv[-1] / 1000.0


@dataclass(frozen=True)
class TripPoint:
    temp_c: float
    kind: str
    hysteresis_c: float


@dataclass(frozen=True)
class ThermalSpec:
    """Thermal zone of the CPU: trips and governor, as in the device tree."""

    governor: str
    sensor_node: str
    trips: tuple[TripPoint, ...]
    polling_passive_ms: float
    polling_idle_ms: float
    sustainable_power_mw: float
    switch_on_c: float
    control_c: float


@dataclass(frozen=True)
class EngineRule:
    """One monitor of a vendor thermal engine (Qualcomm thermal-engine's ``algo_type monitor``):
    while ``sensor`` is at or above ``thresholds_c[i]`` its level is at least i + 1, and it
    comes down from level i + 1 once the sensor is at or below ``clear_c[i]``; level i + 1 caps
    ``cluster`` at ``caps_mhz[i]``. The sensor is read every ``sampling_ms``."""

    sensor: str
    cluster: str
    sampling_ms: float
    thresholds_c: tuple[float, ...]
    clear_c: tuple[float, ...]
    caps_mhz: tuple[float, ...]


@dataclass(frozen=True)
class VirtualSensor:
    """A sensor the engine computes: a weighted sum of RC nodes' temperatures plus an offset."""

    nodes: tuple[str, ...]
    weights: tuple[float, ...]
    offset_c: float = 0.0


@dataclass(frozen=True)
class ThermalEngineSpec:
    """The vendor's user-space thermal engine: what it reads, how often, and the caps it sets."""

    rules: tuple[EngineRule, ...]
    virtual: dict[str, VirtualSensor] = field(default_factory=dict)
    shutdown_sensor: str | None = None
    shutdown_c: float | None = None


@dataclass(frozen=True)
class RCNetwork:
    """Lumped thermal network: node heat capacities and thermal resistances between nodes."""

    capacity_j_per_k: dict[str, float]
    edges_k_per_w: tuple[tuple[str, str, float], ...]


@dataclass(frozen=True)
class SocSpec:
    name: str
    title: str
    clusters: tuple[ClusterSpec, ...]
    dram_bandwidth_gbps: float
    dram_energy_pj_per_byte: float
    soc_active_mw: float
    uncore_sleep_us: float   # every core idle this long before the uncore powers down
    l3_kib: float
    leakage_ref_c: float
    leakage_doubling_c: float
    thermal: ThermalSpec
    rc: RCNetwork
    path: Path
    kind: str = "soc"
    # Idle (unloaded) DRAM load-to-use latency. Optional in a SoC file (`dram_latency_ns`, with a
    # source); absent, DEFAULT_DRAM_LATENCY_NS (a documented assumption) is used.
    dram_latency_ns: float = DEFAULT_DRAM_LATENCY_NS

    @property
    def n_cpus(self) -> int:
        return sum(len(c.cpus) for c in self.clusters)

    def cluster_of(self, cpu: int) -> ClusterSpec:
        for c in self.clusters:
            if cpu in c.cpus:
                return c
        raise KeyError(cpu)

    # -- core classes: the one definition every path uses ------------------------------------

    @property
    def ranked_clusters(self) -> tuple[ClusterSpec, ...]:
        """Clusters from the lowest to the highest per-core capacity (ties: lower cpu ids first)."""
        return tuple(sorted(self.clusters, key=lambda c: (c.capacity, c.cpus[0])))

    @property
    def little(self) -> ClusterSpec:
        """The lowest-capacity cluster (where Android's background cpuset usually sits)."""
        return self.ranked_clusters[0]

    @property
    def big_cpus(self) -> tuple[int, ...]:
        """Every cpu outside the little cluster (all cpus on a single-cluster SoC): the
        paper's "big cores", whose count is PyTorch's default thread count."""
        ranked = self.ranked_clusters
        rest = ranked[1:] or ranked
        return tuple(sorted(cpu for c in rest for cpu in c.cpus))

    @property
    def prime(self) -> ClusterSpec | None:
        """The prime core's cluster: on SoCs with three or more clusters, the top-capacity one if
        its capacity stands above the next one's (SD855's cpu 7); None otherwise - RK3588's two
        A76 domains have one capacity, and the second is not a prime core."""
        ranked = self.ranked_clusters
        if len(ranked) >= 3 and ranked[-1].capacity > ranked[-2].capacity:
            return ranked[-1]
        return None

    @property
    def tiers(self) -> tuple[tuple[int, ...], ...]:
        """CPUs above the little cluster grouped by capacity, smallest first: clusters of equal
        capacity (separate frequency domains of one core type) form one tier."""
        out: list[tuple[int, ...]] = []
        ranked = self.ranked_clusters
        for prev, c in zip(ranked, ranked[1:]):
            if out and c.capacity == prev.capacity:
                out[-1] = out[-1] + c.cpus
            else:
                out.append(c.cpus)
        return tuple(out)


@dataclass(frozen=True)
class StuneGroup:
    """One schedtune group's attributes (kernel/sched/tune.c; defaults are the kernel's)."""

    boost_pct: float = 0.0       # schedtune.boost: > 0 makes the group's tasks "boosted"
    prefer_idle: bool = False    # schedtune.prefer_idle: latency sensitive, take idle CPUs
    colocate: bool = False       # schedtune.colocate (QC WALT): attached tasks join the related group


@dataclass(frozen=True)
class CoreCtlCluster:
    """core_ctl tunables of one cluster (kernel/sched/core_ctl.c sysfs). A cluster a profile
    does not list keeps every cpu online (core_ctl off, or untuned: busy_up_thres 0 counts
    every cpu as busy)."""

    cluster: str
    min_cpus: int
    busy_up_pct: float
    busy_down_pct: float
    offline_delay_ms: float
    task_thres: int | None = None            # None: UINT_MAX (never)
    nr_prev_assist_thresh: int | None = None  # None: UINT_MAX (never)


@dataclass(frozen=True)
class KernelSpec:
    """A phone's vendor kernel scheduler and governor tunables, as its init scripts set them.

    ``upmigrate_pct``/``downmigrate_pct``: WALT's sched_upmigrate/sched_downmigrate, one value
    per boundary between capacity-ranked clusters (smallest first): a task fits a cluster when
    its demand is below that share of the cluster's capacity (downmigrate when it comes from a
    bigger cluster). ``schedtune``: per Android group (`ANDROID_GROUPS`); a group not listed has
    the kernel defaults.
    """

    flavour: str
    window_ms: float
    hist_size: int
    init_task_load_pct: float
    upmigrate_pct: tuple[float, ...]
    downmigrate_pct: tuple[float, ...]
    group_upmigrate_pct: float
    group_downmigrate_pct: float
    coloc_downmigrate_ms: float
    schedutil_up_rate_limit_us: float
    schedutil_down_rate_limit_us: float
    schedtune: dict[str, StuneGroup] = field(default_factory=dict)
    core_ctl: tuple[CoreCtlCluster, ...] = ()
    # scaling_min_freq per cluster name, as the init scripts write it; a cluster not listed
    # keeps its lowest OPP
    min_freq_mhz: dict[str, float] = field(default_factory=dict)

    def stune(self, group: str) -> StuneGroup:
        return self.schedtune.get(group, _DEFAULT_STUNE)

    @property
    def _android_4_9(self) -> bool:
        """Google's Android 4.9 EAS kernel (the Pixel 3's), where its rules differ from msm's."""
        return self.flavour.startswith("android-4.9")

    @property
    def boosted_start(self) -> str:
        """Where a boosted task starts its search: "biggest" (Android 4.9) or "middle" (msm)."""
        return "biggest" if self._android_4_9 else "middle"

    @property
    def most_spare_fallback(self) -> bool:
        """Whether find_best_target, finding no CPU the waking task fits, falls back to the CPU
        with the most spare capacity (msm) before the task's previous CPU (Android 4.9: straight
        to the previous CPU). `kernel.walt.WaltPlacement._fallback` cites both."""
        return not self._android_4_9

    @property
    def eas_wake_when_overutilized(self) -> bool:
        """Whether a waking task goes through find_best_target while the root domain is
        over-utilized. Android 4.9's select_task_rq_fair takes the energy-aware path only while
        it is not and otherwise the classic one, wake_affine and select_idle_sibling
        (PixelOS-Bluecross/kernel_google_crosshatch@79dc4403 kernel/sched/fair.c,
        select_task_rq_fair: "if (energy_aware() && !(cpu_rq(prev_cpu)->rd->overutilized))").
        msm-4.14 returns find_energy_efficient_cpu whenever energy_aware(), over-utilized or not
        (Planet-X/android_kernel_oneplus_sm8150@2498885a kernel/sched/fair.c,
        select_task_rq_fair), and that takes find_best_target's CPU when the previous one is
        over-utilized. `kernel.walt.WaltPlacement._idle_sibling`."""
        return not self._android_4_9

    @property
    def newidle_needs_migration_cost(self) -> bool:
        """Whether a newly idle CPU balances only when its average idle time reaches
        sysctl_sched_migration_cost and some CPU is overloaded (rd->overload), unless it is not
        of the smallest capacity and a misfit sits on the smallest cluster (force_lb, which also
        lifts the domains' cost test): msm-4.14's idle_balance (Planet-X/
        android_kernel_oneplus_sm8150@2498885a kernel/sched/fair.c). Android 4.9 skips that test
        under EAS ("if (!energy_aware() && (this_rq->avg_idle < sysctl_sched_migration_cost ||
        ..."; PixelOS-Bluecross/kernel_google_crosshatch@79dc4403). Both keep the per-domain
        cost test. `kernel.walt.WaltPlacement.idle_balance`."""
        return not self._android_4_9


_DEFAULT_STUNE = StuneGroup()


@dataclass(frozen=True)
class DeviceSpec:
    """A phone, tablet or board: an SoC in a chassis with a battery, a display and cpusets."""

    name: str
    title: str
    kind: str
    soc: SocSpec
    battery_capacity_mah: float | None
    battery_voltage_v: float | None
    display_refresh_hz: float
    base_power_mw: float
    screen_power_mw: float
    ambient_c: float
    cpusets: dict[str, tuple[int, ...]]
    thermal: ThermalSpec
    rc: RCNetwork
    path: Path
    # The vendor kernel's scheduler (None: no `[kernel]` table; mainline-like defaults).
    kernel: KernelSpec | None = None
    # The vendor's user-space thermal engine (None: no `[thermal_engine]` table, the kernel's
    # thermal zone alone decides).
    thermal_engine: ThermalEngineSpec | None = None

    def cpuset(self, group: str) -> tuple[int, ...]:
        """The CPUs of an Android group; a group the profile does not list is the root cpuset."""
        return self.cpusets.get(group, tuple(range(self.soc.n_cpus)))

    @property
    def battery_capacity_j(self) -> float | None:
        if self.battery_capacity_mah is None:
            return None
        return self.battery_capacity_mah * 3.6 * self.battery_voltage_v


def _cluster(t: SourcedTable) -> ClusterSpec:
    freqs = t.nums("opp_freq_mhz", 10, 6000, "MHz", increasing=True)
    volts = t.nums("opp_voltage_mv", 300, 1600, "mV")
    if len(volts) != len(freqs):
        raise t.err("opp_voltage_mv", f"has {len(volts)} entries but opp_freq_mhz has {len(freqs)}")
    for i in range(1, len(volts)):
        if volts[i] < volts[i - 1]:
            raise t.err(f"opp_voltage_mv[{i}]", "voltage falls while frequency rises")
    table = t.nums("power_table_mw", 0, 20000, "mW per CPU", required=False)
    if table is not None and len(table) != len(freqs):
        raise t.err("power_table_mw", f"has {len(table)} entries but opp_freq_mhz has {len(freqs)}")
    spec = ClusterSpec(
        name=t.str("name"), uarch=t.str("uarch"), cpus=t.ints("cpus"),
        capacity_dmips_mhz=t.num("capacity_dmips_mhz", 1, 4096),
        opp_freq_mhz=freqs, opp_voltage_mv=volts, voltage_derived=t.bool("voltage_derived"),
        dyn_power_coeff_uw_mhz_v2=t.num("dyn_power_coeff_uw_mhz_v2", 1, 5000, "uW/MHz/V^2"),
        gemm_flop_per_cycle=t.num("gemm_flop_per_cycle", 0.5, 128, "FLOP/cycle"),
        vector_flop_per_cycle=t.num("vector_flop_per_cycle", 0.5, 128, "FLOP/cycle"),
        scalar_ipc=t.num("scalar_ipc", 0.1, 10, "instructions/cycle"),
        leakage_mw_per_core=t.num("leakage_mw_per_core", 0, 2000, "mW"),
        cluster_active_mw=t.num("cluster_active_mw", 0, 5000, "mW"),
        l2_kib_per_core=t.num("l2_kib_per_core", 16, 8192, "KiB"),
        power_table_mw=table,
        vector_unit_shared_by=t.int("vector_unit_shared_by", 1, 4, required=False) or 1,
    )
    t.done()
    return spec


def _thermal(t: SourcedTable, base: ThermalSpec | None = None) -> ThermalSpec:
    """Read a [thermal] table; with ``base``, fields present override the SoC's."""
    def opt(name, reader):
        t.known.add(name)
        return reader() if (base is None or name in t.data) else getattr(base, name)

    def trips():
        temps = t.nums("trip_c", -20, 200, "C", increasing=True)
        kinds = t.raw("trip_types")
        hyst = t.nums("trip_hysteresis_c", 0, 50, "C")
        if not isinstance(kinds, list) or len(kinds) != len(temps):
            raise t.err("trip_types", f"expected a list of {len(temps)} of {', '.join(TRIP_TYPES)}")
        for i, k in enumerate(kinds):
            if k not in TRIP_TYPES:
                raise t.err(f"trip_types[{i}]", f"{k!r} is not one of {', '.join(TRIP_TYPES)}")
        if len(hyst) != len(temps):
            raise t.err("trip_hysteresis_c", f"expected {len(temps)} entries")
        return tuple(TripPoint(a, b, c) for a, b, c in zip(temps, kinds, hyst))

    spec = ThermalSpec(
        governor=opt("governor", lambda: t.str("governor", choices=DT_THERMAL_GOVERNORS)),
        sensor_node=opt("sensor_node", lambda: t.str("sensor_node")),
        # Trips are read from trip_c/trip_types/trip_hysteresis_c, not from a "trips" key.
        trips=trips() if base is None or "trip_c" in t.data else base.trips,
        polling_passive_ms=opt("polling_passive_ms", lambda: t.num("polling_passive_ms", 1, 60000, "ms")),
        polling_idle_ms=opt("polling_idle_ms", lambda: t.num("polling_idle_ms", 1, 60000, "ms")),
        sustainable_power_mw=opt("sustainable_power_mw", lambda: t.num("sustainable_power_mw", 100, 50000, "mW")),
        switch_on_c=opt("switch_on_c", lambda: t.num("switch_on_c", 0, 150, "C")),
        control_c=opt("control_c", lambda: t.num("control_c", 0, 150, "C")),
    )
    if spec.switch_on_c >= spec.control_c:
        raise t.err("switch_on_c", f"must be below control_c ({spec.control_c} C)")
    if "trip_c" not in t.data:
        for key in ("trip_types", "trip_hysteresis_c"):
            if key in t.data:
                raise t.err(key, "given without trip_c (trips are replaced as a whole)")
    t.done(also=("trip_c", "trip_types", "trip_hysteresis_c"))
    return spec


def _rc(t: SourcedTable) -> RCNetwork:
    caps_t = t.sub("capacity_j_per_k", sourced=False)
    caps = {}
    for k, v in caps_t.data.items():
        if k == "sources":
            continue
        caps[k] = _positive(caps_t, k, v, "J/K")
        t.need_source(f"capacity_j_per_k.{k}")
    edges = []
    raw = t.raw("edges_k_per_w")
    if not isinstance(raw, list):
        raise t.err("edges_k_per_w", "expected a list of [node, node, resistance_k_per_w]")
    for i, e in enumerate(raw):
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and isinstance(e[1], str)):
            raise t.err(f"edges_k_per_w[{i}]", f"expected [node, node, K/W], got {e!r}")
        r = e[2]
        if not is_number(r) or not (0 < r < 1e4):
            raise t.err(f"edges_k_per_w[{i}]", f"resistance must be a positive number of K/W, got {r!r}")
        t.need_source(f"edges_k_per_w.{e[0]}-{e[1]}")
        edges.append((e[0], e[1], float(r)))
    t.done()
    return RCNetwork(caps, tuple(edges))


def _positive(t: SourcedTable, key: str, v: Any, unit: str) -> float:
    if not is_number(v) or v <= 0:
        raise t.err(key, f"expected a positive number of {unit}, got {v!r}")
    return float(v)


def _check_rc(path: Path, rc: RCNetwork, heat_nodes: list[str]) -> None:
    nodes = set(rc.capacity_j_per_k)
    for a, b, _ in rc.edges_k_per_w:
        for n in (a, b):
            if n != AMBIENT and n not in nodes:
                raise InputError(path, "thermal_rc.edges_k_per_w", f"unknown node {n!r} (nodes: {', '.join(sorted(nodes))})")
    _check_rc_partial(path, rc, heat_nodes)
    reach, frontier = {AMBIENT}, [AMBIENT]
    while frontier:
        x = frontier.pop()
        for a, b, _ in rc.edges_k_per_w:
            for p, q in ((a, b), (b, a)):
                if p == x and q not in reach:
                    reach.add(q)
                    frontier.append(q)
    lost = nodes - reach
    if lost:
        raise InputError(path, "thermal_rc.edges_k_per_w", f"nodes with no path to ambient: {', '.join(sorted(lost))}")


def load_soc(path: Path, data: dict | None = None) -> SocSpec:
    """An SoC file; ``data``: its content already read (and perhaps changed: `--set`)."""
    path = Path(path)
    t = SourcedTable(read_toml(path) if data is None else data, path, "")
    raw_clusters = t.raw("clusters")
    if not isinstance(raw_clusters, list) or not raw_clusters:
        raise t.err("clusters", "missing: an SoC needs at least one [[clusters]] table")
    clusters = []
    for i, c in enumerate(raw_clusters):
        ct = SourcedTable(c, path, f"clusters[{i}]")
        if "opp_freq_mhz" not in c:
            raise ct.err("opp_freq_mhz", "missing: a cluster needs an OPP table")
        clusters.append(_cluster(ct))
    cpus = [cpu for c in clusters for cpu in c.cpus]
    if sorted(cpus) != list(range(len(cpus))):
        raise t.err("clusters", f"cpu ids must be 0..{len(cpus) - 1} each once, got {sorted(cpus)}")
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise t.err("clusters", f"cluster names must be distinct, got {names}")
    # The kernel numbers the smallest cores first and every profile lists its clusters so; a
    # list out of that order would give a cluster named for one class the rank of another.
    for i in range(1, len(clusters)):
        if clusters[i].capacity < clusters[i - 1].capacity:
            raise t.err(f"clusters[{i}].capacity_dmips_mhz",
                        f"{clusters[i].name!r} is smaller than {clusters[i - 1].name!r} listed before it "
                        "(capacity_dmips_mhz x top OPP; list clusters from the smallest to the biggest)")
    thermal = _thermal(t.sub("thermal"))
    rc = _rc(t.sub("thermal_rc"))
    _check_rc_partial(path, rc, names + ["soc"])
    soc = SocSpec(
        name=t.str("name"), title=t.str("title"), clusters=tuple(clusters),
        dram_bandwidth_gbps=t.num("dram_bandwidth_gbps", 1, 500, "GB/s"),
        dram_energy_pj_per_byte=t.num("dram_energy_pj_per_byte", 1, 1000, "pJ/byte"),
        soc_active_mw=t.num("soc_active_mw", 0, 10000, "mW"),
        uncore_sleep_us=t.num("uncore_sleep_us", 0, 1e6, "us"),
        l3_kib=t.num("l3_kib", 0, 65536, "KiB"),
        dram_latency_ns=_opt(t.num("dram_latency_ns", 20, 1000, "ns", required=False), DEFAULT_DRAM_LATENCY_NS),
        leakage_ref_c=t.num("leakage_ref_c", -20, 120, "C"),
        leakage_doubling_c=t.num("leakage_doubling_c", 5, 200, "C"),
        thermal=thermal, rc=rc, path=path,
    )
    t.done()
    return soc


def _check_rc_partial(path: Path, rc: RCNetwork, heat_nodes: list[str]) -> None:
    for n in heat_nodes:
        if n not in rc.capacity_j_per_k:
            raise InputError(path, "thermal_rc.capacity_j_per_k", f"missing node {n!r}")


def _named_tables(t: SourcedTable, key: str, known, what: str, label: str):
    """(name, sub-table) for each table under the optional table ``key``; a name not in
    ``known`` is an InputError: "unknown <what> (<label>: <the known names>)"."""
    sub = t.sub(key, required=False, sourced=False)
    for name in (sub.data if sub else {}):
        if name not in known:
            raise sub.err(name, f"unknown {what} ({label}: {', '.join(known)})")
        yield name, sub.sub(name)


def _kernel(t: SourcedTable, soc: SocSpec) -> KernelSpec:
    """Read a device's `[kernel]` table (schema: device_profiles/README.md)."""
    n_bounds = len(soc.clusters) - 1
    up = t.nums("sched_upmigrate_pct", 1, 100, "%")
    down = t.nums("sched_downmigrate_pct", 1, 100, "%")
    for key, vals in (("sched_upmigrate_pct", up), ("sched_downmigrate_pct", down)):
        if len(vals) != n_bounds:
            raise t.err(key, f"expected {n_bounds} values (one per boundary between the SoC's "
                             f"{len(soc.clusters)} capacity-ranked clusters), got {len(vals)}")
    for i, (u, d) in enumerate(zip(up, down)):
        if d > u:
            raise t.err(f"sched_downmigrate_pct[{i}]", f"{d} is above sched_upmigrate_pct[{i}] ({u}): no hysteresis")
    g_up = t.num("sched_group_upmigrate_pct", 1, 1000, "%")
    g_down = t.num("sched_group_downmigrate_pct", 1, 1000, "%")
    if g_down > g_up:
        raise t.err("sched_group_downmigrate_pct", f"{g_down} is above sched_group_upmigrate_pct ({g_up})")
    stune = {}
    for name, g in _named_tables(t, "schedtune", ANDROID_GROUPS, "Android group", "known"):
        stune[name] = StuneGroup(boost_pct=g.num("boost_pct", -100, 100, "%") if "boost_pct" in g.data else 0.0,
                                 prefer_idle=g.flag("prefer_idle", False), colocate=g.flag("colocate", False))
        g.done()
    names = {c.name: c for c in soc.clusters}
    ctl = []
    for name, c in _named_tables(t, "core_ctl", names, "cluster", "the SoC's"):
        n = len(names[name].cpus)
        item = CoreCtlCluster(
            cluster=name, min_cpus=c.int("min_cpus", 0, n),
            busy_up_pct=c.num("busy_up_pct", 0, 100, "%"), busy_down_pct=c.num("busy_down_pct", 0, 100, "%"),
            offline_delay_ms=c.num("offline_delay_ms", 0, 60000, "ms"),
            task_thres=c.int("task_thres", n, 1000, required=False),
            nr_prev_assist_thresh=c.int("nr_prev_assist_thresh", 0, 1000, required=False))
        if item.busy_down_pct > item.busy_up_pct:
            raise c.err("busy_down_pct", f"{item.busy_down_pct} is above busy_up_pct ({item.busy_up_pct})")
        c.done()
        ctl.append(item)
    floors = {}
    for name, c in _named_tables(t, "cpufreq", names, "cluster", "the SoC's"):
        opps = names[name].opp_freq_mhz
        floors[name] = c.num("scaling_min_freq_mhz", opps[0], opps[-1], "MHz")
        c.done()
    spec = KernelSpec(
        flavour=t.str("flavour", choices=SCHED_FLAVOURS),
        window_ms=t.num("walt_window_ms", 1, 1000, "ms"),
        hist_size=t.int("walt_hist_size", 1, 8),
        init_task_load_pct=t.num("walt_init_task_load_pct", 0, 100, "%"),
        upmigrate_pct=up, downmigrate_pct=down,
        group_upmigrate_pct=g_up, group_downmigrate_pct=g_down,
        coloc_downmigrate_ms=t.num("sched_coloc_downmigrate_ms", 0, 60000, "ms"),
        schedutil_up_rate_limit_us=t.num("schedutil_up_rate_limit_us", 0, 1e6, "us"),
        schedutil_down_rate_limit_us=t.num("schedutil_down_rate_limit_us", 0, 1e6, "us"),
        schedtune=stune, core_ctl=tuple(sorted(ctl, key=lambda x: names[x.cluster].cpus[0])),
        min_freq_mhz=floors,
    )
    t.done(also=("schedtune", "core_ctl", "cpufreq"))
    return spec


def _thermal_engine(t: SourcedTable, soc: SocSpec, nodes: set[str]) -> ThermalEngineSpec:
    """Read a phone's [thermal_engine] table: sensors are RC nodes or the table's virtual
    sensors, clusters the SoC's; every list of a rule has one entry per level."""
    virtual: dict[str, VirtualSensor] = {}
    vt = t.sub("virtual", required=False, sourced=False)
    for name in (vt.data if vt is not None else {}):
        v = vt.sub(name)
        if name in nodes:
            raise vt.err(name, "a virtual sensor may not take the name of an RC node")
        members = v.raw("nodes")
        if not isinstance(members, list) or not members or not all(m in nodes for m in members):
            raise v.err("nodes", f"expected a list of RC nodes ({', '.join(sorted(nodes))}), got {members!r}")
        weights = v.nums("weights", -10.0, 10.0, "")
        if len(weights) != len(members):
            raise v.err("weights", f"expected {len(members)} weights, one per node")
        virtual[name] = VirtualSensor(tuple(members), weights, v.num("offset_c", -50, 50, "C", required=False) or 0.0)
        v.done()
    sensors = nodes | set(virtual)
    clusters = {c.name: c for c in soc.clusters}
    rules = []
    raw = t.raw("rules")
    if not isinstance(raw, list) or not raw:
        raise t.err("rules", "expected one or more [[thermal_engine.rules]] tables")
    for i, data in enumerate(raw):
        r = SourcedTable(data, t.path, t._f(f"rules[{i}]"))
        sensor = r.str("sensor")
        if sensor not in sensors:
            raise r.err("sensor", f"unknown sensor {sensor!r} (RC nodes and virtual sensors: {', '.join(sorted(sensors))})")
        cluster = r.str("cluster", choices=tuple(clusters))
        sampling_ms = r.num("sampling_ms", 10, 60000, "ms")
        thr = r.nums("thresholds_c", -20, 150, "C", increasing=True)
        clr = r.nums("clear_c", -20, 150, "C", increasing=True)
        caps = r.nums("caps_mhz", 10, 6000, "MHz")
        for key, v in (("clear_c", clr), ("caps_mhz", caps)):
            if len(v) != len(thr):
                raise r.err(key, f"expected {len(thr)} entries, one per threshold")
        for j, (a, b) in enumerate(zip(thr, clr)):
            if b >= a:
                raise r.err(f"clear_c[{j}]", f"{b} C must be below its threshold {a} C (hysteresis)")
        for j in range(1, len(caps)):
            if caps[j] > caps[j - 1]:
                raise r.err(f"caps_mhz[{j}]", f"a hotter level may not allow more ({caps[j - 1]} then {caps[j]} MHz)")
        r.done()
        rules.append(EngineRule(sensor, cluster, sampling_ms, thr, clr, caps))
    shutdown_c = t.num("shutdown_c", 20, 150, "C", required=False)
    shutdown_sensor = t.str("shutdown_sensor") if shutdown_c is not None else None
    if shutdown_c is None and "shutdown_sensor" in t.data:
        raise t.err("shutdown_sensor", "given without shutdown_c")
    if shutdown_sensor is not None and shutdown_sensor not in sensors:
        raise t.err("shutdown_sensor", f"unknown sensor {shutdown_sensor!r} (RC nodes and virtual sensors: "
                                       f"{', '.join(sorted(sensors))})")
    spec = ThermalEngineSpec(tuple(rules), virtual, shutdown_sensor, shutdown_c)
    t.done(also=("shutdown_sensor",))
    return spec


def load_device(path: Path, socs: dict[str, SocSpec], soc_override: str | None = None,
                data: dict | None = None) -> DeviceSpec:
    """Load a device file; ``soc_override`` puts another SoC in the same chassis; ``data``: the
    file's content already read (and perhaps changed: `--set`)."""
    path = Path(path)
    t = SourcedTable(read_toml(path) if data is None else data, path, "")
    soc_name = t.str("soc")   # read (and checked) even when another SoC goes in the chassis
    if soc_override:
        soc_name = soc_override
    if soc_name not in socs:
        raise t.err("soc", f"unknown SoC {soc_name!r} (known: {', '.join(sorted(socs))})")
    soc = socs[soc_name]
    kind = t.str("kind", choices=DEVICE_KINDS)
    has_battery = kind != "board"
    cpusets = {}
    cs = t.sub("cpusets")
    for k, v in cs.data.items():
        if k == "sources" or soc_override:  # a chassis's cpusets do not fit another SoC
            continue
        if k not in ANDROID_GROUPS:
            raise cs.err(k, f"not an Android group{did_you_mean(k, ANDROID_GROUPS)} (known: {', '.join(ANDROID_GROUPS)})")
        ids = cs.ints(k, 0, soc.n_cpus - 1)
        cs.need_source(k)
        cpusets[k] = ids
    cs.done(also=tuple(cs.data))   # each name checked above
    if soc_override:
        cpusets = _generic_cpusets(soc)
    for need in ("top_app", "background"):
        if need not in cpusets:
            raise cs.err(need, "missing required cpuset")
    th = t.sub("thermal", required=False)
    thermal = _thermal(th, soc.thermal) if th else soc.thermal
    rct = t.sub("thermal_rc")
    own = _rc(rct)
    rc = RCNetwork({**soc.rc.capacity_j_per_k, **own.capacity_j_per_k}, soc.rc.edges_k_per_w + own.edges_k_per_w)
    _check_rc(path, rc, [c.name for c in soc.clusters] + ["soc", "board", "skin"] + (["battery"] if has_battery else []))
    if thermal.sensor_node not in rc.capacity_j_per_k:
        raise InputError(path, "thermal.sensor_node", f"unknown node {thermal.sensor_node!r}")
    kt = t.sub("kernel", required=False)
    kernel = _kernel(kt, soc) if kt and not soc_override else None
    et = t.sub("thermal_engine", required=False)
    # a vendor's engine names its phone's clusters: it does not come along into another SoC
    engine = _thermal_engine(et, soc, set(rc.capacity_j_per_k)) if et and not soc_override else None
    name, title = t.str("name"), t.str("title")
    if soc_override:
        name, title = soc.name, f"{soc.title} in a {title}"
    spec = DeviceSpec(
        name=name, title=title, kind=kind, soc=soc,
        battery_capacity_mah=t.num("battery_capacity_mah", 100, 50000, "mAh", required=has_battery),
        battery_voltage_v=t.num("battery_voltage_v", 1, 20, "V", required=has_battery),
        display_refresh_hz=t.num("display_refresh_hz", 1, 240, "Hz"),
        base_power_mw=t.num("base_power_mw", 0, 20000, "mW"),
        screen_power_mw=t.num("screen_power_mw", 0, 20000, "mW"),
        ambient_c=t.num("ambient_c", -20, 60, "C"),
        cpusets=cpusets, thermal=thermal, rc=rc, path=path, kernel=kernel, thermal_engine=engine,
    )
    t.done()
    return spec


# ---------------------------------------------------------------------------------------------
# The catalogue

# Parsed catalogues by root and the stat (inode, times, size) of every profile in it.
_CATALOGUES: dict[tuple, "Catalogue"] = {}


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return (path.name, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


@dataclass
class Catalogue:
    """All profiles under a directory: ``socs/*.toml`` and ``phones/*.toml``."""

    root: Path = PROFILE_DIR
    socs: dict[str, SocSpec] = field(default_factory=dict)
    devices: dict[str, DeviceSpec] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path = PROFILE_DIR) -> "Catalogue":
        """The profiles under ``root``, parsed once per process while no file changes (a device
        is built many times in a sweep; parsing the TOML was most of its cost). The specs are
        frozen; the catalogue's dicts are the caller's own."""
        root = Path(root)
        for sub in ("socs", "phones"):
            if not (root / sub).is_dir():
                raise InputError(root, f"{sub}/", "no such directory (a profile root holds socs/ and phones/)")
        files = {sub: sorted((root / sub).glob("*.toml")) for sub in ("socs", "phones")}
        stamp = (root.resolve(), tuple(_stamp(p) for sub in ("socs", "phones") for p in files[sub]))
        got = _CATALOGUES.get(stamp)
        if got is None:
            got = cls(root)
            for p in files["socs"]:
                s = load_soc(p)
                got._unique(s.name, p)
                got.socs[s.name] = s
            for p in files["phones"]:
                d = load_device(p, got.socs)
                got._unique(d.name, p)
                got.devices[d.name] = d
            if len(_CATALOGUES) >= 8:
                _CATALOGUES.clear()
            _CATALOGUES[stamp] = got
        return cls(root, dict(got.socs), dict(got.devices))

    def _unique(self, name: str, path: Path) -> None:
        if name in self.socs or name in self.devices:
            raise InputError(path, "name", f"{name!r} is already defined by another profile")

    @property
    def names(self) -> list[str]:
        """Every name `device` takes: devices, then SoCs (each in the generic chassis)."""
        return sorted(self.devices) + sorted(self.socs)

    def device(self, name: str, where: str = "config") -> DeviceSpec:
        """A phone or board by name; an SoC name gives that SoC in the generic chassis.
        ``where``: where the name came from (e.g. "--device"), for the error if it is unknown."""
        one_of(name, where, self.names, "profile")
        if name in self.devices:
            return self.devices[name]
        return load_device(self.root / "phones" / "generic-phone.toml", self.socs, soc_override=name)


def _generic_cpusets(soc: SocSpec) -> dict[str, tuple[int, ...]]:
    # Android's usual split: background work on the lowest-capacity cluster, apps anywhere.
    return {"top_app": tuple(range(soc.n_cpus)), "foreground": tuple(range(soc.n_cpus)), "background": soc.little.cpus}


def validate_paths(paths: list[Path], root: Path = PROFILE_DIR) -> list[str]:
    """Validate the given files (SoC or device) against the catalogue; return their names."""
    cat = Catalogue.load(root)
    names = []
    for p in map(Path, paths):
        data = read_toml(p)
        if "clusters" in data:
            names.append(load_soc(p).name)
        else:
            names.append(load_device(p, cat.socs).name)
    return names
