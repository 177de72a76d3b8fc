"""Per-layer cost model: a layer phase on an execution choice becomes parallel regions.

The mechanism, per region (one op call of the runtime, ``repeat`` times in a row for the
per-group loop PyTorch 1.x runs for grouped convolutions):
  1. the calling thread (the master, on the fastest core of the choice) runs the framework's
     dispatch code (``dispatch_instructions / scalar_ipc`` cycles) and any serial data movement
     of the op (the per-group slice gathers and copies);
  2. if the phase is split over threads, the master forks the team (libgomp: team start, a
     futex_wake on the pool's dock barrier) and each member runs its chunk of FLOPs at
     ``peak x efficiency`` (capped by what one core can stream) - equal chunks under a static
     partition, chunks proportional to core speed under a dynamic one; members then arrive at
     the join barrier one by one (an atomic on one shared line, a line transfer each);
  3. **per-sample weights**: PyTorch's slow_conv2d runs one GEMM per sample, so weights larger
     than a core's L2 are streamed again for every sample (twice for the weight gradient,
     which is accumulated) - the deep layers of a small-input ResNet are bandwidth-bound;
  3b. **producer-consumer traffic**: a region that reads a tensor the previous region wrote
     under a different partition (per sample vs per channel vs serial on the master) pulls the
     lines other cores still hold in their private L2s, ``(n-1)/n`` of what fits there, at the
     family's per-line cost (an in-order core exposes the snoop latency, an out-of-order one
     overlaps several); a serial region after a parallel one pulls them all on the master;
  4. **spin, then sleep** (libgomp's do_wait): any thread that waits - a worker between regions,
     the master at the join - polls for ``spin_iterations`` and then sleeps in futex_wait; a
     sleeper costs its waker ``futex_wake_instructions`` and starts only after its core's
     wake-up latency (IPI, idle-state exit, schedule-in); wake-up latencies vary, so a region
     that woke m workers waits for the last of them, ``H_m`` mean latencies on average
     (exponential spread). Spinning is busy (power, utilisation), sleeping is idle.

``layer_regions`` gives the work items; the training job (swansim.dnn.training) runs them
through the scheduler and DVFS, and ``time_region`` times a per-group loop's repeats
(who spins, who sleeps) for it. What a whole batch costs is the simulation's answer alone
(swansim.batchmodel); nothing here predicts it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Sequence

from swansim.dnn.choices import Choice, Plan
from swansim.dnn.graph import Layer, Model
from swansim.dnn.runtime import OpParams, Runtime
from swansim.errors import InputError
from swansim.hw.profile import CACHE_LINE_BYTES as LINE_BYTES, SocSpec

# Autograd of PyTorch's per-group loop, per group: SliceBackward allocates a zero-filled
# gradient of the whole input (one write pass), the engine's InputBuffer adds it to the running
# sum (read two, write one): of ``grouped_bwd_passes`` element passes, this many are the zero fill.
ZERO_FILL_PASSES = 1.0


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
    serial_cycles: tuple[float, ...]   # on the master before the fork, per repeat, per cluster
    team: tuple[Work, ...]             # one per thread; a single member = the master alone
    spans_clusters: bool               # the team mixes core families
    gemm_mnk: float = 0.0              # M*N*K of one BLAS call of this region (0: not a GEMM)
    gemm_calls: int = 1                # BLAS calls the region makes (one per sample: per_sample_ops)

    @cached_property
    def parallel(self) -> bool:
        return len(self.team) > 1

    @cached_property
    def fork_speed(self) -> tuple[float, ...]:
        """The master's serial part before the fork as one work unit: units per cycle per cluster."""
        return tuple(1.0 / max(c, 1e-9) for c in self.serial_cycles)


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

    def fam(self, k: int):
        return self.runtime.family[self.family[k]]

    def mixes_families(self, cpus: Sequence[int]) -> bool:
        """Do threads on ``cpus`` span core families (little + big)? DynamIQ clusters share the
        L3; what costs is lines bouncing between families (``cross_cluster_factor``)."""
        return len({self.family[self.cluster_of_cpu[c]] for c in cpus}) > 1


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


