"""WALT task demand and core_ctl: what Qualcomm's Android kernels decide placement from.

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
needed (they stay needed until below ``busy_down_pct``); the task counts may ask for more
(``task_thres``, the previous cluster's overflow ``nr_prev_assist_thresh``, one more CPU when
more tasks than needed CPUs ran); the need is clamped to ``min_cpus``..all; CPUs come back at
once when the need rises and are isolated, idle ones first, only after the need has stayed
lower for ``offline_delay_ms``. An isolated CPU takes no new unpinned task.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from swansim.hw.profile import CoreCtlCluster

# core_ctl's per-window task counts round an average up from 0.85 (kernel/sched/sched_avg.c
# NR_THRESHOLD_PCT 15: "the task ran at least 85% in the last window").
NR_THRESHOLD = 0.15
# core_ctl.c MAX_NR_THRESHOLD: more tasks than this on one CPU in a window asks for one more CPU.
MAX_NR_THRESHOLD = 4


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
    def settled(self) -> bool:
        """No cluster is counting down to isolate a CPU."""
        return all(c.params is None or c.need >= self.active(c) for c in self.clusters)

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
    of runnable and of misfit tasks and the most runnable tasks seen (sched_get_nr_running_avg)."""

    # after this many windows closed with one plan and nothing pending, the rest are the same
    SAME_AFTER = 16

    def __init__(self, n: int, window_s: float):
        self.n, self.W = n, window_s
        self.window, self.t = 0, None
        self.busy, self.nr, self.misfit = [0.0] * n, [0] * n, [0] * n
        self._reset()

    def _reset(self) -> None:
        n = self.n
        self.acc_busy, self.acc_nr, self.acc_mis = [0.0] * n, [0.0] * n, [0.0] * n
        self.nr_max = list(self.nr)

    def set_plan(self, now: float, busy: list[float], nr: list[int], misfit: list[int]) -> None:
        """From ``now`` (windows closed up to it), the plan's per-CPU busy share (scaled by
        f/f_max), runnable and misfit counts."""
        if now > self.t:
            self._add(now - self.t)
            self.t = now
        self.busy, self.nr, self.misfit = busy, nr, misfit
        self.nr_max = [max(a, b) for a, b in zip(self.nr_max, nr)]

    def _add(self, dt: float) -> None:
        for c in range(self.n):
            self.acc_busy[c] += self.busy[c] * dt
            self.acc_nr[c] += self.nr[c] * dt
            self.acc_mis[c] += self.misfit[c] * dt

    def advance(self, now: float, close: Callable[..., bool], settled: Callable[[], bool]) -> bool:
        """Accumulate up to ``now``, calling ``close(end_s, busy_pct, nr, nr_misfit, nr_max)`` for
        every window that ends on the way; True if any call returned True."""
        W = self.W
        if self.t is None:
            self.t, self.window = now, int(math.floor(now / W + 1e-9))
            return False
        changed, closes = False, 0
        while True:
            end = (self.window + 1) * W
            if now < end - 1e-12:
                return changed   # the plan's share of this window is added when it ends or changes
            self._add(end - self.t)
            busy_pct = [min(100.0, 100.0 * b / W) for b in self.acc_busy]
            nr = [int(x / W + NR_THRESHOLD) for x in self.acc_nr]
            mis = [int(x / W + NR_THRESHOLD) for x in self.acc_mis]
            changed |= close(end, busy_pct, nr, mis, self.nr_max)
            self._reset()
            self.window += 1
            self.t = end
            closes += 1
            if closes > self.SAME_AFTER and settled():
                self.window = int(math.floor(now / W + 1e-9))
                self.t = self.window * W
