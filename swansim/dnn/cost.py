"""Per-layer cost model: a layer phase on an execution choice becomes parallel regions.

The mechanism, per region (one op call of the runtime):
  1. the calling thread (the master, on the fastest core of the choice) runs the framework's
     dispatch code: ``dispatch_instructions / scalar_ipc`` cycles;
  2. if the phase is split over threads, the whole team forks: every member pays the fork/join
     cost (more with more threads, scaled per core family, more when the team spans clusters)
     and the cache-line transfers its share of a cache-resident tensor costs when it lives in
     another core's cache; then each member runs its chunk of FLOPs at
     ``peak x efficiency`` (capped by what one core can stream) - equal chunks under a static
     partition, chunks proportional to core speed under a dynamic one;
  3. members that finish early spin at the barrier; the region ends with the last one.
  Between regions idle workers spin for the runtime's spin budget, then sleep; a sleeping
  worker starts its next chunk only after its core's wake-up latency.

``layer_regions`` gives the work items (the simulation runs them through the fluid scheduler
and DVFS); ``estimate`` runs the same formulas at fixed frequencies without interference: fast
predictions for policies and for the calibration fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from swansim.dnn.choices import Choice
from swansim.dnn.graph import Layer, Model
from swansim.dnn.runtime import OpParams, Runtime
from swansim.errors import InputError
from swansim.hw.power import IDLE_LEAK_FRACTION, dynamic_power_w, leakage_w
from swansim.hw.profile import SocSpec

TRAIN_PHASES = ("fwd", "bwd_input", "bwd_weight")
LINE_BYTES = 64


@dataclass(frozen=True)
class Work:
    """One thread's share of a region, per repeat, in the units of its op.

    ``units`` run at ``speed[k]`` units per cycle on cluster k; ``overhead_cycles[k]`` (fork/
    join, cache-line transfers) come on top. DRAM traffic is ``bytes_per_unit`` per unit.
    """

    units: float
    speed: tuple[float, ...]
    bytes_per_unit: float
    overhead_cycles: tuple[float, ...]

    def cycles(self, k: int) -> float:
        return self.overhead_cycles[k] + (self.units / self.speed[k] if self.units else 0.0)


@dataclass(frozen=True)
class Region:
    """An op call, ``repeat`` times in a row (a per-group loop), on a team of threads."""

    layer: int
    phase: str
    op: str
    repeat: int
    serial_cycles: tuple[float, ...]   # on the master before the fork, per cluster
    team: tuple[Work, ...]             # one per thread; a single member = the master alone
    spans_clusters: bool               # the team mixes core families

    @property
    def parallel(self) -> bool:
        return len(self.team) > 1


@dataclass(frozen=True)
class SocView:
    """What the cost model reads of an SoC, per cluster index, for one runtime."""

    soc: SocSpec
    runtime: Runtime
    family: tuple[str, ...]
    cluster_of_cpu: tuple[int, ...]

    @classmethod
    def of(cls, soc: SocSpec, runtime: Runtime) -> "SocView":
        cl = [0] * soc.n_cpus
        for k, c in enumerate(soc.clusters):
            for cpu in c.cpus:
                cl[cpu] = k
        return cls(soc, runtime, tuple(runtime.family_of(c.uarch) for c in soc.clusters), tuple(cl))

    def peak(self, op: OpParams, k: int) -> float:
        c = self.soc.clusters[k]
        return (c.gemm_flop_per_cycle if op.peak == "gemm" else c.vector_flop_per_cycle) * op.efficiency[self.family[k]]


def phase_amounts(layer: Layer, phase: str, first: bool) -> tuple[float, float]:
    """(FLOPs, bytes) of one phase of a layer; backward bytes split in proportion to FLOPs."""
    if phase == "fwd":
        return float(layer.fwd_flops), float(layer.fwd_bytes)
    bi, bw = (0 if first else layer.bwd_input_flops), layer.bwd_weight_flops
    if phase == "bwd_input":
        if first:
            return 0.0, 0.0
        share = bi / (bi + bw) if bi + bw else 1.0
        return float(bi), layer.bwd_bytes * share
    if phase == "bwd_weight":
        if bw == 0:
            return 0.0, 0.0
        share = bw / (bi + bw) if (bi + bw) and not first else 1.0
        return float(bw), layer.bwd_bytes * share
    raise ValueError(phase)


def _range(split: str, layer: Layer, elements: float, runtime: Runtime) -> int:
    """How many pieces the runtime can split a region into."""
    if split == "batch":
        return layer.batch
    if split == "channels":
        return max(1, layer.out_channels)
    if split == "elements":
        return 1 if elements <= runtime.grain_elements else math.ceil(elements / runtime.grain_elements)
    return 1


def _shares(n_threads: int, rng: int, speeds: Sequence[float], partition: str) -> list[float]:
    """Fraction of the region each thread computes (OpenMP static: equal chunks, some empty)."""
    if partition == "dynamic":
        n = min(n_threads, rng)
        total = sum(speeds[:n])
        return [s / total for s in speeds[:n]] + [0.0] * (n_threads - n)
    workers = min(n_threads, rng)
    chunk = math.ceil(rng / workers)
    out = []
    for i in range(n_threads):
        lo = i * chunk
        out.append(max(0, min(rng, lo + chunk) - lo) / rng if i < workers else 0.0)
    return out


def make_region(view: SocView, choice: Choice, layer_index: int, phase: str, op_name: str,
                op: OpParams, split: str, rng: int, units: float, nbytes: float,
                repeat: int = 1) -> Region:
    """One op call (per repeat: ``units`` of work moving ``nbytes``) on ``choice``."""
    soc, rt = view.soc, view.runtime
    nk = len(soc.clusters)
    l3_bytes = soc.l3_kib * 1024
    dram = nbytes * (1.0 if nbytes > l3_bytes else rt.resident_dram_fraction)
    bpu_all = nbytes / units if units else 0.0
    speed = []
    for k in range(nk):
        s = view.peak(op, k)
        if bpu_all > 0:
            s = min(s, rt.family[view.family[k]].stream_bytes_per_cycle / bpu_all)
        speed.append(s)
    speed = tuple(speed)
    bpu = dram / units if units else 0.0
    ipc = [c.scalar_ipc for c in soc.clusters]
    serial = tuple(rt.dispatch_instructions / ipc[k] for k in range(nk))
    cpus = choice.thread_cpus(soc)
    # DynamIQ clusters share the L3; what costs is a team mixing core families (little + big)
    spans = len({view.family[view.cluster_of_cpu[c]] for c in cpus}) > 1
    n = choice.threads
    if split == "serial" or rng <= 1 or n == 1:
        zero = (0.0,) * nk
        return Region(layer_index, phase, op_name, repeat, serial,
                      (Work(units, speed, bpu, zero),), False)
    fast = [speed[view.cluster_of_cpu[c]] * soc.clusters[view.cluster_of_cpu[c]].fmax_mhz for c in cpus]
    shares = _shares(n, rng, fast, rt.partition)
    fork_instr = (rt.fork_base_instructions + rt.fork_per_thread_instructions * (n - 1)) \
        * (rt.cross_cluster_factor if spans else 1.0)
    # Lines a member pulls from other cores: its share of what is cache resident, (n-1)/n remote.
    resident_lines = min(nbytes, l3_bytes) / LINE_BYTES * (n - 1) / n
    team = []
    for share in shares:
        over = tuple(fork_instr * rt.family[view.family[k]].sync_scale / ipc[k]
                     + resident_lines * share * rt.family[view.family[k]].line_transfer_cycles
                     for k in range(nk))
        team.append(Work(units * share, speed, bpu, over))
    return Region(layer_index, phase, op_name, repeat, serial, tuple(team), spans)


def layer_regions(view: SocView, layer: Layer, index: int, phase: str, choice: Choice) -> list[Region]:
    """The regions of one phase of one layer (empty when the phase has no work)."""
    rt = view.runtime
    op = rt.ops[layer.op]
    flops, nbytes = phase_amounts(layer, phase, first=index == 0)
    if phase != "fwd" and flops == 0 and (index == 0 or phase == "bwd_weight"):
        return []
    if phase not in op.split:
        raise InputError(rt.path, f"ops.{layer.op}.split.{phase}",
                         f"runtime {rt.name!r} does not define the {phase} phase (training on an inference-only runtime?)")
    units = flops if flops > 0 else nbytes / 8.0  # data movement: one unit per element read + written
    if units <= 0:
        return []
    per_group = op.regions == "per_group" and rt.grouped_conv == "per_group" and layer.groups > 1
    repeat = layer.groups if per_group else 1
    elements = layer.out_bytes / 4.0 / repeat
    split = op.split[phase]
    out = [make_region(view, choice, index, phase, layer.op, op, split,
                       _range(split, layer, elements, rt), units / repeat, nbytes / repeat, repeat)]
    if per_group and phase == "bwd_input" and rt.grouped_bwd_passes > 0:
        # Autograd of the per-group loop: each group's slice gradient is scattered into a
        # zero-filled gradient of the whole input, and the groups' gradients are summed.
        h, w = layer.out_hw
        whole = layer.batch * layer.in_channels * h * w * layer.stride * layer.stride
        add = rt.ops["add"]
        gbytes = rt.grouped_bwd_passes * whole * 4.0
        out.append(make_region(view, choice, index, phase, "add", add, add.split["bwd_input"],
                               _range(add.split["bwd_input"], layer, whole, rt), gbytes / 8.0,
                               gbytes, repeat))
    return out


def update_regions(view: SocView, layer: Layer, index: int, choice: Choice) -> list[Region]:
    """SGD update of one layer's parameters (one call per parameter-holding layer)."""
    if layer.params == 0:
        return []
    op = view.runtime.ops["optimizer"]
    split = op.split["update"]
    rng = 1 if layer.params <= view.runtime.grain_elements else math.ceil(layer.params / view.runtime.grain_elements)
    if split != "elements":
        rng = _range(split, layer, layer.params, view.runtime)
    # read weight and gradient, write weight, zero the gradient: 16 bytes; one FMA: 2 FLOPs
    return [make_region(view, choice, index, "update", "optimizer", op, split, rng,
                        2.0 * layer.params, 16.0 * layer.params)]


