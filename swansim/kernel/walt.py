"""WALT task demand, core_ctl, and the placement Qualcomm's Android kernels make from them.

**Task demand** (msm kernel/sched/walt.c, update_task_demand/update_history): time is cut into
windows of W (20 ms), aligned for every CPU. A task's time on a CPU - running or waiting
runnable there (SCHED_ACCOUNT_WAIT_TIME 1) - is scaled by that CPU's clock and capacity
relative to the biggest CPU at its top clock and summed per window; when a window closes its
sum enters the task's history of the last N windows (5); windows in which the task did not
run are dropped ("since empty windows are dropped, it is not necessary to account those").
The demand is max(last closed window, mean of the history), a share of a window: a task busy
all the time on an A55 at its top clock has the A55's capacity as demand (~0.25-0.3). A new
task starts with every entry at ``init_task_load_pct`` (15%).

A task's scaled rate is constant between two changes of its state (the scheduler's
plans), so `WaltDemand.advance` brings a task's windows up to date in closed form - no tick.

**core_ctl** (msm kernel/sched/core_ctl.c): at every window rollover, per cluster with core_ctl
tunables, the CPUs whose frequency-scaled busy share of the window is above ``busy_up_pct`` are
needed (they stay needed until below ``busy_down_pct``); the task counts (averaged over the
window, so work interleaved with sleep counts at its duty) may ask for more
(``task_thres``, the previous cluster's overflow ``nr_prev_assist_thresh``, one more CPU when
more tasks than needed CPUs ran); the need is clamped to ``min_cpus``..all; CPUs come back at
once when the need rises and are isolated, idle ones first, only after the need has stayed
lower for ``offline_delay_ms``. An isolated CPU takes no new unpinned task.

**Placement** (`WaltPlacement`, placements "walt" and "walt-nocorectl" of
kernel.placement.PLACEMENTS) lives here too, next to the demand and core_ctl it decides from:
EAS's find_best_target over WALT demand, with the phone profile's ``[kernel]`` tunables.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from swansim.hw.profile import CoreCtlCluster

if TYPE_CHECKING:   # types only: kernel.sched never imports this module, kernel.placement does
    from swansim.kernel.sched import Thread

# core_ctl's per-window task counts round an average up from 0.85 (kernel/sched/sched_avg.c
# NR_THRESHOLD_PCT 15: "the task ran at least 85% in the last window").
NR_THRESHOLD = 0.15
# core_ctl.c MAX_NR_THRESHOLD: more tasks than this on one CPU in a window asks for one more CPU.
MAX_NR_THRESHOLD = 4
# A CPU is over-utilized when its utilisation (WALT: the summed demand of its runnable tasks)
# exceeds capacity x 1024 / sched_capacity_margin_up[cpu] (msm-4.14/4.19 fair.c
# __cpu_overutilized); the init scripts' sched_upmigrate sets that margin for every cluster but
# the biggest, which keeps the kernel's 1078 (~95%).
DEFAULT_MARGIN_UP_SHARE = 1024.0 / 1078.0
# The periodic balance of busy CPUs (`WaltPlacement._busy_pass`): a sched domain's balance
# interval is its CPU count in ms (sd_init: min_interval = balance_interval = sd_weight),
# stretched by busy_factor 32 while the balancing CPU is busy (get_sd_balance_interval), and a
# domain's busiest group must carry imbalance_pct of the local group's load per capacity before
# anything moves (find_busiest_group): 117% in a cluster's domain (SD_SHARE_PKG_RESOURCES), 125%
# across clusters. sd_init in Android 4.9 kernel/sched/core.c and msm-4.14/4.19
# kernel/sched/topology.c; fair.c rebalance_domains, load_balance, get_sd_balance_interval
# (msm-4.14: 0wnerDied/kernel_sm8150_oneplus@00bb1989).
BUSY_FACTOR = 32
IMBALANCE_PCT_CLUSTER = 117
IMBALANCE_PCT_ALL = 125
# Newly idle balancing (`WaltPlacement._idle_balance`) walks the domains only while the CPU's
# average idle time covers what balancing them costs: idle_balance breaks at `this_rq->avg_idle
# < curr_cost + sd->max_newidle_lb_cost`. avg_idle is a 1/8 moving average of the CPU's idle
# periods (ttwu_do_wakeup, update_avg), starting at and capped by twice sched_migration_cost
# (0.5 ms): sched_init, and max_idle_balance_cost = max(sysctl_sched_migration_cost, ...) in
# rebalance_domains (Android 4.9 kernel/sched/core.c, fair.c).
MIGRATION_COST_S = 0.5e-3
# Assumption: each domain's newidle balance costs what Arm's Juno board (big.LITTLE, arm64) was
# seen to need: cluster domain 14.907 us, all CPUs 11.858 us (sched_domain max_newidle_lb_cost,
# quoted on linux-kernel 2022-05-20, "Re: [PATCH v2 3/8] arch_topology: Set cluster identifier
# in each core/thread from /cpu-map"); no phone's figure was found.
NEWIDLE_COST_S = (14.907e-6, 11.858e-6)


def _on_cpu_share(t: Thread) -> float:
    """The share of its runnable time ``t`` is on its CPU: its duty for work interleaved with
    sleep (kernel.sched), else all of it - what WALT's demand and sched_avg's counts see."""
    return t.duty if t.idle_s_per_unit > 0.0 else 1.0


class TaskDemand:
    """One task's WALT state: the window its sum belongs to, the sum, the closed windows, and
    when it last ran (``ran``: the end of its last runnable stretch brought up to date);
    ``demand`` is kept with the history it derives from (it changes only when a window closes)."""

    __slots__ = ("t", "window", "sum", "hist", "ran", "demand")

    def __init__(self, t: float, window: int, hist: list[float], demand: float):
        self.t, self.window, self.sum, self.hist, self.ran = t, window, 0.0, hist, t
        self.demand = demand


class WaltDemand:
    """Windowed demand of every task, advanced lazily between the scheduler's plans."""

    def __init__(self, window_s: float, hist_size: int, init_pct: float):
        self.window_s, self.hist_size = window_s, hist_size
        self.init = init_pct / 100.0 * window_s

    def window_of(self, t: float) -> int:
        return int(t / self.window_s + 1e-9)   # simulated time is never negative: int() floors

    def new(self, now: float) -> TaskDemand:
        hist = [self.init] * self.hist_size
        return TaskDemand(now, self.window_of(now), hist, self._demand(hist))

    def advance(self, d: TaskDemand, now: float, rate: float) -> None:
        """Bring ``d`` to ``now``; since its last update it ran at ``rate`` (scaled seconds per
        second: the share of the biggest CPU at its top clock it used, 0 while asleep)."""
        if now <= d.t:
            return
        if rate > 0.0:
            d.ran = now
        w = self.window_of(now)
        if w == d.window:
            d.sum += rate * (now - d.t)
        else:
            W = self.window_s
            self._push(d, d.sum + rate * ((d.window + 1) * W - d.t))
            full = w - d.window - 1
            if rate > 0.0:
                for _ in range(min(full, self.hist_size)):
                    self._push(d, rate * W)
            d.window, d.sum = w, rate * (now - w * W)
        d.t = now

    def _push(self, d: TaskDemand, runtime: float) -> None:
        if runtime <= 0.0:
            return   # update_history: windows without runtime are ignored
        d.hist.insert(0, runtime)
        del d.hist[self.hist_size:]
        d.demand = self._demand(d.hist)

    def _demand(self, hist: list[float]) -> float:
        """WINDOW_STATS_MAX_RECENT_AVG: max(last closed window, mean of the history), as a
        share of one window on the biggest CPU at its top clock (kept in `TaskDemand.demand`)."""
        return max(hist[0], sum(hist) / len(hist)) / self.window_s