def in_bytes(layer: Layer) -> float:
    """Bytes of a layer's input activations (forward reads: inputs + weights, then writes outputs)."""
    return max(0.0, float(layer.fwd_bytes - layer.out_bytes - 4 * layer.params))


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


# -- producer-consumer ---------------------------------------------------------------------------
# Which splits lay a tensor out the same way across threads: per-sample chunks and per-element
# chunks of an NCHW tensor coincide (sample-major); per-channel chunks cut across them.
_LAYOUT = {"batch": "rows", "elements": "rows", "channels": "channels", "serial": "master"}


def effective_split(rt: Runtime, layer: Layer, phase: str) -> str:
    """The split a phase of a layer really runs with ("serial" when it is too small to split)."""
    op = rt.ops[layer.op]
    if phase == "update":
        split = op.split.get("update", "serial")
        rng = 1 if layer.params <= rt.grain_elements else 2
        return split if rng > 1 else "serial"
    split = op.split.get(phase, "serial")
    if op.regions == "per_group" and rt.grouped_conv == "per_group" and layer.groups > 1:
        # the per-group loop ends on the master: forward with at::cat of the group outputs,
        # backward with the running sum of the groups' input gradients (split by elements)
        return "serial" if phase == "fwd" else ("elements" if phase == "bwd_input" else "serial")
    return split if _range(split, layer, layer.out_bytes / 4.0, rt) > 1 else "serial"


def producer(layers: Sequence[Layer], i: int, phase: str, rt: Runtime) -> tuple[str, float]:
    """(split of the region that wrote what this phase reads, bytes read of it)."""
    layer = layers[i]
    if phase == "fwd":
        if i == 0:
            return "serial", in_bytes(layer)   # the input batch, loaded by the master
        return effective_split(rt, layers[i - 1], "fwd"), in_bytes(layer)
    if phase in ("bwd_input", "bwd_weight"):
        if i == len(layers) - 1:
            return "serial", float(layer.out_bytes)  # the loss gradient
        return effective_split(rt, layers[i + 1], "bwd_input"), float(layer.out_bytes)
    return effective_split(rt, layer, "bwd_weight"), 4.0 * layer.params


def _remote_lines(view: SocView, cpus: Sequence[int], consumer: str, prod: tuple[str, float] | None) -> float:
    """Lines of the consumed tensor that sit in other cores' private caches."""
    n = len(cpus)
    if prod is None or n == 1:
        return 0.0
    split, nbytes = prod
    if _LAYOUT[split] == _LAYOUT[consumer] and consumer != "serial":
        return 0.0
    if consumer == "serial" and split == "serial":
        return 0.0
    l2 = [view.soc.cluster_of(c).l2_kib_per_core * 1024 for c in cpus]
    held = l2[0] if split == "serial" else sum(l2)
    return min(nbytes, held) / LINE_BYTES * (n - 1) / n


# -- regions ------------------------------------------------------------------------------------


def weight_restream(view: SocView, layer: Layer, phase: str, cpus: Sequence[int]) -> tuple[float, float]:
    """(bytes, of which from DRAM) a per-sample GEMM loop re-reads: the weights once more for
    every sample after the first when they do not fit the core's private L2 (the weight gradient
    is read and written); from the L3 when they fit it (mostly), else from DRAM."""
    rt = view.runtime
    if layer.op not in rt.per_sample_ops or layer.batch <= 1 or phase == "update":
        return 0.0, 0.0
    w = 4.0 * layer.params
    if w <= min(view.soc.cluster_of(c).l2_kib_per_core for c in cpus) * 1024:
        return 0.0, 0.0
    extra = (2.0 if phase == "bwd_weight" else 1.0) * w * (layer.batch - 1)
    return extra, extra * (1.0 if w > view.soc.l3_kib * 1024 else rt.resident_dram_fraction)


