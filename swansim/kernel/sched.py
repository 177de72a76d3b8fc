"""The CPU scheduler as a piecewise-linear process: CFS turns on shared cores.

A core with more than one runnable thread runs one of them at a time, for a turn: CFS's period
shared by weight (`SCHED_LATENCY_S`, at least `SCHED_MIN_GRANULARITY_S` a thread), in order of
virtual runtime, a woken sleeper preempting (`Scheduler._slice`). Over a period each thread gets
its weight's share, as in processor sharing; within one, a thread behind a spinner waits, which
is what a barrier over shared cores pays. Between changes the thread holding a core progresses
at a constant rate
    rate = f_core * speed[cluster]
(the queued ones at 0), scaled down, for threads that move memory, so that the total DRAM
traffic fits the SoC's bandwidth. Threads with latency-exposed DRAM misses (``misses_per_unit``) also pay memory
queueing: with the memory controller's load rho = traffic / bandwidth, a miss costs
    L(rho) = L0 / (1 - rho), rho capped at RHO_CAP (L <= L0 / (1 - RHO_CAP)),
of which L0 is already in the thread's unloaded speed, so its time per unit becomes
    1 / rate = 1 / rate_cpu + misses_per_unit * L0 * rho / (1 - rho).
rho depends on the rates (the slowed threads move less data): it is the fixed point, found by
bisection (the traffic falls as rho rises, so there is one), and stays constant between changes.
Threads that keep a working set in the shared L3 (``L3Use``) lose part of it to the other
threads' DRAM fills. In an LRU cache a line survives if it is touched again before the cache
has filled once more (Che's characteristic-time approximation): with the other threads
filling F bytes/s into an L3 of S bytes that time is S / F. A thread touching its W-byte
working set at A bytes/s comes back to a line every tau = W / A on average; with reuse
intervals spread exponentially, a share exp(-S / (F tau)) = exp(-S A / (F W)) of its L3 hits
become DRAM misses, each costing L(rho) minus the L3 hit latency more. A thread that uses its
working set fast keeps it; a slow one next to a streaming one loses it. (One pass after the
memory queue, with A at the thread's rate before this penalty; the refills are not added to
the traffic.)
Work may also come interleaved with sleep (``idle_s_per_unit``: a loop of short calls, each
followed by a wait shorter than anything the kernel samples): its time per unit is
    1 / rate = 1 / rate_cpu + idle_s_per_unit,
and its core is busy only the share ``duty = 1 - idle_s_per_unit x rate`` of the time (what
PELT and the power model see, averaged; a core shared with other threads is busy while any
of them runs, taken as independent: 1 - prod(1 - duty)). Its CFS share is computed as if it
ran all the time (an assumption: a co-runner does not get the gaps back).

A change is a thread starting or finishing work, an affinity or frequency change, a turn's end.
At a change the scheduler (1) advances work and the platform's energy/thermal integrals to
now, (2) re-places threads on cores, (3) recomputes rates and (4) arms one timer for the next
completion. Changes at the same instant are coalesced into one replan that runs when the
instant is over (`Environment.at_instant_end`, no zero-delay event), so an event is only ever
a change, never a tick. Work may end in a callback instead of an event (``run(on_done=...)``):
the callback runs inside the replan, so a thread that finishes and at once starts its next
piece (or spins at a barrier) costs one replan, not two.

Weights follow CFS (nice 0 = 1024, each nice step ~1.25x). Placement is pluggable
(`PLACEMENTS`): `wakeup` (`WakeupPlacement`: running threads stay; waking threads take idle
cores, biggest first; idle cores pull threads that would run faster), `eas` (the same with
EAS's capacity fit), `walt` and `walt-nocorectl` (`WaltPlacement`: the vendor kernels' windowed
demand, up/downmigrate margins, schedtune boost and core_ctl, from the phone profile's
`[kernel]` table), `throughput` (greedy re-placement). A device asks for "auto": `walt` where
its profile has a `[kernel]` table, else `wakeup`. Pinned threads stay where they are pinned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import simpy

from swansim.hw.platform import Platform
from swansim.hw.profile import CACHE_LINE_BYTES
from swansim.kernel.engine import Environment
from swansim.kernel.walt import CoreCtl, WaltDemand, WindowStats

# Linux kernel/sched/core.c sched_prio_to_weight, nice -20..19.
NICE_TO_WEIGHT = (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
    110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)
# Memory queueing: the loaded-latency curve L0/(1-rho) is capped at rho = RHO_CAP, i.e. a miss
# costs at most 4x its idle latency. assumption: loaded-latency sweeps (Intel MLC-style) of
# LPDDR4/DDR4 systems reach ~3-4x the idle latency at saturation, not infinity (the controller's
# queues are finite; requests beyond them back up into the cores, which the bandwidth cap models).
RHO_CAP = 0.75
_RHO_TOL = 1e-9
# PELT's utilisation half-life (kernel/sched/pelt.c: y^32 = 0.5 with 1 ms periods).
PELT_HALF_LIFE_S = 0.032
# CFS's period, minimum slice and wakeup granularity (kernel/sched/fair.c: 6 ms, 0.75 ms and
# 1 ms, scaled by sched_tunable_scaling's default "log" factor 1 + ilog2(min(online cpus, 8)) = 4
# on the eight-core SoCs this simulator models; no vendor init script of the modelled phones
# writes them). Threads sharing a core run in turns of the period shared by weight, not as a
# fluid: a team member behind a spinning thread waits for its turn (`Scheduler._slice`).
SCHED_LATENCY_S = 0.024
SCHED_MIN_GRANULARITY_S = 0.003
SCHED_WAKEUP_GRANULARITY_S = 0.004
# A thread is done when less than this much of its time at its current rate is left.
_DONE_EPS_S = 1e-12


def nice_to_weight(nice: int) -> int:
    if not -20 <= nice <= 19:
        raise ValueError(f"nice must be in -20..19, got {nice}")
    return NICE_TO_WEIGHT[nice + 20]


@dataclass(frozen=True)
class L3Use:
    """A thread's stake in the shared L3: what it loses when other threads stream through it.

    ``accesses_per_unit``: L3 accesses (private-L2 misses) per work unit; ``exposed_share``:
    the share of them whose latency the thread waits for (not overlapped); ``l3_bytes``: the
    L3's size; ``working_set_bytes``: the thread's data and code that live in the L3;
    ``hit_latency_s``: what an access costs when it hits.
    """

    accesses_per_unit: float
    exposed_share: float
    l3_bytes: float
    working_set_bytes: float
    hit_latency_s: float

    def lost_share(self, own_bps: float, others_fill_bps: float) -> float:
        """Share of the thread's L3 accesses that miss: it reads its working set at
        ``own_bps`` while the other threads fill ``others_fill_bps`` into the L3."""
        if others_fill_bps <= 0.0:
            return 0.0
        if own_bps <= 0.0:
            return 1.0
        return math.exp(-self.l3_bytes * own_bps / (others_fill_bps * self.working_set_bytes))


class Thread:
    """A schedulable thread: affinity, weight, and at most one piece of work at a time."""

    __slots__ = ("tid", "name", "group", "weight", "affinity", "cpu", "remaining", "speed",
                 "bytes_per_unit", "misses_per_unit", "done", "rate", "cpu_time_s", "spinning", "l3",
                 "idle_s_per_unit", "duty", "cgroup", "colocated", "lag_s", "vrt_s", "on_cpu", "left_s", "queued")
    # ``done``: the SimPy event to succeed, or a callable to call, when the work is done
    # ``cgroup``: its Android group (schedtune attributes, kernel.sched.WaltPlacement; "" = root);
    # ``colocated``: attached to its group's related thread group (an app ActivityManager moved)

    def __init__(self, tid: int, name: str, group: str, weight: float, affinity: tuple[int, ...],
                 cgroup: str = "", colocated: bool = False):
        self.tid, self.name, self.group, self.weight, self.affinity = tid, name, group, weight, affinity
        self.cgroup, self.colocated = cgroup, colocated
        self.cpu: int | None = None          # core it runs on while runnable
        self.remaining = 0.0                 # work units left; 0 when sleeping
        self.speed: Sequence[float] = ()     # work units per cycle, per cluster index
        self.bytes_per_unit = 0.0            # DRAM bytes moved per work unit
        self.misses_per_unit = 0.0           # latency-exposed DRAM misses per work unit
        self.idle_s_per_unit = 0.0           # sleep interleaved with the work, per unit
        self.duty = 1.0                      # share of its time it keeps its core busy
        self.done: simpy.Event | Callable[[], None] | None = None
        self.rate = 0.0                      # units/s at present
        self.cpu_time_s = 0.0                # time runnable on a core (incl. shared time)
        self.spinning = False                # busy-waiting: occupies its core, no progress
        self.l3: L3Use | None = None         # its working set in the shared L3, if any
        # CFS turns (`Scheduler._slice`): virtual runtime on its core, its lag behind the core's
        # min_vruntime when it left the queue, the core whose queue it is (or was last) in,
        # when it left (-inf: never queued), whether it is queued now
        self.vrt_s = 0.0
        self.lag_s = 0.0
        self.on_cpu: int | None = None
        self.left_s = -math.inf
        self.queued = False

    @property
    def runnable(self) -> bool:
        return self.done is not None or self.spinning

    def __repr__(self) -> str:
        return f"Thread({self.name}, cpu={self.cpu}, remaining={self.remaining:.3g})"


Placement = Callable[["Scheduler", list[Thread]], None]


def place_for_throughput(sched: "Scheduler", threads: list[Thread]) -> None:
    """Pinned threads stay put; the others go, heaviest first, where they get most throughput."""
    load = [0.0] * sched.platform.n_cpus
    free = []
    for t in threads:
        if len(t.affinity) == 1:
            t.cpu = t.affinity[0]
            load[t.cpu] += t.weight
        else:
            free.append(t)
    free.sort(key=lambda t: (-t.weight, t.tid))
    cap = sched.core_capacity_now()
    for t in free:
        best, best_score = None, -1.0
        for c in t.affinity:
            score = cap[c] * t.weight / (load[c] + t.weight)
            # prefer staying put on ties: migration is not free in reality
            if score > best_score + 1e-12 or (abs(score - best_score) <= 1e-12 and c == t.cpu):
                best, best_score = c, score
        t.cpu = best
        load[best] += t.weight


class WakeupPlacement:
    """Linux-like placement of unpinned threads: running threads stay, waking ones take idle cores.

    The alternative `place_for_throughput` re-places every thread at every change,
    heaviest first, by capacity at the *current* frequency. That lets a waking UI thread
    evict a running training thread from a big core (so background training can never take
    a big core from the app), and it traps an app on a little cluster that another thread
    keeps at a high clock. Linux does neither (kernel/sched/fair.c):

    - a thread that is running stays on its core (no preemptive global re-placement);
    - a waking thread goes to an idle allowed core, largest original capacity first
      (EAS ``find_best_target`` with ``prefer_idle`` for top-app on Android 4.9-4.19 kernels,
      ``select_idle_sibling`` in one LLC domain as on DynamIQ SoCs); if none is idle, to the
      core where its weight gets most (it shares by CFS weight);
    - an idle core pulls a thread that would run faster there (idle balance; misfit
      migration of a thread stuck on a smaller core).

    Capacity is the kernel's capacity_orig (`ClusterSpec.capacity`), not the current clock.
    """

    def __init__(self):
        self._running: set[int] = set()          # tids runnable in the previous plan
        self._prev_load: list[float] | None = None  # weight per core in the previous plan
        self._order: list[int] | None = None     # cores by capacity, biggest first (fixed)

    # Whether a thread's fit for a core is fixed (capacities are): then a plan with the same
    # runnable threads as the last one, all on allowed cores, is already placed.
    fixed_fit = True

    def __call__(self, sched, threads: list) -> None:
        if (self.fixed_fit and len(threads) == len(self._running)
                and all(t.tid in self._running and t.cpu in t.affinity for t in threads)):
            return   # nothing woke, nothing left: the last plan's placement is its own fixed point
        cap = sched.capacity
        n = len(cap)
        load, count = [0.0] * n, [0] * n
        waking = []
        for t in threads:
            if len(t.affinity) == 1:
                t.cpu = t.affinity[0]
            elif t.tid in self._running and t.cpu in t.affinity:
                pass
            else:
                waking.append(t)
                continue
            load[t.cpu] += t.weight
            count[t.cpu] += 1
        # A core vacated at this change keeps its load for this decision: a thread that ends a
        # piece of work and starts the next at the same instant never left its core in Linux.
        seen_load, seen_count = list(load), list(count)
        if self._prev_load is not None:
            for c in range(n):
                if count[c] == 0 and self._prev_load[c] > 0.0:
                    seen_load[c], seen_count[c] = self._prev_load[c], 1
        waking.sort(key=lambda t: (-t.weight, t.tid))
        if self._order is None:
            self._order = sorted(range(n), key=lambda c: (-cap[c], c))
        for t in waking:
            cands = self._candidates(t, cap)
            best = self._biggest_idle(t, cands, cap, seen_count)
            if best is None:
                best = max(cands, key=lambda c: (cap[c] * t.weight / (seen_load[c] + t.weight), c == t.cpu, -c))
            t.cpu = best
            for arr_load, arr_count in ((load, count), (seen_load, seen_count)):
                arr_load[best] += t.weight
                arr_count[best] += 1
        self._idle_balance(threads, cap, load, count, seen_count)
        self._running = {t.tid for t in threads}
        self._prev_load = load

    def _biggest_idle(self, t: Thread, cands: Sequence[int], cap: list[float], seen_count: list[int]) -> int | None:
        """The idle candidate of largest capacity (its own core on a tie, then the lowest id)."""
        best = None
        for c in self._order:                      # capacity descending, ids ascending
            if best is not None and cap[c] < cap[best]:
                break
            if seen_count[c] == 0 and c in cands:
                if best is None:
                    best = c
                if c == t.cpu:
                    return c
        return best

    def _candidates(self, t: Thread, cap: list[float]) -> Sequence[int]:
        """The cores a waking thread considers: all it may use."""
        return t.affinity

    def _fits(self, t: Thread, c: int, cap: list[float]) -> bool:
        return True

    def _idle_balance(self, threads, cap, load, count, seen_count) -> None:
        movable = [t for t in threads if len(t.affinity) > 1]
        if not movable:
            return
        if self._order is None:
            self._order = sorted(range(len(cap)), key=lambda c: (-cap[c], c))
        order = self._order
        while True:
            # No idle core is bigger than what every movable thread gets now: nothing moves.
            top_idle = next((cap[c] for c in order if seen_count[c] == 0), None)
            if top_idle is None or all(top_idle <= _GAIN * cap[t.cpu] * t.weight / load[t.cpu] for t in movable):
                return
            best = None
            for c in (c for c in order if seen_count[c] == 0):
                for t in movable:
                    if c not in t.affinity or not self._fits(t, c, cap):
                        continue
                    now_rate = cap[t.cpu] * t.weight / load[t.cpu]
                    gain = cap[c] / now_rate
                    if gain > _GAIN and (best is None or (gain, t.weight, -t.tid) > best[0]):
                        best = ((gain, t.weight, -t.tid), t, c)
                if best is not None:
                    break
            if best is None:
                return
            _, t, c = best
            load[t.cpu] -= t.weight
            count[t.cpu] -= 1
            seen_count[t.cpu] -= 1
            t.cpu = c
            load[c] += t.weight
            count[c] += 1
            seen_count[c] += 1


class CapacityAwarePlacement(WakeupPlacement):
    """`WakeupPlacement` that also asks, like EAS, whether a thread *fits* a core.

    Every thread carries a PELT-like utilisation: its share of running time, scaled by the
    capacity of the core and clock it ran on relative to the biggest core at its top clock
    (frequency and capacity invariant, as Linux's util_avg), averaged with a 32 ms half-life.
    A waking thread only considers the allowed cores it fits - ``capacity > 1.25 x util``
    (kernel/sched/fair.c ``fits_capacity``: ``cap * 1280 < max * 1024``) - or, if it fits none,
    the biggest allowed ones; among those, an idle core biggest first, else the one where its
    weight gets most. An idle core only pulls a thread that fits it. So a busy training worker
    that sleeps for a moment wakes back onto a big core and shares it with the app, rather
    than straggling on an idle little core.
    """

    fixed_fit = False   # utilisation moves: a thread may come to fit a core it did not

    def __init__(self, half_life_s: float = PELT_HALF_LIFE_S):
        super().__init__()
        self.half_life_s = half_life_s
        self.util: dict[int, float] = {}
        self._stamp: dict[int, float] = {}
        self._rate: dict[int, float] = {}        # tid -> util the thread converges to in this plan
        self._prev: list = []                    # threads runnable in the previous plan

    def _update(self, t, now: float) -> None:
        self.util[t.tid], self._stamp[t.tid] = self.utilisation(t, now), now

    def utilisation(self, t: Thread, now_s: float) -> float:
        """``t``'s utilisation at ``now_s`` (a share of the biggest core at its top clock)."""
        u, stamp = self.util.get(t.tid, 0.0), self._stamp.get(t.tid, now_s)
        decay = 2.0 ** (-max(0.0, now_s - stamp) / self.half_life_s)
        return u * decay + self._rate.get(t.tid, 0.0) * (1.0 - decay)

    def __call__(self, sched, threads: list) -> None:
        p = sched.platform
        now = sched.env.now
        for t in self._prev:
            self._update(t, now)
            self._rate[t.tid] = 0.0
        for t in threads:
            self._update(t, now)
        super().__call__(sched, threads)
        load = [0.0] * p.n_cpus
        for t in threads:
            load[t.cpu] += t.weight
        cap_max = max(sched.capacity)
        for t in threads:
            k = p.cluster_of_cpu[t.cpu]
            cap_now = sched.capacity[t.cpu] * p.freq_mhz[k] / p.clusters[k].fmax_mhz
            self._rate[t.tid] = cap_now / cap_max * t.weight / load[t.cpu] * t.duty
        self._prev = list(threads)

    def _candidates(self, t, cap: list[float]) -> Sequence[int]:
        fit = [c for c in t.affinity if self._fits(t, c, cap)]
        if fit:
            return fit
        top = max(cap[c] for c in t.affinity)
        return [c for c in t.affinity if cap[c] == top]

    def _fits(self, t, c: int, cap: list[float]) -> bool:
        return cap[c] > FIT_MARGIN * self.util.get(t.tid, 0.0) * max(cap)


class WaltPlacement:
    """Android EAS with WALT, as Qualcomm's and Google's vendor kernels place a waking task.

    (msm-4.19 kernel/sched/fair.c get_start_cpu/find_best_target; Android 4.9 start_cpu.)
    Tunables come from the phone profile (`hw.profile.KernelSpec`), a thread's schedtune
    attributes from its Android group (``Thread.cgroup``); its WALT demand (kernel.walt) is
    brought up to date lazily from the scheduler's plans.

    - Start cluster: a boosted task (its group's schedtune.boost > 0) or a member of a
      colocated group over ``sched_group_upmigrate`` starts at the middle cluster (msm) or the
      biggest (Android 4.9); any other at the smallest cluster its demand fits:
      ``demand < capacity x upmigrate`` (``downmigrate`` when it comes from a bigger cluster).
    - From there, cluster by cluster (cyclically, as the sched groups are walked): a
      latency-sensitive task (prefer_idle) takes an idle CPU - the biggest if boosted, else the
      smallest - and otherwise the active CPU where it fits with the most spare capacity;
      any other task packs onto the active CPU with the most spare capacity where it fits,
      else an idle one, skipping clusters below its start, and **stops at the first cluster
      that gives a candidate**. Isolated CPUs (core_ctl) are skipped.
    - A running task stays; one that no longer fits its cluster (a misfit: its demand grew, or
      it is boosted on the smallest cluster) is pulled by an idle CPU of a bigger cluster
      (check_for_migration / misfit load balance); a CPU running two tasks gives one to an idle
      CPU where it fits (newidle balance). The balance runs until nothing moves, so a plan with
      the same threads on the same cores in the same window is already placed (a thread that
      ends its work and spins at a barrier keeps its CPU) and is not placed again.

    Demand changes only when a window closes, so the kernel's window rollover is one timer,
    armed only while some unpinned thread is runnable (only those can move) - never per
    thread. Windows that pass without it are closed, in order and with their own statistics,
    at the next replan (before anything is placed), so core_ctl decides exactly as at the
    rollover; only a pinned-only phone sees its decisions late, and pinned threads ignore them.
    Not modelled: energy comparison of the candidates (find_energy_efficient_cpu), sched_boost,
    big-task rotation, per-task boost, the ``unfilter`` threshold of colocation, util clamps.
    """

    def __init__(self, kernel, core_ctl: bool = True):
        self.kernel = kernel
        self.window_s = kernel.window_ms / 1000.0
        self.walt = WaltDemand(self.window_s, kernel.hist_size, kernel.init_task_load_pct)
        self._core_ctl_on = core_ctl
        self.core_ctl: CoreCtl | None = None
        self.sched = None
        self._rec: dict[int, object] = {}        # tid -> TaskDemand
        self._rate: dict[int, float] = {}        # tid -> scaled rate in the current plan
        self._running: set[int] = set()
        self._prev: list = []                    # the threads runnable in the previous plan
        self._coloc: dict[str, list] = {}        # colocated group -> [skip_min, downmigrate_ts]
        self._coloc_window = -1                  # the window the groups were last updated in
        self._placed: set = set()                # (tid, cpu, affinity) as last placed ...
        self._placed_window = -1                 # ... in this window
        self._timer_at = math.inf
        self._boost: dict[str, bool] = {}        # Android group -> boosted (schedtune.boost > 0)

    # -- set-up -------------------------------------------------------------------------------

    def _setup(self, sched) -> None:
        self.sched = sched
        p = sched.platform
        cap = sched.capacity
        top = max(cap)
        self.cap = [c / top for c in cap]                       # capacity_orig, biggest = 1
        ranked = sorted(range(len(p.clusters)), key=lambda k: (p.clusters[k].capacity, p.clusters[k].cpus[0]))
        self.rank_of_cluster = {k: r for r, k in enumerate(ranked)}
        self.rank = [self.rank_of_cluster[p.cluster_of_cpu[c]] for c in range(p.n_cpus)]
        self.rank_cpus = [tuple(p.clusters[k].cpus) for k in ranked]
        self.rank_cap = [self.cap[cpus[0]] for cpus in self.rank_cpus]
        self.top = len(ranked) - 1
        self._fmax = [c.fmax_mhz for c in p.clusters]
        n_b = len(ranked) - 1
        self.up = [x / 100.0 for x in self.kernel.upmigrate_pct][:n_b]
        self.down = [x / 100.0 for x in self.kernel.downmigrate_pct][:n_b]
        names = {p.clusters[k].name: r for r, k in enumerate(ranked)}
        params = [None] * len(ranked)
        if self._core_ctl_on:
            for cc in self.kernel.core_ctl:
                params[names[cc.cluster]] = cc
        self.core_ctl = CoreCtl(self.rank_cpus, params)
        self._colocating = any(g.colocate for g in self.kernel.schedtune.values())
        self._stats = WindowStats(p.n_cpus, self.window_s)
        sched.on_replan.append(self._after_replan)

    # -- demand -------------------------------------------------------------------------------

    def _record(self, t: Thread, now: float):
        d = self._rec.get(t.tid)
        if d is None:
            d = self._rec[t.tid] = self.walt.new(now)
        else:
            self.walt.advance(d, now, self._rate.get(t.tid, 0.0))
        return d

    def demand(self, t: Thread) -> float:
        """``t``'s WALT demand now (a share of a window on the biggest CPU at its top clock)."""
        return self._record(t, self.sched.env.now).demand

    def isolated(self) -> set[int]:
        """core_ctl's isolated CPUs now (every window up to now closed)."""
        self._roll(self.sched.env.now)
        return set(self.core_ctl.isolated)

    def fits(self, d: float, rank: int, from_rank: int) -> bool:
        """task_fits_capacity(): demand ``d`` fits a CPU of cluster ``rank`` for a task on ``from_rank``."""
        if rank >= self.top:
            return True
        margin = self.down[rank] if from_rank > rank else self.up[from_rank]
        return self.rank_cap[rank] * margin > d

    def _stune(self, t: Thread):
        return self.kernel.stune(t.cgroup)

    def _boosted(self, t: Thread) -> bool:
        boosted = self._boost.get(t.cgroup)
        if boosted is None:
            boosted = self._boost[t.cgroup] = self._stune(t).boost_pct > 0.0
        return boosted

    def _skip_min(self, t: Thread) -> bool:
        g = self._coloc.get(t.cgroup)
        return bool(g and t.colocated and g[0])

    # -- placement ----------------------------------------------------------------------------

    def __call__(self, sched, threads: list) -> None:
        if self.sched is None:
            self._setup(sched)
        now = sched.env.now
        window = self.walt.window_of(now)
        if window == self._placed_window and self._placed == {(t.tid, t.cpu, t.affinity) for t in threads}:
            # The same threads on the same cores, no window closed since they were placed: no
            # task woke, no demand, isolation or colocation changed, and the balance below is
            # run to its fixed point, so placing them again would change nothing.
            self._prev = threads[:]
            return
        cc = self.core_ctl
        if cc.enabled:
            self._roll(now)
        if self._colocating:
            self._update_colocation(now)
        n = len(self.cap)
        iso = cc.isolated
        count, load = [0] * n, [0.0] * n
        placed, waking = [], []
        for t in threads:
            allowed = self._allowed(t, iso)
            if len(allowed) == 1:
                t.cpu = allowed[0]
            elif t.tid in self._running and t.cpu in allowed:
                pass
            else:
                waking.append(t)
                continue
            placed.append(t)
            count[t.cpu] += 1
            load[t.cpu] += t.weight
        prev, self._prev = self._prev, threads[:]
        self._running = {t.tid for t in threads}
        if len(placed) == len(threads) and not any(len(t.affinity) > 1 for t in placed):
            self._remember(threads, window)
            return   # every thread pinned: nothing to decide
        dem = {t.tid: self._record(t, now).demand for t in threads}
        util = [0.0] * n
        for t in placed:
            util[t.cpu] += dem[t.tid]
        # A core vacated at this very instant still counts as busy for the waking threads
        # (a thread that ends a piece of work and starts the next never left it).
        seen_count, seen_util = list(count), list(util)
        if waking and prev:
            running = self._running
            for t in prev:
                c = t.cpu
                if c is not None and count[c] == 0 and t.tid not in running:
                    seen_count[c] += 1
                    seen_util[c] += self._record(t, now).demand
        waking.sort(key=lambda t: (-dem[t.tid], -t.weight, t.tid))
        for t in waking:
            c = self._wake_cpu(t, dem[t.tid], self._allowed(t, iso), seen_count, seen_util, load)
            t.cpu = c
            for cnt, ut in ((count, util), (seen_count, seen_util)):
                cnt[c] += 1
                ut[c] += dem[t.tid]
            load[c] += t.weight
        for _ in threads:   # a move can free a core for another: balance until nothing moves
            if not self._balance(threads, dem, iso, count, util, load, seen_count):
                break
        self._remember(threads, window)

    def _remember(self, threads: list, window: int) -> None:
        self._placed = {(t.tid, t.cpu, t.affinity) for t in threads}
        self._placed_window = window

    def _allowed(self, t: Thread, iso: set) -> tuple[int, ...]:
        if not iso:
            return t.affinity
        # assumption: a task whose whole mask is isolated still runs there (msm
        # __set_cpus_allowed_ptr falls back to the isolated CPUs of the mask); core_ctl then
        # sees that CPU busy and brings it back
        return tuple(c for c in t.affinity if c not in iso) or t.affinity

    def _start_rank(self, t: Thread, d: float, from_rank: int) -> int:
        if self._boosted(t) or self._skip_min(t):
            if self.kernel.boosted_start == "middle" and self.top >= 2:
                return 1
            return self.top
        r = 0
        while r < self.top and not self.fits(d, r, from_rank):
            r += 1
        return r

    def _wake_cpu(self, t: Thread, d: float, allowed, seen_count, seen_util, load) -> int:
        """find_best_target() for a waking task (class doc)."""
        st = self._stune(t)
        prefer_idle, boosted = st.prefer_idle, st.boost_pct > 0.0
        from_rank = self.rank[t.cpu] if t.cpu is not None else 0
        start = self._start_rank(t, d, from_rank)
        allowed_set = set(allowed)
        p = self.sched.platform
        best_idle = target = best_active = most_spare = None
        target_cap = 0.0 if (prefer_idle and boosted) else math.inf
        target_spare, min_wake, most_spare_cap = -math.inf, math.inf, -math.inf
        n_ranks = self.top + 1
        for step in range(n_ranks):
            r = (start + step) % n_ranks
            for c in self.rank_cpus[r]:
                if c not in allowed_set:
                    continue
                cap = self.cap[c]
                wake_util = seen_util[c]
                new_util = wake_util + d
                if cap - wake_util > most_spare_cap:
                    most_spare_cap, most_spare = cap - wake_util, c
                if new_util > cap:
                    continue
                idle = seen_count[c] == 0
                if prefer_idle:
                    if idle:
                        if (boosted and cap < target_cap) or (not boosted and cap > target_cap):
                            continue
                        if best_idle is not None and cap == target_cap and best_idle == t.cpu:
                            continue   # equal CPUs: stay where its cache is
                        target_cap, best_idle = cap, c
                        continue
                    if best_idle is not None:
                        continue
                    k = p.cluster_of_cpu[c]
                    cap_curr = cap * p.freq_mhz[k] / self._fmax[k]
                    if cap_curr > new_util and cap - new_util > target_spare:
                        target_spare, target = cap - new_util, c
                        continue
                    if target is not None:
                        continue
                    if wake_util < min_wake:
                        min_wake, best_active = wake_util, c
                    continue
                if self.rank[c] < start:
                    continue
                if idle:
                    if best_idle is None or cap < target_cap or (cap == target_cap and c == t.cpu):
                        target_cap, best_idle = cap, c
                    continue
                if cap - new_util >= target_spare:
                    target_spare, target = cap - new_util, c
            higher = r < self.top   # the next sched group (cyclic) is the next bigger cluster
            if not prefer_idle and not boosted and (
                    (target is not None and (len(self.rank_cpus[r]) > 1 or not higher)) or best_idle is not None):
                break
            if (prefer_idle and best_idle is not None) or (boosted and (best_idle is not None or target is not None)):
                if (boosted and not higher) or (not boosted and higher):
                    break
        if prefer_idle and best_idle is not None:
            return best_idle
        if target is None:
            target = best_active if prefer_idle else best_idle
        if target is None:
            target = most_spare
        if target is None:
            target = max(allowed, key=lambda c: (self.cap[c] * t.weight / (load[c] + t.weight), c == t.cpu, -c))
        return target

    def _misfit(self, t: Thread, d: float) -> bool:
        r = self.rank[t.cpu]
        if r >= self.top:
            return False
        return (r == 0 and self._boosted(t)) or not self.fits(d, r, r)

    def _balance(self, threads, dem, iso, count, util, load, seen_count) -> bool:
        """Misfit pull by an idle bigger CPU, and an idle CPU taking a task from a shared one;
        True if a task moved."""
        # Only a misfit or a task sharing its CPU may move; a move only fills an idle CPU, so
        # no other task becomes one during the pass.
        movable = [t for t in threads if len(t.affinity) > 1 and (count[t.cpu] > 1 or self._misfit(t, dem[t.tid]))]
        if not movable:
            return False
        moved = False
        movable.sort(key=lambda t: (-dem[t.tid], t.tid))
        for t in movable:
            c0 = t.cpu
            r0 = self.rank[c0]
            allowed = self._allowed(t, iso)
            idle = [c for c in allowed if seen_count[c] == 0]
            if not idle:
                continue
            d = dem[t.tid]
            dest = None
            if self._misfit(t, d):
                bigger = [c for c in idle if self.rank[c] > r0]
                fit = [c for c in bigger if self.fits(d, self.rank[c], r0)]
                pool = fit or bigger
                if pool:
                    dest = min(pool, key=lambda c: (self.rank[c], c)) if fit else max(pool, key=lambda c: (self.rank[c], -c))
            if dest is None and count[c0] > 1:
                # an idle sibling pulls a queued task whatever its demand (newidle balance in the
                # cluster's MC domain; can_migrate_task only refuses the running one)
                fit = [c for c in idle if self.rank[c] == r0] or \
                      [c for c in idle if self.fits(d, self.rank[c], r0) and self.rank[c] >= r0] or \
                      [c for c in idle if self.fits(d, self.rank[c], r0)]
                if fit:
                    dest = min(fit, key=lambda c: (self.rank[c] != r0, self.rank[c], c))
            if dest is None:
                continue
            for cnt in (count, seen_count):
                cnt[c0] -= 1
                cnt[dest] += 1
            util[c0] -= d
            util[dest] += d
            load[c0] -= t.weight
            load[dest] += t.weight
            t.cpu = dest
            moved = True
        return moved

    # -- colocation (related thread group) ------------------------------------------------------

    def _update_colocation(self, now: float) -> None:
        """Group upmigration of colocated groups (walt.c update_best_cluster), once a window
        (demands only change when one closes). Thresholds are shares of a window of the
        smallest cluster's capacity (walt_update_group_thresholds)."""
        k = self.kernel
        w = self.walt.window_of(now)
        if w == self._coloc_window:
            return
        self._coloc_window = w
        unit = self.rank_cap[0] / 100.0
        recent = now - self.window_s * k.hist_size
        for name, st in k.schedtune.items():
            if not st.colocate:
                continue
            total = 0.0
            for t in self.sched.threads:
                if t.colocated and t.cgroup == name and t.tid in self._rec:
                    d = self._record(t, now)
                    if t.tid in self._rate or d.ran >= recent:
                        total += d.demand
            g = self._coloc.setdefault(name, [False, None])
            if not g[0]:
                g[0] = total >= k.group_upmigrate_pct * unit
                g[1] = None
            elif total < k.group_downmigrate_pct * unit:
                if k.coloc_downmigrate_ms <= 0:
                    g[0] = False
                elif g[1] is None:
                    g[1] = now
                elif now - g[1] > k.coloc_downmigrate_ms / 1000.0:
                    g[0], g[1] = False, None
            else:
                g[1] = None

    # -- windows: rates, per-CPU statistics, core_ctl, the rollover timer -------------------------

    def _after_replan(self) -> None:
        """At the end of every replan: each runnable thread's scaled rate under the new plan (a
        record whose rate changes is first brought to now at its old rate; the others stay
        behind until read), the CPUs' window statistics for core_ctl, and the rollover timer."""
        sched = self.sched
        p = sched.platform
        now = sched.env.now
        cl, freq, fmax, cap = p.cluster_of_cpu, p.freq_mhz, self._fmax, self.cap
        old = self._rate
        new = {t.tid: (t.duty if t.idle_s_per_unit > 0.0 else 1.0) * cap[t.cpu] * freq[cl[t.cpu]] / fmax[cl[t.cpu]]
               for t in sched._runnable}
        rec = self._rec
        if new != old:
            for tid, r in new.items():
                r0 = old.get(tid, 0.0)
                if r0 != r and tid in rec:
                    self.walt.advance(rec[tid], now, r0)
            for tid, r0 in old.items():
                if tid not in new and tid in rec:
                    self.walt.advance(rec[tid], now, r0)
            self._rate = new
        if self.core_ctl.enabled:
            n = p.n_cpus
            nr, misfit = [0] * n, [0] * n
            for t in sched._runnable:
                nr[t.cpu] += 1
                if len(t.affinity) > 1 and t.tid in rec and self._misfit(t, self._record(t, now).demand):
                    misfit[t.cpu] += 1
            busy = sched.busy_now
            busy = [busy[c] * freq[cl[c]] / fmax[cl[c]] for c in range(n)]
            st = self._stats
            if busy != st.busy or nr != st.nr or misfit != st.misfit:   # else the window goes on as it was
                self._roll(now)
                st.set_plan(now, busy, nr, misfit)
        if self._timer_at == math.inf and any(len(t.affinity) > 1 for t in sched._runnable):
            self._arm(now)

    def _arm(self, now: float) -> None:
        at = self._timer_at = (self.walt.window_of(now) + 1) * self.window_s
        self.sched.env.call_in(max(0.0, at - now), lambda: self._rollover(at))

    def _rollover(self, at: float) -> None:
        """The kernel's window rollover: close the window, run core_ctl, find new misfits."""
        self._timer_at = math.inf
        sched = self.sched
        if sched._replan_pending:
            return   # a replan at this instant places everything and re-arms
        now = sched.env.now
        changed = self._roll(now)
        iso = self.core_ctl.isolated
        movable = False
        for t in sched._runnable:
            if len(t.affinity) <= 1:
                continue
            movable = True
            if not changed and t.cpu in iso:
                changed = True
            d = self._record(t, now)
            if not changed and self._misfit(t, d.demand):
                r0 = self.rank[t.cpu]
                busy = {x.cpu for x in sched._runnable}
                if any(self.rank[c] > r0 and c not in busy and c not in iso for c in t.affinity):
                    changed = True
        if changed:
            sched._touch()   # the replan re-places and re-arms
        elif movable:
            self._arm(now)

    def _roll(self, now: float) -> bool:
        """Close every window up to ``now``; core_ctl decides at each. True if isolation changed."""
        cc = self.core_ctl
        if not cc.enabled:
            return False
        return self._stats.advance(now, cc.evaluate, lambda: cc.settled)


# kernel/sched/fair.c fits_capacity(): a task fits a core with 20% headroom (cap * 1280 < max * 1024).
FIT_MARGIN = 1280 / 1024
# A move must gain at least this share of throughput: no ping-pong between equal cores.
_GAIN = 1.0 + 1e-9
# Placement strategies by name; each call gives a fresh (possibly stateful) placement for a
# device spec. "walt" needs a profile with a `[kernel]` table; "walt-nocorectl" is the same
# with core_ctl off (every CPU online).
PLACEMENTS: dict[str, Callable[..., Placement]] = {
    "wakeup": lambda spec: WakeupPlacement(),
    "eas": lambda spec: CapacityAwarePlacement(),
    "throughput": lambda spec: place_for_throughput,
    "walt": lambda spec: WaltPlacement(spec.kernel),
    "walt-nocorectl": lambda spec: WaltPlacement(spec.kernel, core_ctl=False),
}
# "auto": what the phone's kernel does - the profile's flavour where it names one, else `wakeup`.
AUTO = "auto"


def resolve_placement(name: str, spec) -> str:
    """The placement a device runs: ``name``, with "auto" resolved from the profile."""
    if name == AUTO:
        return "walt" if getattr(spec, "kernel", None) is not None else "wakeup"
    return name


class Scheduler:
    """CFS over a platform's cores, driven by a SimPy environment."""

    def __init__(self, env: simpy.Environment, platform: Platform, placement: Placement | None = None):
        if not hasattr(env, "at_instant_end"):
            raise TypeError("the scheduler needs swansim.kernel.sched.Environment (it coalesces a "
                            "instant's changes at the instant's end)")
        self.env = env
        self.platform = platform
        self.placement = placement or WakeupPlacement()
        # capacity_orig per cpu (the kernel's, fixed): what placement ranks cores by
        self.capacity = [platform.clusters[platform.cluster_of_cpu[c]].capacity for c in range(platform.n_cpus)]
        self.threads: list[Thread] = []
        self._runnable: list[Thread] = []
        self._busy_s = [0.0] * platform.n_cpus  # per-core busy time up to _busy_since
        self._busy_since = env.now
        self.busy_version = 0   # bumped whenever busy_now changes (listeners skip work when it has not)
        self._busy_now = [0.0] * platform.n_cpus
        self._held_busy: list[float] | None = None   # a replayed batch's busy shares (`hold_busy`)
        self._time_s = env.now
        self._replan_pending = False
        self._changed = False       # a change arrived since the rates were last shared out
        self._bw_bps = platform.spec.soc.dram_bandwidth_gbps * 1e9
        self._l0_s = platform.spec.soc.dram_latency_ns * 1e-9
        self._due_s = math.inf      # when the next piece of work completes at the current rates
        self._timer_s = math.inf    # when the one pending completion timer fires (inf: none)
        self.n_replans = 0
        # per core: the thread holding it, when its turn ends, the core's min_vruntime
        self._curr: list[Thread | None] = [None] * platform.n_cpus
        self._turn_start_s = [0.0] * platform.n_cpus
        self._turn_end_s = [math.inf] * platform.n_cpus
        self._min_vrt_s = [0.0] * platform.n_cpus
        self.mem_rho = 0.0      # memory-controller load seen by latency-exposed threads (last replan)
        # Called with no arguments at the end of every replan (cpufreq governors listen here).
        self.on_replan: list[Callable[[], None]] = []

    # -- threads ------------------------------------------------------------------------------

    def spawn(self, name: str, affinity: Iterable[int] | None = None, nice: int = 0, group: str = "",
              l3: L3Use | None = None, cgroup: str = "", colocated: bool = False) -> Thread:
        """A new thread; ``cgroup`` its Android group ("" = root), ``colocated`` whether it is in
        that group's related thread group (`Thread`)."""
        cpus = tuple(sorted(set(affinity))) if affinity is not None else tuple(range(self.platform.n_cpus))
        if not cpus or any(not 0 <= c < self.platform.n_cpus for c in cpus):
            raise ValueError(f"affinity {cpus} is not a set of this SoC's cpus 0..{self.platform.n_cpus - 1}")
        t = Thread(len(self.threads), name, group, nice_to_weight(nice), cpus, cgroup, colocated)
        t.l3 = l3
        self.threads.append(t)
        return t

    def run(self, t: Thread, amount: float, speed: Sequence[float], bytes_per_unit: float = 0.0,
            misses_per_unit: float = 0.0, on_done: Callable[[], None] | None = None,
            idle_s_per_unit: float = 0.0) -> simpy.Event | None:
        """Give ``t`` ``amount`` units of work; the returned event fires when it is done.

        With ``on_done`` no event is made: ``on_done()`` is called inside the replan that finds
        the work done (it may give ``t`` or other threads new work; that replan places it).
        ``misses_per_unit``: DRAM misses per unit whose latency the thread waits for (not
        overlapped); they make it slower as the memory controller's load rises (module doc).
        ``idle_s_per_unit``: sleep interleaved with the work (module doc).
        """
        if t.runnable:
            raise RuntimeError(f"{t.name} is already busy")
        if on_done is not None:
            ev = on_done
            if amount <= 0:
                self.env.at_instant_end(on_done)
                return None
        else:
            ev = self.env.event()
            if amount <= 0:
                ev.succeed()
                return ev
        self._touch()
        t.remaining, t.speed, t.bytes_per_unit, t.done = amount, speed, bytes_per_unit, ev
        t.misses_per_unit = misses_per_unit
        t.idle_s_per_unit, t.duty = idle_s_per_unit, 1.0
        self._runnable.append(t)
        return ev if on_done is None else None

    def spin(self, t: Thread) -> None:
        """Busy-wait (e.g. an OpenMP barrier): ``t`` holds its core without progress until `stop`."""
        if t.runnable:
            raise RuntimeError(f"{t.name} is already busy")
        self._touch()
        t.spinning = True
        self._runnable.append(t)

    def stop(self, t: Thread) -> None:
        """End a spin, or abandon unfinished work (its event never fires)."""
        if not t.runnable:
            return
        self._touch()
        t.spinning, t.done, t.remaining, t.rate, t.idle_s_per_unit = False, None, 0.0, 0.0, 0.0
        self._runnable.remove(t)
        self._leave(t)

    def set_affinity(self, t: Thread, cpus: Iterable[int]) -> None:
        cpus = tuple(sorted(set(cpus)))
        if not cpus or any(not 0 <= c < self.platform.n_cpus for c in cpus):
            raise ValueError(f"affinity {cpus} is not a set of this SoC's cpus")
        self._touch()
        t.affinity = cpus

    def hold_busy(self, busy: Sequence[float] | None) -> None:
        """Replay: each core is busy ``busy[c]`` of the time from now (what governors and busy
        time see) whatever threads run; None returns to the threads' own activity."""
        self._touch()
        self._held_busy = None if busy is None else list(busy)

    def set_freq(self, cluster: int, freq_mhz: float) -> None:
        """A frequency-domain change: takes effect now."""
        if self.platform.freq_mhz[cluster] == freq_mhz:
            return
        self._touch()
        self.platform.set_freq(cluster, freq_mhz)

    # -- readings -----------------------------------------------------------------------------

    def core_capacity_now(self) -> list[float]:
        """capacity_orig scaled by each core's current clock (for greedy placement)."""
        p = self.platform
        return [self.capacity[c] * p.freq_mhz[k] / p.clusters[k].fmax_mhz
                for c, k in enumerate(p.cluster_of_cpu)]

    @property
    def busy_s(self) -> list[float]:
        """Per core, the time it has been busy (running or spinning; a share of it for work
        with interleaved idle), up to now's last sync."""
        self._settle_busy()
        return list(self._busy_s)

    def _settle_busy(self) -> None:
        dt = self._time_s - self._busy_since
        if dt > 0.0:
            self._busy_s = [a + b * dt for a, b in zip(self._busy_s, self._busy_now)]
            self._busy_since = self._time_s

    @property
    def busy_now(self) -> list[float]:
        """Per core, 1.0 while it has a runnable thread in the current plan, else 0.0 (read-only)."""
        return self._busy_now

    def sync(self) -> None:
        """Bring work progress, busy time, energy and temperatures up to now."""
        now = self.env.now
        dt = now - self._time_s
        if dt <= 0.0:
            return   # the platform is only ever advanced with the scheduler: it is at now too
        for t in self._runnable:
            t.remaining -= t.rate * dt
            t.cpu_time_s += dt
        for t in self._curr:
            if t is not None:
                t.vrt_s += dt * 1024.0 / t.weight
        self._time_s = now
        self.platform.advance(now)

    # -- machinery ----------------------------------------------------------------------------

    def _touch(self) -> None:
        """Something changes now: settle the past and replan once this instant is over."""
        if self.env.now > self._time_s:
            self.sync()
        self._changed = True
        if not self._replan_pending:
            self._replan_pending = True
            self.env.at_instant_end(self._replan)

    def _replan(self) -> None:
        self.sync()
        self.n_replans += 1
        # Finish whatever has (numerically) completed before sharing out the cores again. A
        # completion callback may start new work: it joins this replan.
        while True:
            finished = [t for t in self._runnable if t.done is not None and t.remaining <= t.rate * _DONE_EPS_S]
            if not finished:
                break
            for t in finished:
                self._runnable.remove(t)
                self._leave(t)
                done, t.done, t.remaining, t.rate, t.idle_s_per_unit = t.done, None, 0.0, 0.0, 0.0
                if isinstance(done, simpy.Event):
                    done.succeed()
                else:
                    done()
        self.placement(self, self._runnable)
        self._slice(self._runnable)
        # Sharing out can change what the listeners decide (a governor picks a new clock at
        # once): then the rates are shared out again at this instant, placement unchanged.
        while True:
            self._changed = False
            self._share()
            for hook in self.on_replan:
                hook()
            if not self._changed:
                break
        self._replan_pending = False

    def _leave(self, t: Thread) -> None:
        """``t`` stops being runnable: it keeps its lag behind its core's min_vruntime. (If it
        starts again within this instant it never left: `_slice` keeps its place and turn.)"""
        if t.queued:
            t.lag_s = t.vrt_s - self._min_vrt_s[t.on_cpu]
            t.queued, t.left_s = False, self.env.now

    def _slice(self, runnable: list[Thread]) -> None:
        """CFS's turns on each core: who holds it now (``_curr``) and until when.

        A thread arriving on a core is queued at its lag behind the core's min_vruntime: a new
        thread one virtual slice behind (START_DEBIT), a moved one at the lag it had, a woken
        one at its lag less its sleep, at most half a period ahead (GENTLE_FAIR_SLEEPERS). It
        preempts the running thread when that one's vruntime is more than the wakeup granularity
        ahead of it (check_preempt_wakeup). Otherwise the running thread keeps the core until its
        turn (the period shared by weight, counted from when it took the core) is over, and the
        thread with the least vruntime takes it (check_preempt_tick, pick_next_entity).
        """
        now = self.env.now
        curr, start, end, minv = self._curr, self._turn_start_s, self._turn_end_s, self._min_vrt_s
        holder: list = [None] * len(curr)
        shared: dict[int, list[Thread]] = {}
        for t in runnable:
            c = t.cpu
            h = holder[c]
            if h is None:
                holder[c] = t
            elif c in shared:
                shared[c].append(t)
            else:
                shared[c] = [h, t]
        for c, t in enumerate(holder):
            if c in shared:
                continue
            if t is None:
                if curr[c] is not None:
                    curr[c], end[c] = None, math.inf
                continue
            # alone on its core (the common case): it holds it, no turn to time
            if not t.queued or t.on_cpu != c:
                self._arrive(t, c, now, SCHED_LATENCY_S * 1024.0 / t.weight)
            if curr[c] is not t:
                curr[c], start[c] = t, now
            end[c] = math.inf
            if t.vrt_s > minv[c]:
                minv[c] = t.vrt_s
        for c, ts in shared.items():
            cur = curr[c]
            if cur is not None and cur not in ts:
                cur = None
            total_w = sum(t.weight for t in ts)
            period_s = max(SCHED_LATENCY_S, len(ts) * SCHED_MIN_GRANULARITY_S)
            vslice_s = period_s * 1024.0 / total_w
            arrived = [t for t in ts if (not t.queued or t.on_cpu != c) and self._arrive(t, c, now, vslice_s)]
            # on a tie the one that waited goes first (the running one is requeued to its right)
            lead = min(ts, key=lambda t: (round(t.vrt_s, 12), t is cur))
            minv[c] = max(minv[c], lead.vrt_s)
            if cur is not None:
                end[c] = start[c] + period_s * cur.weight / total_w
                if now < end[c]:
                    waker = min((t for t in arrived if t.vrt_s < cur.vrt_s), key=lambda t: t.vrt_s, default=None)
                    if waker is None or cur.vrt_s - waker.vrt_s <= SCHED_WAKEUP_GRANULARITY_S * 1024.0 / waker.weight:
                        continue
                    lead = waker
            curr[c], start[c], end[c] = lead, now, now + period_s * lead.weight / total_w

    def _arrive(self, t: Thread, c: int, now: float, vslice_s: float) -> bool:
        """Queue ``t`` on core ``c`` at its lag behind the core's min_vruntime (`_slice`); False
        if it never left this core's queue."""
        minv = self._min_vrt_s
        if t.queued:                         # moved here from another core's queue
            t.lag_s = t.vrt_s - minv[t.on_cpu]
        elif t.left_s == -math.inf:          # new: one virtual slice behind
            t.lag_s = vslice_s
        elif t.left_s == now and t.on_cpu == c:
            t.queued = True                  # ended one piece of work and began the next: never left
            return False
        else:                                # woke up
            t.lag_s = max(t.lag_s - (now - t.left_s), -0.5 * SCHED_LATENCY_S)
        t.vrt_s = minv[c] + t.lag_s
        t.on_cpu, t.queued = c, True
        return True

    def _share(self) -> None:
        """Rates of the placed runnable threads, the platform's activity, the next completion."""
        runnable = self._runnable
        p = self.platform
        busy = [0.0] * p.n_cpus     # 1.0 where a thread runs (weights are positive)
        curr = self._curr
        for t in runnable:
            busy[t.cpu] = 1.0
        dram_bps = 0.0
        exposed = []
        freq, cl = p.freq_mhz, p.cluster_of_cpu
        gaps = False
        for t in runnable:
            if t.spinning or curr[t.cpu] is not t:
                t.rate = 0.0
                continue
            k = cl[t.cpu]
            t.rate = freq[k] * 1e6 * t.speed[k]
            if t.idle_s_per_unit > 0.0 and t.rate > 0.0:
                t.rate = 1.0 / (1.0 / t.rate + t.idle_s_per_unit)
                gaps = True
            if t.misses_per_unit > 0.0 and t.rate > 0.0:
                exposed.append(t)
            else:
                dram_bps += t.rate * t.bytes_per_unit
        bw, l0_s = self._bw_bps, self._l0_s
        self.mem_rho = 0.0
        if exposed:
            dram_bps = self._queue(exposed, dram_bps, bw, l0_s)
        if dram_bps > 0.0:
            miss_s = l0_s / (1.0 - self.mem_rho)
            for t in runnable:
                if t.l3 is not None and t.rate > 0.0:
                    own_bps = t.rate * t.l3.accesses_per_unit * CACHE_LINE_BYTES
                    lost = t.l3.lost_share(own_bps, dram_bps - t.rate * t.bytes_per_unit)
                    extra_s = (t.l3.accesses_per_unit * t.l3.exposed_share * lost
                               * max(0.0, miss_s - t.l3.hit_latency_s))
                    t.rate = 1.0 / (1.0 / t.rate + extra_s)
        if dram_bps > bw:
            # Memory-bound: every thread that moves memory slows by the same factor (its core
            # stays busy, stalled), so traffic equals the bandwidth.
            scale = bw / dram_bps
            for t in runnable:
                if t.bytes_per_unit > 0.0:
                    t.rate *= scale
            dram_bps = bw
        if self._held_busy is not None:
            busy = list(self._held_busy)
        elif gaps:
            idle_share = [1.0] * len(busy)
            for t in runnable:
                t.duty = 1.0 - t.idle_s_per_unit * t.rate if t.idle_s_per_unit > 0.0 else 1.0
                idle_share[t.cpu] *= 1.0 - t.duty
            busy = [b * (1.0 - z) for b, z in zip(busy, idle_share)]
        if busy != self._busy_now:
            self._settle_busy()
            self._busy_now = busy
            self.busy_version += 1
        p.set_activity(busy, dram_bps)
        self._arm_timer()

    def _queue(self, exposed: list[Thread], fixed_bps: float, bw: float, l0_s: float) -> float:
        """Slow latency-exposed threads by memory queueing at the fixed-point load; total traffic."""
        inv = [(1.0 / t.rate, t.misses_per_unit * l0_s, t.bytes_per_unit) for t in exposed]

        def traffic(rho: float) -> float:
            x = rho / (1.0 - rho)
            return fixed_bps + sum(b / (a + m * x) for a, m, b in inv)

        if traffic(0.0) <= 0.0:
            rho = 0.0
        elif traffic(RHO_CAP) >= RHO_CAP * bw:
            rho = RHO_CAP
        else:
            lo, hi = 0.0, RHO_CAP
            while hi - lo > _RHO_TOL:
                mid = 0.5 * (lo + hi)
                if traffic(mid) >= mid * bw:
                    lo = mid
                else:
                    hi = mid
            rho = 0.5 * (lo + hi)
        x = rho / (1.0 - rho)
        for t, (a, m, _) in zip(exposed, inv):
            t.rate = 1.0 / (a + m * x)
        self.mem_rho = rho
        return traffic(rho)

    def _arm_timer(self) -> None:
        """Arm the timer of the next completion. One timer is pending at a time: an earlier one
        stays (when it fires early it re-arms for the true completion), a later one is replaced."""
        dt = math.inf
        for t in self._runnable:
            if t.rate > 0.0:
                left = t.remaining / t.rate
                if left < dt:
                    dt = left
        now = self.env.now
        turn_s = min(self._turn_end_s) - now
        if turn_s < dt:
            dt = max(turn_s, 0.0)
        self._due_s = now + dt
        if dt < math.inf and self._due_s < self._timer_s:
            self._set_timer(max(dt, 0.0))

    def _set_timer(self, dt_s: float) -> None:
        at = self._timer_s = self.env.now + dt_s
        self.env.call_in(dt_s, lambda: self._on_timer(at))

    def _on_timer(self, at: float) -> None:
        if at != self._timer_s:
            return   # superseded by an earlier timer
        self._timer_s = math.inf
        if self._replan_pending:
            return   # this instant's replan will see the completion and re-arm
        left = self._due_s - self.env.now
        if left > _DONE_EPS_S * max(1.0, self._due_s):
            self._set_timer(left)   # fired early: the completion moved later meanwhile
        else:
            self._touch()
