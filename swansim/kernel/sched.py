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
ran all the time when it has the core to itself; a core shared with such work is shared
max-min by weight over each thread's busy demand instead of in turns, since CFS dequeues a
sleeper and gives its gaps to the co-runners (`Scheduler._sleeper_shares`).

A change is a thread starting or finishing work, an affinity or frequency change, a turn's end.
At a change the scheduler (1) advances work and the platform's energy/thermal integrals to
now, (2) re-places threads on cores, (3) recomputes rates and (4) arms one timer for the next
completion. Changes at the same instant are coalesced into one replan that runs when the
instant is over (`Environment.at_instant_end`, no zero-delay event), so an event is only ever
a change, never a tick. Work may end in a callback instead of an event (``run(on_done=...)``):
the callback runs inside the replan, so a thread that finishes and at once starts its next
piece (or spins at a barrier) costs one replan, not two.

Weights follow CFS (nice 0 = 1024, each nice step ~1.25x). Placement (step 2) is pluggable: see kernel.placement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import simpy

from swansim.hw.platform import Platform
from swansim.hw.profile import CACHE_LINE_BYTES

if TYPE_CHECKING:   # kernel.placement imports this module; this one needs it only lazily (Scheduler)
    from swansim.kernel.engine import Environment
    from swansim.kernel.placement import Placement

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
    # ``cgroup``: its Android group (schedtune attributes, kernel.walt.WaltPlacement; "" = root);
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


class Scheduler:
    """CFS over a platform's cores, driven by a SimPy environment."""

    def __init__(self, env: Environment, platform: Platform, placement: Placement | None = None):
        if not hasattr(env, "at_instant_end"):
            raise TypeError("the scheduler needs swansim.kernel.engine.Environment (it coalesces a "
                            "instant's changes at the instant's end)")
        self.env = env
        self.platform = platform
        # the default placement, imported here: kernel.placement imports this module (see its imports)
        from swansim.kernel.placement import WakeupPlacement
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
        # The uncore powers down once every core has been idle this long (`_uncore_idle`).
        self._uncore_sleep_s = platform.spec.soc.uncore_sleep_us * 1e-6
        self._uncore_busy = False       # was any core busy at the last share-out?
        self._uncore_idle_since = 0.0   # when the present hold began
        self._uncore_timer = False      # is a power-down check pending?
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
    def replaying(self) -> bool:
        """Busy shares held (`hold_busy`) and no thread runnable: nothing on the phone runs at
        the clocks, so nothing reads them (cpufreq.Schedutil defers its timers)."""
        return self._held_busy is not None and not self._runnable

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
        # A CPU left idle balances once the wake-ups have taken their CPUs (schedule() ->
        # idle_balance): a placement that never moves a running task needs to know who runs
        # (its ``idle_balance`` hook; None or absent where it balances while placing).
        balance = getattr(self.placement, "idle_balance", None)
        if balance is not None and balance(self):
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
        sleepers = False
        for t in runnable:
            busy[t.cpu] = 1.0
            if t.idle_s_per_unit > 0.0:
                sleepers = True
        dram_bps = 0.0
        exposed = []
        freq, cl = p.freq_mhz, p.cluster_of_cpu
        gaps = False
        shares = self._sleeper_shares(runnable) if sleepers else None
        for t in runnable:
            sh = shares.get(t.tid) if shares else None
            if t.spinning or (sh is None and curr[t.cpu] is not t):
                t.rate = 0.0
                continue
            k = cl[t.cpu]
            t.rate = freq[k] * 1e6 * t.speed[k]
            if sh is not None:   # its share of the core while it runs
                t.rate *= sh
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
        self._uncore_idle(busy)
        p.set_activity(busy, dram_bps)
        self._arm_timer()

    def _uncore_idle(self, busy: list[float]) -> None:
        """When the last busy core goes idle, the uncore stays up for the SoC's `uncore_sleep_us`:
        the cpuidle governor takes the cluster level that powers it down (Qualcomm's llcc-off) only
        for an idle stretch predicted at least that long (its minimum residency), so the
        sub-millisecond gaps of a team's wake-ups and barriers never reach it. One timer at a
        time: a hold that a busy spell cut short leaves it to find the next hold's end."""
        any_busy = max(busy) > 0.0
        was_busy, self._uncore_busy = self._uncore_busy, any_busy
        p = self.platform
        if any_busy:
            if p.uncore_hold:
                p.set_uncore_hold(False)
        elif was_busy:
            self._uncore_idle_since = self.env.now
            p.set_uncore_hold(True)
            if not self._uncore_timer:
                self._uncore_timer = True
                self.env.call_in(self._uncore_sleep_s, self._uncore_down)

    def _uncore_down(self) -> None:
        self._uncore_timer = False
        if not self.platform.uncore_hold:
            return
        left = self._uncore_idle_since + self._uncore_sleep_s - self.env.now
        if left > _DONE_EPS_S:   # the hold began again after this timer was set
            self._uncore_timer = True
            self.env.call_in(left, self._uncore_down)
            return
        self.sync()
        self.platform.set_uncore_hold(False)

    def _sleeper_shares(self, runnable: list[Thread]) -> dict[int, float]:
        """On each core shared with work that sleeps between short calls (``idle_s_per_unit``):
        every thread's speed while it runs, as a share of the core. The core is shared max-min
        by weight over the threads' busy demands - a sleeper's its duty when it runs alone, 1
        for the others (CFS gives a sleeper's gaps to its co-runners, and the sleeper, behind on
        vruntime, the core back when it wakes) - and a sleeper granted share x of the core for
        demand d runs at x / d of its speed while it works."""
        freq, cl = self.platform.freq_mhz, self.platform.cluster_of_cpu
        on: dict[int, list[Thread]] = {}
        for t in runnable:
            on.setdefault(t.cpu, []).append(t)
        out: dict[int, float] = {}
        for c, ts in on.items():
            if len(ts) < 2 or not any(t.idle_s_per_unit > 0.0 for t in ts):
                continue
            k = cl[c]
            demand = {}
            for t in ts:
                if t.idle_s_per_unit > 0.0:
                    r = 1.0 / (1.0 / (freq[k] * 1e6 * t.speed[k]) + t.idle_s_per_unit)
                    demand[t.tid] = 1.0 - t.idle_s_per_unit * r
                else:
                    demand[t.tid] = 1.0
            left, pending, got = 1.0, list(ts), {}
            while pending:   # water-filling: who asks less than its weight's share gets it
                w = sum(t.weight for t in pending)
                capped = [t for t in pending if demand[t.tid] <= left * t.weight / w]
                if not capped:
                    for t in pending:
                        got[t.tid] = left * t.weight / w
                    break
                for t in capped:
                    got[t.tid] = demand[t.tid]
                    left -= demand[t.tid]
                    pending.remove(t)
            for t in ts:
                out[t.tid] = got[t.tid] / demand[t.tid] if t.idle_s_per_unit > 0.0 else got[t.tid]
        return out

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