def make_region(view: SocView, choice: Choice, layer_index: int, phase: str, op_name: str,
                op: OpParams, split: str, rng: int, units: float, nbytes: float,
                repeat: int = 1, serial_units: float = 0.0, pull_lines: float = 0.0,
                master_pull_lines: float = 0.0, restream: tuple[float, float] = (0.0, 0.0)) -> Region:
    """One op call (per repeat: ``units`` of work moving ``nbytes``) on ``choice``.

    ``serial_units``: data movement the master does before the fork (8 bytes a unit, at the
    vector op speed); ``pull_lines``: lines the team pulls from other cores (split by share);
    ``master_pull_lines``: lines the master pulls serially before the fork; ``restream``:
    (bytes, of which DRAM) of weights a per-sample loop reads again (``weight_restream``).
    """
    soc, rt = view.soc, view.runtime
    nk = len(soc.clusters)
    l3_bytes = soc.l3_kib * 1024
    dram = nbytes * (1.0 if nbytes > l3_bytes else rt.resident_dram_fraction)
    nbytes += restream[0]
    dram += restream[1]
    bpu_all = nbytes / units if units else 0.0
    speed = []
    for k in range(nk):
        s = view.peak(op, k)
        if bpu_all > 0:
            s = min(s, view.fam(k).stream_bytes_per_cycle / bpu_all)
        speed.append(s)
    speed = tuple(speed)
    bpu = dram / units if units else 0.0
    ipc = [c.scalar_ipc for c in soc.clusters]
    vec = rt.ops["concat"]
    mover = [min(view.peak(vec, k), view.fam(k).stream_bytes_per_cycle / 8.0) for k in range(nk)]
    serial = tuple(rt.dispatch_instructions / ipc[k] + (serial_units / mover[k] if serial_units else 0.0)
                   + master_pull_lines * view.fam(k).line_transfer_cycles for k in range(nk))
    cpus = choice.thread_cpus(soc)
    spans = view.mixes_families(cpus)
    n = choice.threads
    if split == "serial" or rng <= 1 or n == 1:
        zero = (0.0,) * nk
        pull = tuple(pull_lines * view.fam(k).line_transfer_cycles for k in range(nk))
        return Region(layer_index, phase, op_name, repeat, serial,
                      (Work(units, speed, bpu, pull if n > 1 else zero),), False)
    member_speed = _shared_vector_speeds(view, op, cpus, speed, bpu_all)
    fast = [member_speed[i][view.cluster_of_cpu[c]] * soc.clusters[view.cluster_of_cpu[c]].fmax_mhz
            for i, c in enumerate(cpus)]
    shares = _shares(n, rng, fast, rt.partition)
    lat = rt.cross_cluster_factor if spans else 1.0
    team = []
    for i, share in enumerate(shares):
        if i == 0:   # team start + the two barriers' futex_wake calls, and n arrivals on the barrier line
            instr, lines = rt.fork_base_instructions + rt.fork_per_thread_instructions * (n - 1), n
        else:        # leave the dock, arrive at the join
            instr, lines = rt.fork_per_thread_instructions, 2
        over = tuple(instr / ipc[k] + lines * lat * view.fam(k).line_latency_cycles
                     + pull_lines * share * view.fam(k).line_transfer_cycles for k in range(nk))
        team.append(Work(units * share, member_speed[i], bpu, over))
    return Region(layer_index, phase, op_name, repeat, serial, tuple(team), spans)


def _shared_vector_speeds(view: SocView, op: OpParams, cpus: Sequence[int], speed: tuple[float, ...],
                          bpu: float) -> list[tuple[float, ...]]:
    """Per team member, the op's speed per cluster when cores of one complex share a vector unit
    (Cortex-A510 merged cores, ``ClusterSpec.vector_unit_shared_by``): members computing on the
    cores of one complex split its FLOP rate. Decided from where the choice puts its threads."""
    out = []
    for c in cpus:
        k = view.cluster_of_cpu[c]
        cl = view.soc.clusters[k]
        if cl.vector_unit_shared_by == 1:
            out.append(speed)
            continue
        sharers = len({x for x in cpus if x in cl.complex_of(c)})
        s = list(speed)
        s[k] = view.peak(op, k) / sharers
        if bpu > 0:
            s[k] = min(s[k], view.fam(k).stream_bytes_per_cycle / bpu)
        out.append(tuple(s))
    return out