# ---------------------------------------------------------------------------------------------
# Plans: which choice each layer uses


@dataclass(frozen=True)
class Plan:
    """An execution choice per layer for forward and for backward (and the optimizer step)."""

    fwd: tuple[Choice, ...]
    bwd: tuple[Choice, ...]
    update: Choice

    @classmethod
    def uniform(cls, choice: Choice, n_layers: int) -> "Plan":
        return cls((choice,) * n_layers, (choice,) * n_layers, choice)

    @property
    def label(self) -> str:
        labels = {c.label for c in (*self.fwd, *self.bwd, self.update)}
        return labels.pop() if len(labels) == 1 else "per-layer"


def batch_regions(view: SocView, model: Model, plan: Plan, mode: str = "train") -> list[Region]:
    """Every region of one mini-batch in execution order."""
    out: list[Region] = []
    layers = model.layers
    for i, layer in enumerate(layers):
        out += layer_regions(view, layer, i, "fwd", plan.fwd[i])
    if mode == "infer":
        return out
    for i in range(len(layers) - 1, -1, -1):
        out += layer_regions(view, layers[i], i, "bwd_input", plan.bwd[i])
        out += layer_regions(view, layers[i], i, "bwd_weight", plan.bwd[i])
    for i, layer in enumerate(layers):
        out += update_regions(view, layer, i, plan.update)
    return out