@dataclass
class _Cluster:
    """core_ctl's state of one cluster (cpus ranked with the SoC's capacity order)."""

    index: int
    cpus: tuple[int, ...]
    params: CoreCtlCluster | None
    need: int = 0
    need_ts: float = 0.0
    lru: list[int] = field(default_factory=list)
    busy: dict[int, bool] = field(default_factory=dict)
    steady: bool = False   # the last rollover found need, active cores and core_ctl's need equal


class CoreCtl:
    """core_ctl over capacity-ranked clusters (module doc); ``isolated`` is the current set."""

    def __init__(self, clusters: Sequence[tuple[int, ...]], params: Sequence[CoreCtlCluster | None]):
        self.clusters = [_Cluster(i, tuple(c), p, need=len(c), lru=list(c), busy={x: False for x in c})
                         for i, (c, p) in enumerate(zip(clusters, params))]
        self.isolated: set[int] = set()
        self.n_changes = 0
        self.enabled = any(c.params is not None for c in self.clusters)

    def active(self, c: _Cluster) -> int:
        return sum(1 for x in c.cpus if x not in self.isolated)

    @property
    def steady(self) -> bool:
        """At the last rollover every cluster kept its need, its cores and nothing counting down:
        another rollover with the same statistics would only move its timestamp."""
        return all(c.params is None or c.steady for c in self.clusters)

    def evaluate(self, now_s: float, busy_pct: Sequence[float], nr: Sequence[int], nr_misfit: Sequence[int],
                 nr_max: Sequence[int]) -> bool:
        """One window rollover with the window's per-CPU statistics; True if isolation changed."""
        changed = False
        for c in self.clusters:
            if c.params is not None:
                changed |= self._eval(c, now_s, busy_pct, nr, nr_misfit, nr_max)
        return changed

    def _eval(self, c: _Cluster, now_s, busy_pct, nr, nr_misfit, nr_max) -> bool:
        p = c.params
        n = len(c.cpus)
        for x in c.lru:
            if busy_pct[x] >= p.busy_up_pct:
                c.busy[x] = True
            elif busy_pct[x] < p.busy_down_pct:
                c.busy[x] = False
        need = sum(c.busy.values())
        # apply_task_need: the tasks on this cluster and bigger ones, plus the previous one's misfits
        prev = self.clusters[c.index - 1] if c.index > 0 else None
        nrrun = sum(nr[x] for k in self.clusters[c.index:] for x in k.cpus)
        if prev is not None:
            nrrun += sum(nr_misfit[x] for x in prev.cpus)
        if p.task_thres is not None and nrrun >= p.task_thres:
            need = n
        else:
            if prev is not None and not any(x in self.isolated for x in prev.cpus):
                pp = self.clusters[prev.index - 1] if prev.index > 0 else None
                want = sum(nr[x] for x in prev.cpus) + (sum(nr_misfit[x] for x in pp.cpus) if pp else 0)
                assist = max(0, want - self.active(prev))
                if p.nr_prev_assist_thresh is not None and assist >= p.nr_prev_assist_thresh:
                    need += assist
            if nrrun > need:
                need += 1
            if max(nr_max[x] for x in c.cpus) > MAX_NR_THRESHOLD:
                need += 1
        new = min(max(p.min_cpus, need), n)
        active = self.active(c)
        c.steady = new == c.need == active
        if new > active:
            apply = True
        else:
            if new == c.need == active:
                c.need_ts = now_s
                return False
            apply = now_s - c.need_ts >= p.offline_delay_ms / 1000.0 - 1e-9
        if not apply:
            return False
        c.need_ts, c.need = now_s, new
        return self._adjust(c, new)

    def _adjust(self, c: _Cluster, need: int) -> bool:
        """Isolate idle CPUs (least recently changed first) or bring isolated ones back."""
        changed = False
        for x in list(c.lru):
            active = self.active(c)
            if active == need:
                break
            if active > need and x not in self.isolated and not c.busy[x]:
                self.isolated.add(x)
            elif active < need and x in self.isolated:
                self.isolated.discard(x)
            else:
                continue
            c.lru.remove(x)
            c.lru.append(x)
            changed = True
        if changed:
            self.n_changes += 1
        return changed