def gemm_mnk(layer: Layer) -> float:
    """M*N*K of one BLAS call of a layer: per sample and group for a convolution (PyTorch 1.8's
    slow_conv2d: one im2col + GEMM per sample, per group in the group loop), the whole batch for
    a linear layer (one addmm); 0 for ops that call no GEMM."""
    if layer.op == "linear":
        return float(layer.macs)
    if layer.op in ("conv", "pointwise", "depthwise"):
        return layer.macs / layer.batch / max(1, layer.groups)
    return 0.0


def layer_regions(view: SocView, layer: Layer, index: int, phase: str, choice: Choice,
                  prod: tuple[str, float] | None = None) -> list[Region]:
    """The regions of one phase of one layer (empty when the phase has no work).

    ``prod``: (split, bytes) of the region that wrote this phase's input (``producer``); None
    means no producer-consumer traffic is charged.
    """
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
    cpus = choice.thread_cpus(view.soc)
    n = choice.threads
    per_group = op.regions == "per_group" and rt.grouped_conv == "per_group" and layer.groups > 1
    split = op.split[phase]
    if not per_group:
        elements = layer.out_bytes / 4.0
        rng = _range(split, layer, elements, rt)
        consumer = split if (split != "serial" and rng > 1 and n > 1) else "serial"
        pulls = _remote_lines(view, cpus, consumer, prod)
        restream = weight_restream(view, layer, phase, cpus)
        if consumer == "serial":
            r = make_region(view, choice, index, phase, layer.op, op, split, rng, units, nbytes,
                            master_pull_lines=pulls, restream=restream)
        else:
            r = make_region(view, choice, index, phase, layer.op, op, split, rng, units, nbytes,
                            pull_lines=pulls, restream=restream)
        calls = layer.batch if layer.op in rt.per_sample_ops and layer.batch > 1 else 1
        return [replace(r, gemm_mnk=gemm_mnk(layer), gemm_calls=calls)]
    # PyTorch 1.x without MKLDNN: a loop over the groups, each a single-group slow_conv2d call.
    g = layer.groups
    slice_in = in_bytes(layer) / g            # one group's input: the master gathers it (narrow + contiguous)
    slice_out = layer.out_bytes / g           # one group's output: the master copies it into the cat
    remote = (n - 1) / n
    rng = _range(split, layer, layer.out_bytes / 4.0 / g, rt)
    if phase == "fwd":
        return [make_region(view, choice, index, phase, layer.op, op, split, rng, units / g, nbytes / g, g,
                            serial_units=(slice_in + slice_out) / 8.0,
                            pull_lines=slice_in / LINE_BYTES * remote,
                            master_pull_lines=slice_out / LINE_BYTES * remote)]
    if phase == "bwd_weight":
        # serial over the batch on the master, on slices it made itself in bwd_input
        return [make_region(view, choice, index, phase, layer.op, op, split, rng, units / g, nbytes / g, g)]
    # bwd_input: grad_output slice made contiguous by the master, the parallel input-gradient
    # GEMM + col2im, then autograd's slice backward: zero-fill a gradient of the whole input
    # (parallel), copy the group's slice into it (master), add it to the running sum (parallel).
    out = [make_region(view, choice, index, phase, layer.op, op, split, rng, units / g, nbytes / g, g,
                       serial_units=slice_out / 8.0,
                       pull_lines=slice_out / LINE_BYTES * remote,
                       master_pull_lines=slice_out / LINE_BYTES * remote)]
    if rt.grouped_bwd_passes > 0:
        whole = in_bytes(layer) / 4.0
        add = rt.ops["add"]
        s = add.split["bwd_input"]
        r = _range(s, layer, whole, rt)
        zero = min(ZERO_FILL_PASSES, rt.grouped_bwd_passes)
        zbytes, abytes = zero * whole * 4.0, (rt.grouped_bwd_passes - zero) * whole * 4.0
        out.append(make_region(view, choice, index, phase, "add", add, s, r, zbytes / 8.0, zbytes, g))
        if abytes > 0:
            out.append(make_region(view, choice, index, phase, "add", add, s, r, abytes / 8.0, abytes, g,
                                   serial_units=2.0 * slice_in / 8.0,
                                   pull_lines=slice_in / LINE_BYTES * remote,
                                   master_pull_lines=2.0 * slice_in / LINE_BYTES * remote))
    return out