# ---------------------------------------------------------------------------------------------
# Analytical estimate: the same regions at fixed frequencies, no interference.


@dataclass
class Estimate:
    latency_s: float
    energy_j: float                      # above the idle floor (background subtracted)
    busy_s: list[float]                  # per cpu: running or spinning
    region_s: list[float] = field(default_factory=list)

    @property
    def power_w(self) -> float:
        return self.energy_j / self.latency_s if self.latency_s else 0.0


class PoolClock:
    """When each pool thread last finished work, to decide who spun and who slept."""

    def __init__(self, n: int):
        self.free_at = [0.0] * n


def estimate(view: SocView, model: Model, plan: Plan, mode: str = "train",
             freq_mhz: Sequence[float] | None = None, temp_c: float = 25.0,
             keep_regions: bool = False) -> Estimate:
    """Latency and net energy of one mini-batch at fixed frequencies (default: top OPPs)."""
    soc, rt = view.soc, view.runtime
    f_hz = [f * 1e6 for f in (freq_mhz or [c.fmax_mhz for c in soc.clusters])]
    busy_w, clus_w = _power_tables(soc, f_hz, temp_c)
    bw = soc.dram_bandwidth_gbps * 1e9
    now = 0.0
    energy = 0.0
    busy = [0.0] * soc.n_cpus
    free_at: dict[int, float] = {}
    times = []
    dram_bytes = 0.0
    for r in batch_regions(view, model, plan, mode):
        choice = _choice_of(plan, r)
        cpus = choice.thread_cpus(soc)
        kc = [view.cluster_of_cpu[c] for c in cpus]
        master = cpus[0]
        t_serial = r.serial_cycles[kc[0]] / f_hz[kc[0]]
        base = [w.cycles(kc[i]) / f_hz[kc[i]] for i, w in enumerate(r.team)]
        wake = [0.0] * len(r.team)
        spin_cap = [rt.spin_budget_cycles / f_hz[kc[i]] for i in range(len(r.team))]
        region_dram = sum(w.units * w.bytes_per_unit for w in r.team)
        t_mem = region_dram / bw
        if t_mem > max(base):
            # bandwidth-bound: every thread that moves memory slows by the same factor
            slow = t_mem / max(base)
            base = [b * slow if w.bytes_per_unit > 0 else b for b, w in zip(base, r.team)]
        t_par = max(max(base), t_mem)
        if r.parallel:
            # a worker whose gap (barrier wait + next dispatch) exceeds its spin budget sleeps
            # before every repeat; the first repeat depends on how long it has been idle
            for i in range(1, len(r.team)):
                per_rep_gap = t_par - base[i] + t_serial
                first_gap = now + t_serial - free_at.get(cpus[i], now)
                every = r.repeat > 1 and per_rep_gap > spin_cap[i]
                wakes = (r.repeat - 1 if every else 0) + (1 if first_gap > spin_cap[i] else 0)
                wake[i] = wakes * rt.family[view.family[kc[i]]].wake_latency_s / r.repeat
            t_par = max(max(b + w for b, w in zip(base, wake)), t_mem)
        dur = r.repeat * (t_serial + t_par)
        # energy: master busy throughout; members busy except while asleep/waking
        e = 0.0
        busy[master] += dur
        e += busy_w[master] * dur
        touched = {kc[0]}
        for i in range(1, len(r.team)):
            cpu = cpus[i]
            gap = now + t_serial - free_at.get(cpu, now)
            pre_spin = min(max(gap, 0.0), spin_cap[i])
            asleep_per_rep = wake[i] > 0 and r.repeat > 1 and (t_par - base[i] + t_serial) > spin_cap[i]
            if asleep_per_rep:
                b = r.repeat * (base[i] + spin_cap[i])
            else:
                b = r.repeat * (t_par - wake[i]) + (r.repeat - 1) * t_serial
            b = max(0.0, min(b, dur)) + pre_spin
            busy[cpu] += b
            e += busy_w[cpu] * b
            free_at[cpu] = now + dur
            touched.add(kc[i])
        for k in touched:
            e += clus_w[k] * dur
        e += soc.soc_active_mw / 1000.0 * dur
        dram_bytes += r.repeat * region_dram
        energy += e
        now += dur
        if keep_regions:
            times.append(dur)
    energy += dram_bytes * soc.dram_energy_pj_per_byte * 1e-12
    return Estimate(now, energy, busy, times)


