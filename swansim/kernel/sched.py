"""Fluid processor sharing: the CPU scheduler as a piecewise-linear process.

Between changes every runnable thread progresses at a constant rate
    rate = f_core * speed[cluster] * weight / (sum of weights on its core)
scaled down, for threads that move memory, so that the total DRAM traffic fits the SoC's
bandwidth. Threads with latency-exposed DRAM misses (``misses_per_unit``) also pay memory
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

A change is a thread starting or finishing work, an affinity or frequency change.
At a change the scheduler (1) advances work and the platform's energy/thermal integrals to
now, (2) re-places threads on cores, (3) recomputes rates and (4) arms one timer for the next
completion. Changes at the same instant are coalesced into one replan that runs when the
instant is over (`Environment.at_instant_end`, no zero-delay event), so an event is only ever
a change, never a tick. Work may end in a callback instead of an event (``run(on_done=...)``):
the callback runs inside the replan, so a thread that finishes and at once starts its next
piece (or spins at a barrier) costs one replan, not two.

Weights follow CFS (nice 0 = 1024, each nice step ~1.25x). Placement is pluggable: the
default, `WakeupPlacement`, behaves like Linux (running threads stay; waking threads take idle
cores, biggest first; idle cores pull threads that would run faster); `place_for_throughput`
re-places every unpinned thread at every change where it gets most throughput. Pinned
threads stay where they are pinned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import simpy

from swansim.hw.platform import Platform
from swansim.hw.profile import CACHE_LINE_BYTES

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
# A thread is done when less than this much of its time at its current rate is left.
_DONE_EPS_S = 1e-12


class Environment(simpy.Environment):
    """SimPy's environment with work deferred to the end of the current instant.

    ``at_instant_end(fn)`` runs ``fn`` once every event of the current simulated time has been
    processed, before time moves on (or the queue runs dry). The scheduler coalesces all the
    changes of one instant into one replan this way, without scheduling an event for it.
    """

    def __init__(self, initial_time: float = 0):
        super().__init__(initial_time)
        self._instant_end: list[Callable[[], None]] = []
        self.n_events = 0   # events processed (benchmarks count work in events)

    def at_instant_end(self, fn: Callable[[], None]) -> None:
        self._instant_end.append(fn)

    def step(self) -> None:
        queue = self._queue
        while self._instant_end and (not queue or queue[0][0] > self._now):
            fns, self._instant_end = self._instant_end, []
            for fn in fns:
                fn()
        self.n_events += 1
        super().step()


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
                 "idle_s_per_unit", "duty")
    # ``done``: the SimPy event to succeed, or a callable to call, when the work is done

    def __init__(self, tid: int, name: str, group: str, weight: float, affinity: tuple[int, ...]):
        self.tid, self.name, self.group, self.weight, self.affinity = tid, name, group, weight, affinity
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


# kernel/sched/fair.c fits_capacity(): a task fits a core with 20% headroom (cap * 1280 < max * 1024).
FIT_MARGIN = 1280 / 1024
# A move must gain at least this share of throughput: no ping-pong between equal cores.
_GAIN = 1.0 + 1e-9
# Placement strategies by name; each call gives a fresh (possibly stateful) placement.
PLACEMENTS: dict[str, Callable[[], Placement]] = {
    "wakeup": lambda: WakeupPlacement(),
    "eas": lambda: CapacityAwarePlacement(),
    "throughput": lambda: place_for_throughput,
}


class Scheduler:
    """Fluid CFS over a platform's cores, driven by a SimPy environment."""

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
        self.mem_rho = 0.0      # memory-controller load seen by latency-exposed threads (last replan)
        # Called with no arguments at the end of every replan (cpufreq governors listen here).
        self.on_replan: list[Callable[[], None]] = []

    # -- threads ------------------------------------------------------------------------------

    def spawn(self, name: str, affinity: Iterable[int] | None = None, nice: int = 0, group: str = "",
              l3: L3Use | None = None) -> Thread:
        cpus = tuple(sorted(set(affinity))) if affinity is not None else tuple(range(self.platform.n_cpus))
        if not cpus or any(not 0 <= c < self.platform.n_cpus for c in cpus):
            raise ValueError(f"affinity {cpus} is not a set of this SoC's cpus 0..{self.platform.n_cpus - 1}")
        t = Thread(len(self.threads), name, group, nice_to_weight(nice), cpus)
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
        self._time_s = now
        self.platform.advance(now)

    # -- machinery ----------------------------------------------------------------------------

    def _touch(self) -> None:
        """Something changes now: settle the past and replan once this instant is over."""
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
                done, t.done, t.remaining, t.rate, t.idle_s_per_unit = t.done, None, 0.0, 0.0, 0.0
                if isinstance(done, simpy.Event):
                    done.succeed()
                else:
                    done()
        self.placement(self, self._runnable)
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

    def _share(self) -> None:
        """Rates of the placed runnable threads, the platform's activity, the next completion."""
        runnable = self._runnable
        p = self.platform
        weight_on = [0.0] * p.n_cpus
        for t in runnable:
            weight_on[t.cpu] += t.weight
        dram_bps = 0.0
        exposed = []
        freq, cl = p.freq_mhz, p.cluster_of_cpu
        gaps = False
        for t in runnable:
            if t.spinning:
                t.rate = 0.0
                continue
            k = cl[t.cpu]
            t.rate = freq[k] * 1e6 * t.speed[k] * t.weight / weight_on[t.cpu]
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
        busy = [1.0 if w > 0 else 0.0 for w in weight_on]
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
                dt = min(dt, t.remaining / t.rate)
        now = self.env.now
        self._due_s = now + dt
        if dt < math.inf and self._due_s < self._timer_s:
            self._set_timer(max(dt, 0.0))

    def _set_timer(self, dt_s: float) -> None:
        at = self._timer_s = self.env.now + dt_s
        self.env.timeout(dt_s).callbacks.append(lambda _ev: self._on_timer(at))

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