def update_regions(view: SocView, layer: Layer, index: int, choice: Choice,
                   prod: tuple[str, float] | None = None) -> list[Region]:
    """SGD update of one layer's parameters (one call per parameter-holding layer)."""
    if layer.params == 0:
        return []
    rt = view.runtime
    op = rt.ops["optimizer"]
    split = op.split["update"]
    rng = 1 if layer.params <= rt.grain_elements else math.ceil(layer.params / rt.grain_elements)
    if split != "elements":
        rng = _range(split, layer, layer.params, rt)
    consumer = split if (split != "serial" and rng > 1 and choice.threads > 1) else "serial"
    pulls = _remote_lines(view, choice.thread_cpus(view.soc), consumer, prod)
    # read weight and gradient, write weight, zero the gradient: 16 bytes; one FMA: 2 FLOPs
    kw = {"master_pull_lines": pulls} if consumer == "serial" else {"pull_lines": pulls}
    return [make_region(view, choice, index, "update", "optimizer", op, split, rng,
                        2.0 * layer.params, 16.0 * layer.params, **kw)]


def phase_regions(view: SocView, model: Model, i: int, phase: str, choice: Choice) -> list[Region]:
    """The regions of one phase of layer ``i`` of ``model``, with its producer-consumer traffic."""
    prod = producer(model.layers, i, phase, view.runtime)
    if phase == "update":
        return update_regions(view, model.layers[i], i, choice, prod)
    return layer_regions(view, model.layers[i], i, phase, choice, prod)


def batch_regions(view: SocView, model: Model, plan: Plan, mode: str = "train") -> list[Region]:
    """Every region of one mini-batch in execution order."""
    out: list[Region] = []
    layers = model.layers
    for i in range(len(layers)):
        out += phase_regions(view, model, i, "fwd", plan.fwd[i])
    if mode == "infer":
        return out
    for i in range(len(layers) - 1, -1, -1):
        out += phase_regions(view, model, i, "bwd_input", plan.bwd[i])
        out += phase_regions(view, model, i, "bwd_weight", plan.bwd[i])
    for i in range(len(layers)):
        out += phase_regions(view, model, i, "update", plan.update)
    return out


# ---------------------------------------------------------------------------------------------
# Timing of one region: spin, sleep, wake


@dataclass
class RegionTime:
    """What one region does in time (seconds from its start; all repeats)."""

    duration: float
    busy: list[float]        # per team member: running or spinning
    arrive: list[float]      # per team member: when it last arrived at the join (its idle gap starts)
    sleeps: float = 0.0      # threads that fell asleep within the region (each a futex_wait, then a wake-up)


@lru_cache(maxsize=None)
def harmonic(m: int) -> float:
    """H_m = 1 + 1/2 + ... + 1/m: the expected maximum of m exponential variables, in means."""
    return sum(1.0 / j for j in range(1, m + 1))


