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
A change is a thread starting or finishing work, an affinity or frequency change.
At a change the scheduler (1) advances work and the platform's energy/thermal integrals to
now, (2) re-places threads on cores, (3) recomputes rates and (4) arms one timer for the next
completion. Changes at the same instant are coalesced into one replan, so an event is only
ever a change, never a tick.

Weights follow CFS (nice 0 = 1024, each nice step ~1.25x). Placement is pluggable: the
default, `WakeupPlacement`, behaves like Linux (running threads stay; waking threads take idle
cores, biggest first; idle cores pull threads that would run faster); `place_for_throughput`
re-places every unpinned thread at every change where it gets most throughput. Pinned
threads stay where they are pinned.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import simpy

from swansim.hw.platform import Platform

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
# A thread is done when less than this much of its time at its current rate is left.
_DONE_EPS_S = 1e-12


def nice_to_weight(nice: int) -> int:
    if not -20 <= nice <= 19:
        raise ValueError(f"nice must be in -20..19, got {nice}")
    return NICE_TO_WEIGHT[nice + 20]


class Thread:
    """A schedulable thread: affinity, weight, and at most one piece of work at a time."""

    __slots__ = ("tid", "name", "group", "weight", "affinity", "cpu", "remaining", "speed",
                 "bytes_per_unit", "misses_per_unit", "done", "rate", "cpu_time_s", "spinning")

    def __init__(self, tid: int, name: str, group: str, weight: float, affinity: tuple[int, ...]):
        self.tid, self.name, self.group, self.weight, self.affinity = tid, name, group, weight, affinity
        self.cpu: int | None = None          # core it runs on while runnable
        self.remaining = 0.0                 # work units left; 0 when sleeping
        self.speed: Sequence[float] = ()     # work units per cycle, per cluster index
        self.bytes_per_unit = 0.0            # DRAM bytes moved per work unit
        self.misses_per_unit = 0.0           # latency-exposed DRAM misses per work unit
        self.done: simpy.Event | None = None
        self.rate = 0.0                      # units/s at present
        self.cpu_time_s = 0.0                # time runnable on a core (incl. shared time)
        self.spinning = False                # busy-waiting: occupies its core, no progress

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
    cap = sched.core_capacity()
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

    Capacity is ``fmax x scalar_ipc`` (capacity_orig), not the current clock.
    """

    def __init__(self):
        self._running: set[int] = set()          # tids runnable in the previous plan
        self._prev_load: list[float] | None = None  # weight per core in the previous plan

    def __call__(self, sched, threads: list) -> None:
        p = sched.platform
        n = p.n_cpus
        cap = [p.clusters[p.cluster_of_cpu[c]].fmax_mhz * p.clusters[p.cluster_of_cpu[c]].scalar_ipc
               for c in range(n)]
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
        for t in waking:
            idle = [c for c in t.affinity if seen_count[c] == 0]
            if idle:
                best = max(idle, key=lambda c: (cap[c], c == t.cpu, -c))
            else:
                best = max(t.affinity, key=lambda c: (cap[c] * t.weight / (seen_load[c] + t.weight), c == t.cpu, -c))
            t.cpu = best
            for arr_load, arr_count in ((load, count), (seen_load, seen_count)):
                arr_load[best] += t.weight
                arr_count[best] += 1
        self._idle_balance(threads, cap, load, count, seen_count)
        self._running = {t.tid for t in threads}
        self._prev_load = load

    @staticmethod
    def _idle_balance(threads, cap, load, count, seen_count) -> None:
        movable = [t for t in threads if len(t.affinity) > 1]
        while True:
            best = None
            for c in sorted((c for c in range(len(cap)) if seen_count[c] == 0), key=lambda c: (-cap[c], c)):
                for t in movable:
                    if c not in t.affinity:
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


# A move must gain at least this share of throughput: no ping-pong between equal cores.
_GAIN = 1.0 + 1e-9
# Placement strategies by name; each call gives a fresh (possibly stateful) placement.
PLACEMENTS: dict[str, Callable[[], Placement]] = {
    "wakeup": lambda: WakeupPlacement(),
    "throughput": lambda: place_for_throughput,
}


class Scheduler:
    """Fluid CFS over a platform's cores, driven by a SimPy environment."""

    def __init__(self, env: simpy.Environment, platform: Platform, placement: Placement | None = None):
        self.env = env
        self.platform = platform
        self.placement = placement or WakeupPlacement()
        self.threads: list[Thread] = []
        self._runnable: list[Thread] = []
        self.busy_s = [0.0] * platform.n_cpus   # per-core busy time, for governors and stats
        self._busy_now = [0.0] * platform.n_cpus
        self._time_s = env.now
        self._replan_pending = False
        self._timer_gen = 0
        self.n_replans = 0
        self.mem_rho = 0.0      # memory-controller load seen by latency-exposed threads (last replan)
        # Called with no arguments at the end of every replan (cpufreq governors listen here).
        self.on_replan: list[Callable[[], None]] = []

    # -- threads ------------------------------------------------------------------------------

    def spawn(self, name: str, affinity: Iterable[int] | None = None, nice: int = 0, group: str = "") -> Thread:
        cpus = tuple(sorted(set(affinity))) if affinity is not None else tuple(range(self.platform.n_cpus))
        if not cpus or any(not 0 <= c < self.platform.n_cpus for c in cpus):
            raise ValueError(f"affinity {cpus} is not a set of this SoC's cpus 0..{self.platform.n_cpus - 1}")
        t = Thread(len(self.threads), name, group, nice_to_weight(nice), cpus)
        self.threads.append(t)
        return t

    def run(self, t: Thread, amount: float, speed: Sequence[float], bytes_per_unit: float = 0.0,
            misses_per_unit: float = 0.0) -> simpy.Event:
        """Give ``t`` ``amount`` units of work; the event fires when it is done.

        ``misses_per_unit``: DRAM misses per unit whose latency the thread waits for (not
        overlapped); they make it slower as the memory controller's load rises (module doc).
        """
        if t.runnable:
            raise RuntimeError(f"{t.name} is already busy")
        ev = self.env.event()
        if amount <= 0:
            ev.succeed()
            return ev
        self._touch()
        t.remaining, t.speed, t.bytes_per_unit, t.done = amount, speed, bytes_per_unit, ev
        t.misses_per_unit = misses_per_unit
        self._runnable.append(t)
        return ev

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
        t.spinning, t.done, t.remaining, t.rate = False, None, 0.0, 0.0
        self._runnable.remove(t)

    def set_affinity(self, t: Thread, cpus: Iterable[int]) -> None:
        cpus = tuple(sorted(set(cpus)))
        if not cpus or any(not 0 <= c < self.platform.n_cpus for c in cpus):
            raise ValueError(f"affinity {cpus} is not a set of this SoC's cpus")
        self._touch()
        t.affinity = cpus

    def set_freq(self, cluster: int, freq_mhz: float) -> None:
        """A frequency-domain change: takes effect now."""
        if self.platform.freq_mhz[cluster] == freq_mhz:
            return
        self._touch()
        self.platform.set_freq(cluster, freq_mhz)

    # -- readings -----------------------------------------------------------------------------

    def core_capacity(self) -> list[float]:
        """Scalar throughput of each core now (instructions/s), for placement decisions."""
        p = self.platform
        return [p.freq_mhz[p.cluster_of_cpu[c]] * p.clusters[p.cluster_of_cpu[c]].scalar_ipc
                for c in range(p.n_cpus)]

    @property
    def busy_now(self) -> list[float]:
        """Per core, 1.0 while it has a runnable thread in the current plan, else 0.0 (read-only)."""
        return self._busy_now

    def sync(self) -> None:
        """Bring work progress, busy time, energy and temperatures up to now."""
        now = self.env.now
        dt = now - self._time_s
        if dt > 0.0:
            for t in self._runnable:
                t.remaining -= t.rate * dt
                t.cpu_time_s += dt
            busy = self.busy_s
            for c, b in enumerate(self._busy_now):
                busy[c] += b * dt
            self._time_s = now
        self.platform.advance(now)

    # -- machinery ----------------------------------------------------------------------------

    def _touch(self) -> None:
        """Something changes now: settle the past and replan once this instant is over."""
        self.sync()
        if not self._replan_pending:
            self._replan_pending = True
            self.env.timeout(0).callbacks.append(self._replan)

    def _replan(self, _event=None) -> None:
        self._replan_pending = False
        self.sync()
        self.n_replans += 1
        # Finish whatever has (numerically) completed before sharing out the cores again.
        finished = [t for t in self._runnable if t.done is not None and t.remaining <= t.rate * _DONE_EPS_S]
        for t in finished:
            self._runnable.remove(t)
            ev, t.done, t.remaining, t.rate = t.done, None, 0.0, 0.0
            ev.succeed()
        runnable = self._runnable
        p = self.platform
        self.placement(self, runnable)
        weight_on = [0.0] * p.n_cpus
        for t in runnable:
            weight_on[t.cpu] += t.weight
        dram_bps = 0.0
        exposed = []
        for t in runnable:
            if t.spinning:
                t.rate = 0.0
                continue
            k = p.cluster_of_cpu[t.cpu]
            t.rate = p.freq_mhz[k] * 1e6 * t.speed[k] * t.weight / weight_on[t.cpu]
            if t.misses_per_unit > 0.0 and t.rate > 0.0:
                exposed.append(t)
            else:
                dram_bps += t.rate * t.bytes_per_unit
        bw = p.spec.soc.dram_bandwidth_gbps * 1e9
        self.mem_rho = 0.0
        if exposed:
            dram_bps = self._queue(exposed, dram_bps, bw, p.spec.soc.dram_latency_ns * 1e-9)
        if dram_bps > bw:
            # Memory-bound: every thread that moves memory slows by the same factor (its core
            # stays busy, stalled), so traffic equals the bandwidth.
            scale = bw / dram_bps
            for t in runnable:
                if t.bytes_per_unit > 0.0:
                    t.rate *= scale
            dram_bps = bw
        self._busy_now = [1.0 if w > 0 else 0.0 for w in weight_on]
        p.set_activity(list(self._busy_now), dram_bps)
        self._arm_timer()
        for hook in self.on_replan:
            hook()

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
        dt = math.inf
        for t in self._runnable:
            if t.rate > 0.0:
                dt = min(dt, t.remaining / t.rate)
        self._timer_gen += 1
        if dt < math.inf:
            gen = self._timer_gen
            self.env.timeout(max(dt, 0.0)).callbacks.append(lambda ev: self._on_timer(gen))

    def _on_timer(self, gen: int) -> None:
        if gen == self._timer_gen and not self._replan_pending:
            self._replan()
