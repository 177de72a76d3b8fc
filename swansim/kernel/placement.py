"""Thread placement: which core each runnable thread runs on, the scheduler's step (2) at a change.

A placement is a callable ``placement(sched, threads)`` (`Placement`): at every replan the
scheduler (kernel.sched.Scheduler) hands it itself and its runnable threads, and it sets each
thread's ``cpu`` within the thread's affinity; it may keep state from one plan to the next (who
was running, PELT utilisation, WALT demand). CFS then shares each core among the threads placed
on it. Placement is pluggable because it is where kernels differ most: mainline Linux, EAS and
the vendor kernels send a waking thread to different cores, and that decides whether a training
thread and the phone owner's app share a big core - so a device picks one by name.

The placements by name (`PLACEMENTS`): `wakeup` (`WakeupPlacement`: running threads stay; waking
threads take idle cores, biggest first; idle cores pull threads that would run faster), `eas`
(the same with EAS's capacity fit), `walt`, `walt-nocorectl` and `walt-prevcpu`
(kernel.walt.WaltPlacement: the vendor kernels' windowed demand, up/downmigrate margins,
schedtune boost and core_ctl, from the phone profile's `[kernel]` table), `throughput` (greedy
re-placement). A device asks for "auto":
`walt` where its profile has a `[kernel]` table, else `wakeup`. Pinned threads stay where they
are pinned.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

# Imports point one way: kernel.placement -> kernel.sched (the CFS scheduler, `Thread` and its
# constants such as PELT_HALF_LIFE_S) and kernel.placement -> kernel.walt (WaltPlacement, which
# needs kernel.sched only for type checking). kernel.sched imports no placement at module level:
# its one reference, the default `WakeupPlacement()` of Scheduler.__init__, is imported there,
# when a scheduler is made.
from swansim.kernel.sched import PELT_HALF_LIFE_S, Thread
from swansim.kernel.walt import WaltPlacement
from swansim.registry import Registry

if TYPE_CHECKING:
    from swansim.kernel.sched import Scheduler


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
# Placement strategies by name; each call gives a fresh (possibly stateful) placement for a
# device spec. "walt" needs a profile with a `[kernel]` table; "walt-nocorectl" is the same
# with core_ctl off (every CPU online); "walt-prevcpu" with each kernel's own fallback for a task
# that fits no CPU (kernel.walt.WaltPlacement._fallback), the balance of busy CPUs
# (WaltPlacement._busy_pass) and idle CPUs balancing in the kernels' order
# (WaltPlacement.idle_balance).
PLACEMENTS: Registry[Callable[..., Placement]] = Registry("placement")
PLACEMENTS.register("wakeup", lambda spec: WakeupPlacement())
PLACEMENTS.register("eas", lambda spec: CapacityAwarePlacement())
PLACEMENTS.register("throughput", lambda spec: place_for_throughput)
PLACEMENTS.register("walt", lambda spec: WaltPlacement(spec.kernel))
PLACEMENTS.register("walt-nocorectl", lambda spec: WaltPlacement(spec.kernel, core_ctl=False))
PLACEMENTS.register("walt-prevcpu", lambda spec: WaltPlacement(spec.kernel, previous_cpu=True, busy_balance=True,
                                                                kernel_idle_balance=True))
# "auto": what the phone's kernel does - the profile's flavour where it names one, else `wakeup`.
AUTO = "auto"


def resolve_placement(name: str, spec) -> str:
    """The placement a device runs: ``name``, with "auto" resolved from the profile."""
    if name == AUTO:
        return "walt" if getattr(spec, "kernel", None) is not None else "wakeup"
    return name