class _Timing:
    """Per-repeat timing of region ``r`` with member i on cluster ``kc[i]`` at ``f_hz[i]``."""

    def __init__(self, view: SocView, r: Region, kc: Sequence[int], f_hz: Sequence[float], bw_bytes_s: float):
        rt = view.runtime
        self.n = n = len(r.team)
        self.t_ser = r.serial_cycles[kc[0]] / f_hz[0]
        base = [w.cycles(kc[i]) / f_hz[i] for i, w in enumerate(r.team)]
        self.t_mem = sum(w.units * w.bytes_per_unit for w in r.team) / bw_bytes_s
        if self.t_mem > max(base):
            # bandwidth-bound: every thread that moves memory slows by the same factor
            slow = self.t_mem / max(base)
            base = [b * slow if w.bytes_per_unit > 0 else b for b, w in zip(base, r.team)]
        self.base = base
        fam = [view.fam(k) for k in kc]
        ipc = [view.soc.clusters[k].scalar_ipc for k in kc]
        self.spin = [rt.spin_iterations * fam[i].spin_iteration_cycles / f_hz[i] for i in range(n)]
        self.wake = [fam[i].wake_latency_s for i in range(n)]
        self.futex = [rt.futex_wake_instructions / ipc[i] / f_hz[i] for i in range(n)]

    def one(self, gaps: Sequence[float]) -> tuple[float, list[float], list[float], int, bool]:
        """One repeat given each worker's wait before the fork: (duration, busy, arrivals, the
        workers asleep at its fork), and whether the master slept at its join."""
        n, base, spin, wake, futex, t_ser = self.n, self.base, self.spin, self.wake, self.futex, self.t_ser
        if n == 1:
            d = t_ser + base[0]
            return d, [d], [d], 0, False
        asleep = [False] + [gaps[i] > spin[i] for i in range(1, n)]
        m = sum(asleep)
        fork = t_ser + m * futex[0]
        # the join waits for the last of the m woken threads: with wake-up latencies spread
        # exponentially about their mean, the expected last one comes after H_m means
        h = harmonic(m)
        end = [fork + base[0]] + [fork + (wake[i] * h if asleep[i] else 0.0) + base[i] for i in range(1, n)]
        last_i = max(range(1, n), key=lambda i: end[i])
        wait0 = max(0.0, end[last_i] - end[0])
        master_sleeps = wait0 > spin[0]
        done = max(end[0], end[last_i] + ((futex[last_i] + wake[0]) if master_sleeps else 0.0))
        done = max(done, t_ser + self.t_mem)
        busy = [done - ((wait0 - spin[0] + futex[last_i] + wake[0]) if master_sleeps else 0.0)]
        busy += [min(gaps[i], spin[i]) + base[i] for i in range(1, n)]
        return done, busy, end, m, master_sleeps

    def steady(self, d: float, end: Sequence[float]) -> tuple[float, list[float], list[float], int, bool]:
        """A repeat after a repeat that took ``d`` with arrivals ``end``: the steady state."""
        for _ in range(2):   # the per-repeat gap settles at once; a second pass for safety
            gaps = [0.0] + [d - end[i] + self.t_ser for i in range(1, self.n)]
            d, busy, end, m, master_sleeps = self.one(gaps)
        return d, busy, end, m, master_sleeps


def time_region(view: SocView, r: Region, kc: Sequence[int], f_hz: Sequence[float],
                first_gap: Sequence[float], bw_bytes_s: float) -> RegionTime:
    """Timing of region ``r`` with member i on cluster ``kc[i]`` at ``f_hz[i]``.

    ``first_gap[i]``: how long worker i has been waiting when the master reaches the fork of
    the first repeat (including this region's serial part). Repeats after the first see the
    steady gap: the rest of the previous repeat's join plus the master's serial part.
    """
    t = _Timing(view, r, kc, f_hz, bw_bytes_s)
    d1, b1, e1, _, slept1 = t.one(first_gap)   # workers asleep at the first fork slept before the region
    if r.repeat == 1:
        return RegionTime(d1, b1, e1, float(slept1))
    ds, bs, es, m, slept = t.steady(d1, e1)
    n = len(r.team)
    total = d1 + (r.repeat - 1) * ds
    busy = [b1[i] + (r.repeat - 1) * bs[i] for i in range(n)]
    arrive = [total - ds + es[i] for i in range(n)]
    return RegionTime(total, busy, arrive, slept1 + (r.repeat - 1) * (m + slept))