def _choice_of(plan: Plan, r: Region) -> Choice:
    if r.phase == "fwd":
        return plan.fwd[r.layer]
    if r.phase == "update":
        return plan.update
    return plan.bwd[r.layer]


def _power_tables(soc: SocSpec, f_hz: Sequence[float], temp_c: float):
    """Net busy power per cpu (above idle) and cluster-active power, at fixed frequencies."""
    per_cpu = [0.0] * soc.n_cpus
    clus = []
    for k, c in enumerate(soc.clusters):
        f = f_hz[k] / 1e6
        p = dynamic_power_w(c, f) + leakage_w(c, f, temp_c, soc.leakage_ref_c, soc.leakage_doubling_c) * (1 - IDLE_LEAK_FRACTION)
        for cpu in c.cpus:
            per_cpu[cpu] = p
        v_ratio = c.voltage_v(f) / (c.opp_voltage_mv[-1] / 1000.0)
        clus.append(c.cluster_active_mw / 1000.0 * v_ratio * v_ratio * f / c.fmax_mhz)
    return per_cpu, clus


def estimate_choice(soc: SocSpec, runtime: Runtime, model: Model, choice: Choice,
                    mode: str = "train", **kw) -> Estimate:
    """Shortcut: one choice for every layer."""
    view = SocView.of(soc, runtime)
    return estimate(view, model, Plan.uniform(choice, len(model.layers)), mode, **kw)


PlanFn = Callable[[int], "Plan | Choice"]