class WindowStats:
    """Per-CPU statistics of the current window under piecewise-constant plans: the
    frequency-scaled busy time (core_ctl's busy %, sched_get_cpu_util), the time-averaged number
    of runnable and of misfit tasks and the most runnable tasks seen (sched_get_nr_running_avg).

    Under one plan every full window has the same statistics. Once a full window under the
    present plan has closed and left core_ctl steady (`CoreCtl.steady`), every later rollover
    would do what that one did, at its own end: the windows up to now are closed at once, the
    last of them with those statistics (its end is the timestamp core_ctl keeps)."""

    def __init__(self, n: int, window_s: float):
        self.n, self.W = n, window_s
        self.window, self.t = 0, None
        self.busy, self.nr, self.misfit = [0.0] * n, [0.0] * n, [0.0] * n
        self.peak = [0] * n        # runnable tasks at the plan's peaks (nr_max)
        self._plan_s = -math.inf   # when the present plan began
        self._reset()

    def _reset(self) -> None:
        n = self.n
        self.acc_busy, self.acc_nr, self.acc_mis = [0.0] * n, [0.0] * n, [0.0] * n
        self.nr_max = list(self.peak)

    def set_plan(self, now: float, busy: list[float], nr: list[float], misfit: list[float],
                 peak: list[int]) -> None:
        """From ``now`` (windows closed up to it), the plan's per-CPU busy share (scaled by
        f/f_max), time-averaged runnable and misfit counts, and runnable tasks at its peaks."""
        if now > self.t:
            self._add(now - self.t)
            self.t = now
        self._plan_s = now
        self.busy, self.nr, self.misfit, self.peak = busy, nr, misfit, peak
        self.nr_max = [max(a, b) for a, b in zip(self.nr_max, peak)]

    def _add(self, dt: float) -> None:
        for c in range(self.n):
            self.acc_busy[c] += self.busy[c] * dt
            self.acc_nr[c] += self.nr[c] * dt
            self.acc_mis[c] += self.misfit[c] * dt

    def advance(self, now: float, close: Callable[..., bool], steady: Callable[[], bool]) -> bool:
        """Accumulate up to ``now``, calling ``close(end_s, busy_pct, nr, nr_misfit, nr_max)`` for
        every window that ends on the way (class doc); True if any call returned True."""
        W = self.W
        if self.t is None:
            self.t, self.window = now, int(math.floor(now / W + 1e-9))
            self._plan_s = now   # the first window is counted from now: not a full one
            return False
        changed = False
        while True:
            end = (self.window + 1) * W
            if now < end - 1e-12:
                return changed   # the plan's share of this window is added when it ends or changes
            full = self._plan_s <= end - W   # the whole window under the present plan
            if full:   # its statistics are the plan's own, not sums that differ in the last bits
                stats = ([min(100.0, 100.0 * b) for b in self.busy], [int(x + NR_THRESHOLD) for x in self.nr],
                         [int(x + NR_THRESHOLD) for x in self.misfit], self.nr_max)
            else:
                self._add(end - self.t)
                stats = ([min(100.0, 100.0 * b / W) for b in self.acc_busy],
                         [int(x / W + NR_THRESHOLD) for x in self.acc_nr],
                         [int(x / W + NR_THRESHOLD) for x in self.acc_mis], self.nr_max)
            changed |= close(end, *stats)
            self._reset()
            self.window += 1
            self.t = end
            if full and steady():
                last = int(math.floor(now / W))   # the last window ending by now (as the loop tests it)
                while now < (last + 1) * W - 1e-12:
                    last -= 1
                if last >= self.window:
                    changed |= close((last + 1) * W, *stats)
                    self.window, self.t = last + 1, (last + 1) * W


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
      CPU where it fits (newidle balance) and, when no task moved that way, to any idle CPU
      (the balancer's retry without LBF_IGNORE_BIG_TASKS, `_balance`): OpenBLAS's spinning
      workers two to a big CPU spread onto idle little CPUs. While no CPU is over-utilized
      (its tasks' demand above capacity x 1024/sched_capacity_margin_up, i.e. its upmigrate
      share) the energy-aware balancer only lets a CPU pull from one of no less capacity
      (find_busiest_group's energy-aware bail-out, read in msm-4.14 Planet-X/
      android_kernel_oneplus_sm8150@2498885a, msm-4.19 PixelExperiencePlus/
      android_kernel_oneplus_sm8250@02a9276a and Android 4.9 PixelOS-Bluecross/
      kernel_google_crosshatch@79dc4403, which orders by cpu_max_power_cost): an idle gold CPU
      does not take a light task off a shared little CPU; the wake-up placement decides. The
      balance runs until nothing moves, so a plan with the same threads on the same cores in
      the same window is already placed (a thread that ends its work and spins at a barrier
      keeps its CPU) and is not placed again.
    - A waking task that fits no CPU (every CPU's utilisation plus its own above capacity, as
      when OpenBLAS's spinning workers fill the phone) goes to the CPU with the most spare
      capacity, even none. That is msm's rule where some spare is positive; where none is, and
      on Android 4.9 always, the kernels keep the task's previous CPU (`_fallback`, placement
      "walt-prevcpu", experiments/fidelity_sensitivity.py's ``fallback=previous``). There, with
      no CPU idle, only the periodic balance of busy CPUs moves a queued task (`_busy_pass`),
      so "walt-prevcpu" runs it too; on Android 4.9 a waking task takes the classic path while
      the phone is over-utilized (`_idle_sibling`); and idle CPUs balance in the kernels' order
      (`_idle_balance` in place of `_balance`: never the task running on a CPU, the most recently
      enqueued first, only while a newly idle CPU's average idle time covers the cost, and a
      running misfit pushed to an idle bigger CPU). The kernels' own rules are not the default:
      on the Pixel 3 a batch under them has no cost of its own. Once the default's team has
      settled no balance moves it (a CPU holding two tasks does not give one to a CPU holding
      one: `_busy_pass`), and where it settles depends on what the phone was doing when the job
      began - ResNet-34's default on an uncapped Pixel 3 runs 0.50 s a batch from an idle
      phone, 0.83 s if the big cores are busy as it starts (`runs.placement.
      start_state_latency_s`; the reference: within 0.3%; msm's rules on the SD855/SD865
      phones: within 0.8%) - which the batch model's keys do not carry. (The runtime, fitted
      under the reference, also makes pinned teams slower under these rules: a pinned master
      sleeps briefly at the joins, its CPU takes a queued OpenBLAS spinner and the master waits
      out the spinner's CFS turn - ResNet-34 on 4567 0.60 s a batch against 0.26 s; refitted
      under these rules, 0.48 s, Fig. 2a's point within 3%.) Under the reference's balance,
      which moved whichever task had the most demand, running or not, the depthwise defaults'
      batches alternated between placements at fixed caps (ShuffleNetV2's 4.2 or 5.3 s) and
      six warm batches fast-forwarded 7.6% (MobileNetV2) and 11.6% (ShuffleNetV2) late; in
      the kernels' order they do not alternate (1.1% and 3.0%; the reference: 1.4% and 5.2%),
      and ResNet-34's on a hot Pixel 3 fast-forwards 0.5% short over 100 batches.
    - A CPU's capacity is its capacity at the top clock scaled by its cluster's clock cap
      (`_follow_caps`), so a CPU kept busy at its cap has no spare.

    Demand changes only when a window closes, so the kernel's window rollover is one timer,
    armed only while some unpinned thread is runnable (only those can move) - never per
    thread. Windows that pass without it are closed, in order and with their own statistics,
    at the next replan (before anything is placed), so core_ctl decides exactly as at the
    rollover; only a pinned-only phone sees its decisions late, and pinned threads ignore them.
    Not modelled: energy comparison of the candidates (find_energy_efficient_cpu), sched_boost,
    big-task rotation, per-task boost, the ``unfilter`` threshold of colocation, util clamps,
    the balance of busy CPUs in the reference placement, active balance other than a misfit's
    to an idle bigger CPU, the cache-hot test of a task to move (a newly idle or idle balance
    ignores it: can_migrate_task).
    """

    def __init__(self, kernel, core_ctl: bool = True, previous_cpu: bool = False, busy_balance: bool = False,
                 kernel_idle_balance: bool = False):
        self.kernel = kernel
        self.window_s = kernel.window_ms / 1000.0
        self.walt = WaltDemand(self.window_s, kernel.hist_size, kernel.init_task_load_pct)
        self._core_ctl_on = core_ctl
        self.previous_cpu = previous_cpu         # a task that fits no CPU: the kernels' fallback (`_fallback`)
        self.busy_balance = busy_balance         # the periodic balance of busy CPUs (`_busy_pass`)
        # the scheduler's hook after CFS picks (`Scheduler._replan`): idle CPUs balancing in the
        # kernels' order, or None (the reference balances in `__call__`, `_balance`)
        self.idle_balance = self._idle_balance if kernel_idle_balance else None
        self._idle_since: list = []              # per CPU: when it went idle (None: busy)
        self._avg_idle: list = []                # per CPU: rq->avg_idle, s
        self._domains: list = []                 # (CPUs, busy interval s, imbalance_pct) per sched domain
        self._domain_due: list = []              # when each domain balances next
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
        self._placed_caps: tuple = ()            # ... under these clock caps
        self._timer_at = math.inf
        self._boost: dict[str, bool] = {}        # Android group -> boosted (schedtune.boost > 0)

    # -- set-up -------------------------------------------------------------------------------

    def _setup(self, sched) -> None:
        self.sched = sched
        p = sched.platform
        cap = sched.capacity
        top = max(cap)
        # capacity_orig, biggest = 1, at each cluster's top clock: what a task's demand is scaled
        # by (at its clock); `cap` below is the same under the clusters' present clock caps
        self.cap_max = [c / top for c in cap]
        ranked = sorted(range(len(p.clusters)), key=lambda k: (p.clusters[k].capacity, p.clusters[k].cpus[0]))
        self.rank_of_cluster = {k: r for r, k in enumerate(ranked)}
        self.rank = [self.rank_of_cluster[p.cluster_of_cpu[c]] for c in range(p.n_cpus)]
        self.rank_cpus = [tuple(p.clusters[k].cpus) for k in ranked]
        self._rank_cap_max = [self.cap_max[cpus[0]] for cpus in self.rank_cpus]
        self.top = len(ranked) - 1
        self._fmax = [c.fmax_mhz for c in p.clusters]
        n_b = len(ranked) - 1
        self.up = [x / 100.0 for x in self.kernel.upmigrate_pct][:n_b]
        self.down = [x / 100.0 for x in self.kernel.downmigrate_pct][:n_b]
        self._caps_mhz: tuple = ()
        self._follow_caps()
        names = {p.clusters[k].name: r for r, k in enumerate(ranked)}
        params = [None] * len(ranked)
        if self._core_ctl_on:
            for cc in self.kernel.core_ctl:
                params[names[cc.cluster]] = cc
        self.core_ctl = CoreCtl(self.rank_cpus, params)
        self._colocating = any(g.colocate for g in self.kernel.schedtune.values())
        self._stats = WindowStats(p.n_cpus, self.window_s)
        if self.busy_balance:
            # MC: each cluster's CPUs; DIE: all of them (assumption: each cluster a cpu-map
            # cluster of its own in the phones' device trees)
            doms = [(frozenset(cpus), IMBALANCE_PCT_CLUSTER) for cpus in self.rank_cpus if len(cpus) > 1]
            if len(self.rank_cpus) > 1:
                doms.append((frozenset(range(p.n_cpus)), IMBALANCE_PCT_ALL))
            self._domains = [(d, len(d) * BUSY_FACTOR / 1000.0, pct) for d, pct in doms]
            self._domain_due = [iv for _, iv, _ in self._domains]
        sched.on_replan.append(self._after_replan)
        self._idle_since = [0.0] * p.n_cpus
        self._avg_idle = [2.0 * MIGRATION_COST_S] * p.n_cpus

    def _follow_caps(self) -> None:
        """capacity_orig under each cluster's clock cap (policy->max), as the kernels scale it:
        cpu_scale x max_freq_scale, the cap over the top clock (msm-4.14 kernel/sched/fair.c
        update_cpu_capacity: "capacity *= arch_scale_max_freq_capacity(sd, cpu)", then
        min(capacity, thermal_cap(cpu)) - 0wnerDied/kernel_sm8150_oneplus@00bb1989; the Android
        4.9 EAS trees' arch/arm64/kernel/topology.c scale_cpu_capacity: "per_cpu(cpu_scale,
        cpu) * max_freq_scale >> SCHED_CAPACITY_SHIFT" with cpufreq_scale_max_freq_capacity).
        A task's demand is scaled by its CPU's clock over the top clock (`_after_replan`), so a
        CPU kept busy at its cap is full: a throttled cluster shows no spare capacity it cannot
        give. Re-derived, with what follows from it (each cluster's fit, each CPU's tipping
        point), when a cap has changed."""
        caps = tuple(self.sched.platform.max_freq_mhz)
        if caps == self._caps_mhz:
            return
        self._caps_mhz = caps
        cl = self.sched.platform.cluster_of_cpu
        self.cap = [c * caps[cl[i]] / self._fmax[cl[i]] for i, c in enumerate(self.cap_max)]
        self.rank_cap = [self.cap[cpus[0]] for cpus in self.rank_cpus]
        # per CPU, the utilisation above which it is over-utilized (`_overutilized`)
        self._tipping = [self.cap[c] * (self.up[r] if r < self.top else DEFAULT_MARGIN_UP_SHARE)
                         for c, r in enumerate(self.rank)]

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
        self._follow_caps()
        now = sched.env.now
        window = self.walt.window_of(now)
        if window == self._placed_window and self._placed_caps == self._caps_mhz and \
                self._placed == {(t.tid, t.cpu, t.affinity) for t in threads}:
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
        if self.idle_balance is None:   # (else idle CPUs balance after CFS picks: `_idle_balance`)
            for _ in threads:   # a move can free a core for another: balance until nothing moves
                movable = self._movable(threads, dem, count)
                if not movable or not (self._balance(movable, dem, iso, count, util, load, seen_count)
                                       or self._balance(movable, dem, iso, count, util, load, seen_count, redo=True)):
                    break
        self._remember(threads, window)

    def _remember(self, threads: list, window: int) -> None:
        self._placed = {(t.tid, t.cpu, t.affinity) for t in threads}
        self._placed_window = window
        self._placed_caps = self._caps_mhz

    def _allowed(self, t: Thread, iso: set) -> tuple[int, ...]:
        if not iso:
            return t.affinity
        # A task whose whole mask is isolated runs there here. Not what msm does: isolating a
        # CPU migrates its user tasks and a task left with no allowed CPU loses its mask
        # (select_fallback_rq -> cpuset_cpus_allowed_fallback: every possible CPU under cgroup
        # v1), sched_setaffinity to isolated CPUs only fails with EINVAL, and core_ctl never
        # un-isolates a CPU for a task's mask (trueToastedCode/android_kernel_oneplus7_sm8150
        # @ce82c5d4 msm-4.14 kernel/sched/core.c L1583-1629, L5029-5046; core_ctl.c L1113).
        # Kept until the cgroup mode of the phones and Swan's handling of a failed
        # sched_setaffinity are settled; only a pinned choice started while core_ctl holds some
        # of its CPUs isolated (a full-simulation session after idling) meets it.
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
        """find_best_target() for a waking task (class doc); under the kernels' own rule
        ("walt-prevcpu"), Android 4.9's classic path while the phone is over-utilized."""
        if self.previous_cpu and not self.kernel.eas_wake_when_overutilized and t.cpu in allowed \
                and self._overutilized(seen_util):
            return self._idle_sibling(t, allowed, seen_count)
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
                    cap_curr = self.cap_max[c] * p.freq_mhz[k] / self._fmax[k]   # capacity_curr_of
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
        if target is not None:
            return target
        if self.previous_cpu:
            return self._fallback(t, allowed, most_spare, most_spare_cap, load)
        if most_spare is not None:
            return most_spare
        return self._largest_share(t, allowed, load)

    def _idle_sibling(self, t: Thread, allowed, seen_count) -> int:
        """Android 4.9's classic wake path (`hw.profile.KernelSpec.eas_wake_when_overutilized`):
        select_idle_sibling from the previous CPU - that CPU if idle, else an idle allowed CPU
        of its cluster (the LLC domain; assumption, as for the balance's domains: each cluster
        a cpu-map cluster), else the previous CPU. wake_affine is not modelled: with both CPUs
        busy its effective-load test (older form) keeps the previous CPU unless the waker's has
        far less load per capacity."""
        prev = t.cpu
        if seen_count[prev] == 0:
            return prev
        for c in self.rank_cpus[self.rank[prev]]:
            if c in allowed and seen_count[c] == 0:
                return c
        return prev

    def _largest_share(self, t: Thread, allowed, load) -> int:
        """The allowed CPU that would give ``t`` the largest share of capacity (its own CPU on a tie)."""
        return max(allowed, key=lambda c: (self.cap[c] * t.weight / (load[c] + t.weight), c == t.cpu, -c))

    def _fallback(self, t: Thread, allowed, most_spare, most_spare_cap: float, load) -> int:
        """Where a waking task that fits no CPU goes, as the kernels' code has it (placement
        "walt-prevcpu"; class doc). msm-4.14 and msm-4.19 take the CPU with the most spare
        capacity, counting only a positive spare (most_spare_wake_cap starts at 0 and must be
        exceeded: trueToastedCode/android_kernel_oneplus7_sm8150@ce82c5d msm-4.14
        kernel/sched/fair.c L7717-7722, L8033-8036; PixelExperiencePlus/
        android_kernel_oneplus_sm8250@02a9276a find_best_target); Android 4.9's
        find_best_target has no such fallback and returns -1. Either way the caller then keeps
        the task's previous CPU (msm-4.14 fair.c L8465-8466; sm8250 select_task_rq_fair
        "new_cpu = prev_cpu"; PixelOS-Bluecross/kernel_google_crosshatch@79dc4403
        select_energy_cpu_brute "if (next_cpu == -1) target_cpu = prev_cpu"). While the root
        domain is over-utilized Android 4.9 does not get here: `_idle_sibling`."""
        if most_spare is not None and most_spare_cap > 0.0 and self.kernel.most_spare_fallback:
            return most_spare
        if t.cpu is not None and t.cpu in allowed:
            return t.cpu
        return self._largest_share(t, allowed, load)   # a task that never ran here

    def _misfit(self, t: Thread, d: float) -> bool:
        r = self.rank[t.cpu]
        if r >= self.top:
            return False
        return (r == 0 and self._boosted(t)) or not self.fits(d, r, r)

    def _movable(self, threads, dem, count) -> list:
        """The tasks a balance pass may move, biggest demand first: a misfit or a task sharing
        its CPU (a move only fills an idle CPU, so no other task becomes one during a pass)."""
        movable = [t for t in threads if len(t.affinity) > 1 and (count[t.cpu] > 1 or self._misfit(t, dem[t.tid]))]
        movable.sort(key=lambda t: (-dem[t.tid], t.tid))
        return movable

    def _overutilized(self, util) -> bool:
        """Some CPU's utilisation (its tasks' summed demand) is above its tipping point."""
        return any(u > x for u, x in zip(util, self._tipping))

    def _balance(self, movable, dem, iso, count, util, load, seen_count, redo: bool = False) -> bool:
        """Misfit pull by an idle bigger CPU, and an idle CPU taking a task from a shared one;
        True if a task moved. ``movable``: `_movable` now. ``redo``: the load balancer's second
        pass, run when the first moved nothing (so over the same tasks) - an idle CPU then takes
        a queued task that does not fit it (msm-4.19 kernel/sched/fair.c detach_tasks:
        LBF_IGNORE_BIG_TASKS, set when the destination is smaller, keeps can_migrate_task from
        taking a task that !task_fits_max there; with nothing detached the flags are cleared and
        it goes to redo). The reference's simplification: it does not tell the task running on
        a shared CPU from the ones queued there, and takes the biggest demand first, where the
        kernels never detach the running task and take the most recently enqueued first
        (`_idle_balance`, placement "walt-prevcpu")."""
        moved = False
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
                # an idle sibling pulls a task whatever its demand (newidle balance in the
                # cluster's MC domain; which one: the docstring). An
                # energy-aware system below its tipping point never pulls towards more capacity
                # (msm-4.14 find_busiest_group: !sd_overutilized and capacity_local >
                # capacity_busiest -> out_balanced)
                if not self._overutilized(util):
                    idle = [c for c in idle if self.rank[c] <= r0]
                fit = [c for c in idle if self.rank[c] == r0] or \
                      [c for c in idle if self.fits(d, self.rank[c], r0) and self.rank[c] >= r0] or \
                      [c for c in idle if self.fits(d, self.rank[c], r0)] or (idle if redo else [])
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

    def _idle_balance(self, sched) -> bool:
        """Idle CPUs balancing as the kernels' code orders it (placement "walt-prevcpu", in place
        of `_balance`), run by the scheduler once this instant's wake-ups have taken their CPUs
        and CFS has picked who runs on each (`Scheduler._slice`); True if a task moved.

        Each idle CPU, lowest first, balances its cluster's domain and then the phone's, and
        stops at its first pull (idle_balance: for_each_domain bottom up). A CPU that goes idle
        now does so only while its average idle time covers each domain's cost
        (`NEWIDLE_COST_S`), and on msm only when it also reaches sched_migration_cost and some
        CPU is overloaded (`KernelSpec.newidle_needs_migration_cost`); one that stays idle
        balances a domain once a balance interval (its CPU count in ms: no busy_factor while
        idle) has passed since it went idle - its periodic or nohz idle balance, taken at the
        next replan. From the CPU with the most load per capacity it detaches one queued task:
        never the one running there (can_migrate_task: task_running), the most recently
        enqueued first (detach_tasks takes the head of cfs_tasks, where account_entity_enqueue
        adds), first only one that fits a smaller
        destination (LBF_IGNORE_BIG_TASKS), then any (the redo without it), and no more
        (CONFIG_PREEMPT: a newly idle balance stops after one task). With nothing queued to
        detach, active balance pushes a smaller CPU's running misfit task to the idle bigger CPU
        (need_active_balance), the first such CPU (find_busiest_queue's misfit shortcut). Below
        the tipping point it never pulls towards more capacity (as `_balance`). Source:
        PixelOS-Bluecross/kernel_google_crosshatch@79dc4403 kernel/sched/fair.c idle_balance,
        find_busiest_group, find_busiest_queue, detach_tasks, can_migrate_task,
        need_active_balance, and core.c ttwu_do_wakeup (avg_idle); msm-4.14's
        (Planet-X/android_kernel_oneplus_sm8150@2498885a) orders cfs_tasks and detaches the
        same way. Not modelled of msm's: can_migrate_task's energy test below the tipping
        point, and active balance of an overloaded group's misfit by a busy CPU."""
        runnable = sched._runnable
        n = len(self.cap)
        now = sched.env.now
        on: list[list] = [[] for _ in range(n)]
        for t in runnable:
            on[t.cpu].append(t)
        newly = self._track_idle(on, now)
        iso = self.core_ctl.isolated
        idle = [c for c in range(n) if not on[c] and c not in iso]
        if not idle or not any(len(ts) > 1 or (ts and self.rank[c] < self.top and len(ts[0].affinity) > 1)
                               for c, ts in enumerate(on)):
            return False   # nothing queued, and no running task a bigger CPU could take
        dem = {t.tid: self._record(t, now).demand for t in runnable}
        util = [0.0] * n
        load = [0.0] * n
        for t in runnable:
            util[t.cpu] += dem[t.tid]
            load[t.cpu] += t.weight * _on_cpu_share(t)
        below_tipping = not self._overutilized(util)
        msm_gate = bool(newly) and self.kernel.newidle_needs_migration_cost
        if msm_gate:
            misfit_ranks = {self.rank[t.cpu] for t in runnable if self._misfit(t, dem[t.tid])}
            overload = bool(misfit_ranks) or any(len(ts) > 1 for ts in on)
        moved = False
        for d in idle:
            force = False
            if msm_gate and d in newly:
                force = self.rank[d] > 0 and 0 in misfit_ranks   # force_lb
                if not force and (self._avg_idle[d] < MIGRATION_COST_S or not overload):
                    continue
            for scope in self._idle_domains(d, d in newly, force, now):
                pick = self._to_pull(d, scope, on, sched._curr, dem, load, iso, below_tipping)
                if pick is None:
                    continue
                c, t = pick
                on[c].remove(t)
                on[d].append(t)
                w = t.weight * _on_cpu_share(t)
                load[c] -= w
                load[d] += w
                t.cpu = d
                self._idle_since[d] = None   # a pull ends the idle period unsampled (idle_stamp = 0)
                moved = True
                break
        if moved:
            self._remember(runnable, self._placed_window)
        return moved

    def _track_idle(self, on: list, now: float) -> list:
        """Each CPU's idle period and average idle time (rq->idle_stamp, rq->avg_idle: a task
        waking onto an idle CPU adds the period to the average, ttwu_do_wakeup's update_avg);
        returns the CPUs that went idle now."""
        since, avg = self._idle_since, self._avg_idle
        newly = []
        for c, ts in enumerate(on):
            if ts:
                if since[c] is not None:
                    avg[c] = min(avg[c] + (now - since[c] - avg[c]) / 8.0, 2.0 * MIGRATION_COST_S)
                    since[c] = None
            elif since[c] is None:
                since[c] = now
                newly.append(c)
        return newly

    def _idle_domains(self, d: int, newly: bool, force: bool, now: float) -> list:
        """The domains (CPU sets, smallest first) idle CPU ``d`` balances now: going idle, those
        whose summed costs its average idle time covers (every one under msm's force_lb);
        staying idle, those whose balance interval has passed since it went idle."""
        out, cost = [], 0.0
        for i, scope in enumerate((self.rank_cpus[self.rank[d]], range(len(self.cap)))):
            if newly:
                cost += NEWIDLE_COST_S[i]
                if self._avg_idle[d] < cost and not force:
                    break
            elif now - self._idle_since[d] < len(scope) / 1000.0 - 1e-12:
                break
            out.append(scope)
        return out

    def _to_pull(self, d: int, scope, on: list, curr: list, dem: dict, load: list, iso: set,
                 below_tipping: bool):
        """What idle CPU ``d`` takes within ``scope``: (source CPU, task), or None. A queued task
        of the CPU with the most load per capacity, the most recently enqueued first, first one
        that fits ``d`` if ``d`` is smaller; else a smaller CPU's running misfit (active
        balance, the first such CPU: find_busiest_queue's misfit shortcut)."""
        rank = self.rank
        queued = {}
        for c in scope:
            if len(on[c]) < 2 or (below_tipping and rank[d] > rank[c]):
                continue
            ts = [t for t in reversed(on[c]) if t is not curr[c] and len(t.affinity) > 1 and d in self._allowed(t, iso)]
            if ts:
                queued[c] = ts
        if queued:
            c = max(queued, key=lambda c: (load[c] / self.cap[c], -c))
            ts = queued[c]
            if rank[d] < rank[c]:
                ts = [t for t in ts if self.fits(dem[t.tid], rank[d], rank[c])] or ts
            return c, ts[0]
        for c in scope:
            t = curr[c]
            if rank[c] < rank[d] and t is not None and t in on[c] and len(t.affinity) > 1 \
                    and d in self._allowed(t, iso) and self._misfit(t, dem[t.tid]):
                return c, t
        return None

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
        unit = self._rank_cap_max[0] / 100.0
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
        cl, freq, fmax, cap = p.cluster_of_cpu, p.freq_mhz, self._fmax, self.cap_max
        old = self._rate
        new = {t.tid: _on_cpu_share(t) * cap[t.cpu] * freq[cl[t.cpu]] / fmax[cl[t.cpu]] for t in sched._runnable}
        rec = self._rec
        if new != old:   # (an unchanged plan brings no thread that has no record yet)
            # WALT accounts every task at every switch and tick whatever its mask
            # (update_task_ravg), so a task's demand starts when it first runs, not when a
            # placement first reads it: every thread in a plan has a record
            for tid in new.keys() - rec.keys():
                rec[tid] = self.walt.new(now)
            for tid, r in new.items():
                r0 = old.get(tid, 0.0)
                if r0 != r:
                    self.walt.advance(rec[tid], now, r0)
            for tid, r0 in old.items():
                if tid not in new:
                    self.walt.advance(rec[tid], now, r0)
            self._rate = new
        if self.core_ctl.enabled:
            n = p.n_cpus
            # sched_avg.c averages nr_running over time from every enqueue and dequeue: work
            # interleaved with sleep is on the runqueue only its duty share of the time (and
            # reaches one task at its peaks)
            nr, misfit, peak = [0.0] * n, [0.0] * n, [0] * n
            for t in sched._runnable:
                share = _on_cpu_share(t)
                nr[t.cpu] += share
                peak[t.cpu] += 1
                if len(t.affinity) > 1 and t.tid in rec and self._misfit(t, self._record(t, now).demand):
                    misfit[t.cpu] += share
            busy = sched.busy_now
            busy = [busy[c] * freq[cl[c]] / fmax[cl[c]] for c in range(n)]
            st = self._stats
            if busy != st.busy or nr != st.nr or misfit != st.misfit or peak != st.peak:   # else the window goes on
                self._roll(now)
                st.set_plan(now, busy, nr, misfit, peak)
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
        self._follow_caps()
        changed = self._roll(now)
        iso = self.core_ctl.isolated
        if self._domains and self._busy_pass(now, iso):
            changed = True
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

    def _busy_pass(self, now: float, iso: set) -> bool:
        """The periodic balance of busy CPUs (rebalance_domains from the scheduler tick): in each
        sched domain whose busy interval is due, the CPU with the most load per capacity gives a
        queued task (runnable, not the one holding the CPU: can_migrate_task) to the domain's
        allowed CPU with the least, while the busiest carries the domain's imbalance_pct of the
        destination's load per capacity and the move does not reverse the two. Load is the
        runnable tasks' weight now, a task that works in a duty cycle (a macro region standing
        for a loop of tiny regions, an app's thread) at its duty: the kernel's runnable load
        average is a time average, and a loop's thread sits on the runqueue that share of the
        time (without the average's decay: an assumption). Below the phone's tipping point (no
        CPU over-utilized) a CPU pulls only from one of no less capacity, as in `_balance`.
        Checked at the window rollovers, so a due pass runs at the first rollover at or after its
        time. True if a task moved."""
        due = [i for i, at in enumerate(self._domain_due) if now >= at - 1e-9]
        if not due:
            return False
        for i in due:
            iv = self._domains[i][1]
            self._domain_due[i] = (math.floor(now / iv + 1e-9) + 1) * iv
        sched, cap = self.sched, self.cap
        runnable = sched._runnable
        n = len(cap)
        load, nr, util = [0.0] * n, [0] * n, [0.0] * n
        for t in runnable:
            load[t.cpu] += t.weight * _on_cpu_share(t)
            nr[t.cpu] += 1
            util[t.cpu] += self._record(t, now).demand
        # below the tipping point the energy-aware balancer pulls only from a CPU of no less
        # capacity (as in `_balance`)
        below_tipping = not self._overutilized(util)
        curr = sched._curr
        moved = False
        for i in due:
            cpus, _, pct = self._domains[i]
            for _ in runnable:
                queued = [t for t in runnable if t.cpu in cpus and nr[t.cpu] > 1 and curr[t.cpu] is not t
                          and len(t.affinity) > 1]
                if not queued:
                    break
                b = max({t.cpu for t in queued}, key=lambda c: (load[c] / cap[c], -c))
                t = min((t for t in queued if t.cpu == b), key=lambda t: t.tid)
                dests = [c for c in self._allowed(t, iso) if c in cpus and c != b and c not in iso
                         and not (below_tipping and self.rank[c] > self.rank[b])]
                if not dests:
                    break
                d = min(dests, key=lambda c: (load[c] / cap[c], c))
                w = t.weight * _on_cpu_share(t)
                if load[b] / cap[b] * 100 <= pct * load[d] / cap[d] or \
                        (load[d] + w) / cap[d] > (load[b] - w) / cap[b]:
                    break
                load[b] -= w
                load[d] += w
                nr[b] -= 1
                nr[d] += 1
                t.cpu = d
                moved = True
        return moved

    def _roll(self, now: float) -> bool:
        """Close every window up to ``now``; core_ctl decides at each. True if isolation changed."""
        cc = self.core_ctl
        if not cc.enabled:
            return False
        return self._stats.advance(now, cc.evaluate, lambda: cc.steady)
