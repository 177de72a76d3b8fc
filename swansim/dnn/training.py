"""The training job: mini-batches of a model as parallel regions on the kernel's scheduler.

Per mini-batch: the forward layers in order, the backward layers in reverse (input gradient,
then weight gradient), then the SGD update of every parameter; inference mode runs the
forward pass only. Each layer phase becomes the cost model's regions on the execution choice
the plan gives for that layer. The job owns an OpenMP-like pool: thread 0 is the master (the
Python thread), workers are pinned one per cpu of the choice; when the choice changes they
are re-pinned or the pool grows (migrations are counted and the master pays a switching cost).

Waiting is libgomp's: a thread that waits - a worker at the barrier and in the pool between
regions, the master at the join - spins for the runtime's spin budget (holding its core,
burning power) and then sleeps; a sleeping thread starts again only after its core's wake-up
latency (idle, not busy), and its waker pays the futex_wake. A per-group loop (one region
repeated) is run as one macro region whose busy and idle shares per thread come from the cost
model's ``time_region`` at the current frequencies: a fast path. The default, ``loops="chunked"``
(`LOOPS`), runs the loop as macro regions of at most `MACRO_REPEATS` repeats each;
``loops="repeats"`` runs every repeat as a region of its own (each fork and join through the
scheduler), the path both fast paths are checked against (experiments/macro_check.py,
tests/test_fidelity.py); ``loops="macro"``, one macro region per loop, drifts from it for an
unpinned team.

With the runtime's BLAS pool enabled (`dnn.runtime.BlasParams`: OpenBLAS's own pthreads server,
as Swan's build had), a GEMM region whose call is large enough runs on that pool instead: the
master (the BLAS caller) and the pool's workers each compute an equal share, the region ending
with the last of them; the workers then spin for the pool's ``spin_s`` (0.109 s in OpenBLAS
0.3.18) and sleep. The pool holds one thread per CPU the process may use at start (the choice's
cores for a pinned choice, or the process's cpuset), so its spinning workers compete with the
OpenMP team for the cores. Both pools wait alike (`_take`, `_wait`): poll for a budget, then sleep.

With the runtime's NNPACK path enabled (`dnn.runtime.NnpackParams`, PyTorch v1.8.1 at a batch of
16 or more), the forward regions of convolutions run on a third team, NNPACK's pthreadpool: the
master and the pool's workers, created at the job's first such call with its thread count and
never resized, waiting with the pool's own poll budget; the backward of those ops is serial on
the master (`dnn.runtime.nnpack_backward`). A region runs on whichever team is present
(`_team`); only these forward regions swap it.

The job's control flow (batches, layers, regions) is a generator driven by callbacks, not a
SimPy process: it yields a piece of work (`_Work`), a forked team (`_Team`) or a SimPy event,
and is resumed from the scheduler's replan when the work or the team is done - so a region
that ends and the next one that starts at the same instant cost one replan.

Layering: this module drives a ``kernel.sched.Scheduler`` handed to it (``dnn`` -> ``kernel``,
documented in DESIGN.md); it never imports the device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple, Sequence, Union

import simpy

from swansim.dnn.choices import Choice, Plan
from swansim.dnn.graph import Model
from swansim.dnn.regions import Region, SocView, harmonic, phase_regions, time_region
from swansim.dnn.runtime import Runtime, nnpack_backward
from swansim.hw.profile import TOP_APP, SocSpec

PlanLike = Union[Choice, Plan, Callable[[int], Union[Choice, Plan]]]

# How a per-group loop runs (`TrainingJob`): "macro", one macro region per loop; "chunked" (the
# default, which the runtime is fitted on), macro regions of at most MACRO_REPEATS repeats, between
# which the team joins and forks again, so the kernel places the woken workers anew and the next
# one is timed where they run; "repeats", every repeat a region of its own (the path both are
# checked against, experiments/macro_check.py).
LOOPS = ("macro", "chunked", "repeats")
# The chunk size was chosen at the runtime values fitted before 2026-12-02 (so it is calibration):
# on the Pixel 3 the default's cold ShuffleNetV2 batch over its repeats, chunked alone: 1.29x
# with 64 repeats a chunk, 1.05x with 16 (one macro region: 3.0x); 1.07x with 16 once the
# scheduler shared a core with sleep-interleaved work max-min (`Scheduler._sleeper_shares`).
MACRO_REPEATS = 16
DEFAULT_LOOPS = "chunked"


@dataclass(slots=True)
class _Join:
    """The master at the join of one region: asleep once its spin budget ran out."""

    asleep: bool = False
    token: int = 0


@dataclass(slots=True)
class _Team:
    """A forked region: how many members have not arrived at the join yet, and what to call
    when the last one has (the master's continuation)."""

    left: int
    resume: Callable[[], None] | None = None


@dataclass(slots=True)
class _Work:
    """A request of the job's driver: run ``amount`` units on ``thread``, then go on."""

    thread: object
    amount: float
    speed: tuple
    bytes_per_unit: float = 0.0
    idle_s_per_unit: float = 0.0   # sleep interleaved with the work (`Scheduler.run`)


class _Pool(NamedTuple):
    """The threads a region runs on (thread 0 is always the master), their pool bookkeeping,
    their spin budget per cluster (cycles), the cost model's view of their waiting (a per-group
    loop's timing) and the first id of their workers in `TrainingJob.thread_frame`."""

    threads: list
    workers: list
    spin_cycles: list
    view: SocView
    first_id: int


@dataclass(slots=True)
class _Worker:
    """Pool bookkeeping for one thread: spinning in the pool, asleep, or working."""

    state: str = "sleep"       # "spin" | "sleep" | "busy"
    token: int = 0             # invalidates a pending fall-asleep timer


class TrainingJob:
    """A SimPy process training (or running inference with) ``model`` on a plan."""

    # Optional hooks, set from outside: ``gate()`` before each batch returns None to go on, or
    # an event to wait for before asking again; ``on_batch(row, layer_rows)`` after each batch.
    gate: Callable[[], simpy.Event | None] | None = None
    on_batch: Callable[[tuple, list], None] | None = None

    def __init__(self, env: simpy.Environment, sched, soc: SocSpec, model: Model,
                 runtime: Runtime, plan: PlanLike, mode: str = "train",
                 n_batches: int | None = None, nice: int = 0,
                 cpuset: Sequence[int] | None = None, name: str = "train",
                 idle_floor_w: float | None = None, record_layers: bool = True,
                 cgroup: str = TOP_APP, colocated: bool = False, loops: str = DEFAULT_LOOPS):
        if mode not in ("train", "infer"):
            raise ValueError(f"mode must be 'train' or 'infer', got {mode!r}")
        if loops not in LOOPS:
            raise ValueError(f"loops must be one of {LOOPS}, got {loops!r}")
        self.env, self.sched, self.platform = env, sched, sched.platform
        self.soc, self.model, self.runtime, self.mode = soc, model, runtime, mode
        self.view = SocView.of(soc, runtime)
        self._spin_cyc = [runtime.spin_budget_cycles(fam) for fam in self.view.family]   # per cluster
        self._plan = plan
        self.n_batches = n_batches
        self.nice, self.name = nice, name
        # the process's Android group (schedtune attributes; Swan's python inherits top-app from
        # Termux, runs.scenarios.TrainingBackground) and related-thread-group membership
        self.cgroup, self.colocated = cgroup, colocated
        self.cpuset = tuple(sorted(cpuset)) if cpuset is not None else None
        self.idle_floor_w = self.platform.total_power_w if idle_floor_w is None else idle_floor_w
        self.record_layers = record_layers
        self.loops = loops   # how a per-group loop runs (LOOPS)
        self.pool: list = []
        self._workers: list[_Worker] = []
        self._choice_key: dict[int, tuple] = {}
        self._applied: Choice | None = None   # the choice the pool was last set up for
        self._region_cache: dict[tuple, list[Region]] = {}
        blas = runtime.blas
        self._blas = blas if blas is not None and blas.enabled else None
        self.blas_pool: list = []                     # the BLAS pool's workers (the master is its caller)
        self._blas_workers: list[_Worker] = []
        self._blas_affinity: tuple[int, ...] | None = None
        nn = runtime.nnpack
        self._nnp = nn if nn is not None and nn.enabled and model.batch >= nn.min_batch else None
        self.nnp_pool: list = []                      # NNPACK's pthreadpool workers
        self._nnp_workers: list[_Worker] = []
        self._nnp_team: _Pool | None = None           # made at the first NNPACK call
        if self._nnp is not None:
            self.runtime = runtime = nnpack_backward(runtime)
            self.view = SocView.of(soc, runtime)
        # the team a region runs on (`_region`): the OpenMP team unless NNPACK's pool stands in
        self._omp = self._team = _Pool(self.pool, self._workers, self._spin_cyc, self.view, 0)
        self.migrations = 0
        self.sleeps = 0.0   # a thread of the job fell asleep (each a futex_wait, and later a futex_wake)
        self._started = False
        self.batch_rows: list[tuple] = []
        self.layer_rows: list[tuple] = []
        self.thread_rows: list[tuple] = []
        self.batch_index = 0
        self.stopped = False
        # Called after each batch with its batch row and its layer rows (probes, the batch model).
        self.on_batch: Callable[[tuple, list], None] | None = None
        self.process = env.event()   # succeeds when the job has finished its batches
        self._gen = self._run()
        env.timeout(0).callbacks.append(self._advance)

    def _advance(self, _event=None) -> None:
        """Run the job's control flow to its next wait."""
        try:
            wait = self._gen.send(None)
        except StopIteration:
            self.process.succeed()
            return
        if isinstance(wait, _Work):
            self.sched.run(wait.thread, wait.amount, wait.speed, wait.bytes_per_unit, on_done=self._advance,
                           idle_s_per_unit=wait.idle_s_per_unit)
        elif isinstance(wait, _Team):
            wait.resume = self._advance
        else:
            wait.callbacks.append(self._advance)

    # -- plan -----------------------------------------------------------------------------

    def plan_for(self, batch: int) -> Plan:
        p = self._plan(batch) if callable(self._plan) and not isinstance(self._plan, (Choice, Plan)) else self._plan
        if isinstance(p, Choice):
            p = Plan.uniform(p, len(self.model.layers))
        if len(p.fwd) != len(self.model.layers) or len(p.bwd) != len(self.model.layers):
            raise ValueError(f"plan has {len(p.fwd)}/{len(p.bwd)} choices for {len(self.model.layers)} layers")
        return p

    def stop(self) -> None:
        """Finish the current batch, then stop."""
        self.stopped = True

    # -- the process ----------------------------------------------------------------------

    def _run(self):
        while not self.stopped and (self.n_batches is None or self.batch_index < self.n_batches):
            wait = self.gate() if self.gate is not None else None
            if wait is not None:
                yield wait
                continue
            plan = self.plan_for(self.batch_index)
            self.sched.sync()
            t0, e0, mig0 = self.env.now, self.platform.total_energy_j, self.migrations
            n_layers0 = len(self.layer_rows)
            for choice, regions, layer, phase in self._batch_steps(plan):
                yield from self._apply(choice)
                start = self.env.now
                for r in regions:
                    yield from self._region(r, choice, layer, phase)
                if self.record_layers and regions:
                    ly = self.model.layers[layer]
                    self.layer_rows.append((self.batch_index, layer, ly.name, ly.op, phase,
                                            choice.label, start, self.env.now))
            self.sched.sync()
            lat = self.env.now - t0
            energy = self.platform.total_energy_j - e0
            row = (self.batch_index, plan.label, t0, lat, energy, energy - self.idle_floor_w * lat,
                   self.migrations - mig0)
            self.batch_rows.append(row)
            if self.on_batch is not None:
                self.on_batch(row, [r for r in self.layer_rows[n_layers0:]])
            self.batch_index += 1
        for th in self.pool:
            self.sched.stop(th)
            self._workers[self.pool.index(th)].state = "sleep"
        for th, w in zip(self.blas_pool + self.nnp_pool, self._blas_workers + self._nnp_workers):
            self.sched.stop(th)
            w.state, w.token = "sleep", w.token + 1

    def _batch_steps(self, plan: Plan):
        layers = self.model.layers
        for i in range(len(layers)):
            yield plan.fwd[i], self._regions(i, "fwd", plan.fwd[i]), i, "fwd"
        if self.mode == "infer":
            return
        for i in range(len(layers) - 1, -1, -1):
            for phase in ("bwd_input", "bwd_weight"):
                yield plan.bwd[i], self._regions(i, phase, plan.bwd[i]), i, phase
        for i in range(len(layers)):
            yield plan.update, self._regions(i, "update", plan.update), i, "update"

    def _regions(self, i: int, phase: str, choice: Choice) -> list[Region]:
        key = (i, phase, choice)
        if key not in self._region_cache:
            self._region_cache[key] = phase_regions(self.view, self.model, i, phase, choice)
        return self._region_cache[key]

    # -- the pool -------------------------------------------------------------------------

    def _affinity(self, choice: Choice, i: int) -> tuple[int, ...]:
        want = (choice.thread_cpus(self.soc)[i],) if choice.pinned else choice.cpus
        if self.cpuset is not None:
            want = tuple(c for c in want if c in self.cpuset) or self.cpuset
        return want

    def _apply(self, choice: Choice):
        """Re-pin and resize the pool for ``choice``; the master pays for each migration."""
        if choice is self._applied:
            return   # the pool already stands as this choice wants it
        moved = 0
        while len(self.pool) < choice.threads:
            i = len(self.pool)
            self.pool.append(self.sched.spawn(f"{self.name}.{i}", self._affinity(choice, i), self.nice,
                                              group=self.name, cgroup=self.cgroup, colocated=self.colocated))
            self._workers.append(_Worker())
            self._choice_key[i] = self._affinity(choice, i)
            moved += 1
        for i in range(choice.threads):
            want = self._affinity(choice, i)
            if self._choice_key[i] != want:
                self.sched.set_affinity(self.pool[i], want)
                self._choice_key[i] = want
                moved += 1
        self._applied = choice
        if not self._started:
            self._started = True  # creating the first pool is not a migration
            return
        if moved:
            self.migrations += moved
            self._stop_worker(0)
            cycles = [self.runtime.switch_instructions * moved / c.scalar_ipc for c in self.soc.clusters]
            yield _Work(self.pool[0], 1.0, tuple(1.0 / c for c in cycles))

    def _stop_worker(self, i: int) -> float:
        """Take the team's worker ``i`` out of the pool wait; returns its wake-up delay (0 if spinning)."""
        return self._take(self._team.threads[i], self._team.workers[i])

    def _park(self, i: int) -> None:
        """The team's worker ``i`` (spinning at the barrier) waits in the pool: spin for the budget, then sleep."""
        self._wait(self._team.threads[i], self._team.workers[i], self._spin_s(i))

    def _take(self, th, w: _Worker) -> float:
        """Take a waiting thread (of either pool) out of its wait; its wake-up delay (0 if it
        was spinning)."""
        w.token += 1
        if w.state == "spin":
            self.sched.stop(th)
            w.state = "busy"
            return 0.0
        if w.state == "sleep":
            w.state = "busy"
            return self._wake_latency_of(th)
        return 0.0

    def _wait(self, th, w: _Worker, spin_s: float) -> None:
        """A thread (of either pool) waits for work: polls for ``spin_s``, holding its core and
        burning power, then sleeps."""
        w.token += 1
        if spin_s <= 0:
            self.sched.stop(th)
            w.state = "sleep"
            self.sleeps += 1
            return
        w.state = "spin"
        if not th.runnable:
            self.sched.spin(th)
        tok = w.token
        self.env.call_in(spin_s, lambda: self._fall_asleep(th, w, tok))

    def _fall_asleep(self, th, w: _Worker, tok: int) -> None:
        if w.token == tok and w.state == "spin":
            self.sched.stop(th)
            w.state = "sleep"
            self.sleeps += 1

    @staticmethod
    def _cpu_of(th) -> int:
        """Where a thread runs, or (not placed now) the first cpu it may use."""
        return th.cpu if th.cpu is not None else th.affinity[0]

    def _cluster(self, i: int) -> int:
        return self.platform.cluster_of_cpu[self._cpu_of(self._team.threads[i])]

    def _freq_hz(self, i: int) -> float:
        return self.platform.freq_mhz[self._cluster(i)] * 1e6

    def _wake_latency(self, i: int) -> float:
        return self._wake_latency_of(self._team.threads[i])

    def _wake_latency_of(self, th) -> float:
        return self.runtime.family[self.view.family[self.platform.cluster_of_cpu[self._cpu_of(th)]]].wake_latency_s

    def _spin_s(self, i: int) -> float:
        """How long thread ``i`` spins before it sleeps, at its core's present clock."""
        k = self._cluster(i)
        return self._team.spin_cycles[k] / (self.platform.freq_mhz[k] * 1e6)

    def _futex_s(self, i: int) -> float:
        """What thread ``i`` spends waking one sleeping thread (futex_wake), at its current speed."""
        k = self._cluster(i)
        return self.runtime.futex_wake_instructions / self.soc.clusters[k].scalar_ipc / self._freq_hz(i)

    # -- regions --------------------------------------------------------------------------

    def _region(self, r: Region, choice: Choice, layer: int, phase: str):
        if self._nnp is not None and phase == "fwd" and r.op in self._nnp.ops:
            r = self._nnp_setup(choice, r)   # NNPACK's own loops, no BLAS call
            try:
                yield from self._team_region(r, layer, phase)
            finally:
                self._team = self._omp
            return
        if self._blas is not None and r.repeat == 1 and r.gemm_mnk > self._blas.mt_threshold_mnk \
                and self._blas_size(choice) > 1:
            yield from self._blas_region(r, choice, layer, phase)
            return
        if r.repeat > 1 and r.parallel and self.loops != "macro":
            step = MACRO_REPEATS if self.loops == "chunked" else 1
            left = r.repeat
            while left > 0:
                n = min(step, left)
                yield from self._team_region(replace(r, repeat=n), layer, phase)
                left -= n
            return
        yield from self._team_region(r, layer, phase)

    # NNPACK workers' ids in thread_frame: NNP_THREAD_ID + their index in the pool's team
    NNP_THREAD_ID = 1000

    def _nnp_setup(self, choice: Choice, r: Region) -> Region:
        """Make NNPACK's pthreadpool the present team for region ``r``; returns ``r`` split over it.

        The pool is created at the job's first NNPACK call with that call's thread count and never
        resized (NNPACK.cpp nnpack_threadpool); a later call with another count is split equally
        over the pool's threads, as pthreadpool does. Assumption: its workers may use the
        choice's cores (within the process's cpuset): pthread_create copies the creating thread's
        affinity, and the paper pins the process to the choice's core set."""
        if self._nnp_team is None:
            allowed = self.cpuset if self.cpuset is not None else tuple(range(self.soc.n_cpus))
            cpus = tuple(c for c in choice.cpus if c in allowed) or allowed
            for j in range(len(r.team) - 1):
                self.nnp_pool.append(self.sched.spawn(f"{self.name}.nnp{j}", cpus, self.nice, group=self.name,
                                                      cgroup=self.cgroup, colocated=self.colocated))
                self._nnp_workers.append(_Worker())
            rt = replace(self.runtime, spin_iterations=self._nnp.spin_iterations)
            self._nnp_team = _Pool([self.pool[0], *self.nnp_pool], [self._workers[0], *self._nnp_workers],
                                   [rt.spin_budget_cycles(f) for f in self.view.family], SocView.of(self.soc, rt),
                                   self.NNP_THREAD_ID)
        n = len(self._nnp_team.threads)
        if len(r.team) != n:
            share = sum(w.units for w in r.team) / n
            r = replace(r, team=tuple(replace(r.team[min(i, len(r.team) - 1)], units=share) for i in range(n)))
        self._team = self._nnp_team
        return r

    def _team_region(self, r: Region, layer: int, phase: str):
        """Region ``r`` on the present team (`_team`): the master's serial part, or a fork of the
        team, each member's chunk, the join."""
        sched = self.sched
        threads = self._team.threads
        master = threads[0]
        self._stop_worker(0)
        k0 = self._cluster(0)
        if not r.parallel:
            w = r.team[0]
            cyc = r.serial_cycles[k0] + w.cycles(k0)
            yield _Work(master, r.repeat * cyc * w.speed[k0], w.speed,
                        w.bytes_per_unit * w.units / (cyc * w.speed[k0]) if cyc else 0.0)
            return
        n = len(r.team)
        finishes = [0.0] * n
        if r.repeat == 1:
            yield _Work(master, 1.0, r.fork_speed)
            wakes = [0.0] + [self._stop_worker(i) for i in range(1, n)]
            m = sum(1 for x in wakes if x > 0)
            futex = m * self._futex_s(0)
            h = harmonic(m)   # the last of m woken threads (as the cost model)
            delays = [0.0] + [(futex + x * h) if x > 0 else 0.0 for x in wakes[1:]]
            extra = [futex * self._freq_hz(0)] + [0.0] * (n - 1)
            fork = self.env.now
            join = _Join()
            team = _Team(n)
            for i in range(n):
                self._member(i, r.team[i], delays[i], extra[i], finishes, team, join if i == 0 else None)
            yield team
            join.token += 1
            if join.asleep:
                # the master slept at the join: the last worker wakes it
                last = max(range(1, n), key=lambda i: finishes[i])
                yield self.env.timeout(self._futex_s(last) + self._wake_latency(0))
        else:
            busy, idle = self._repeat_plan(r)
            fork = self.env.now
            team = _Team(n)
            for i in range(n):
                self._macro_member(i, r, busy[i], idle[i], finishes, team)
            yield team
        sched.stop(master)
        if self.record_layers:
            b = self.batch_index
            for i in range(n):
                tid = i if i == 0 else self._team.first_id + i
                self.thread_rows.append((b, layer, phase, r.op, tid, self._cpu_of(threads[i]), fork, finishes[i],
                                         r.team[i].units * r.repeat))

    def _repeat_plan(self, r: Region):
        """A per-group loop run as one macro region: per thread its busy cycles and idle seconds.

        The cost model's ``time_region`` at the current frequencies decides who spins and who
        sleeps per repeat (and whether the master sleeps at the joins); the simulation then runs
        each thread's busy share through the scheduler with its idle share interleaved.
        """
        n = len(r.team)
        k = [self._cluster(i) for i in range(n)]
        f = [self._freq_hz(i) for i in range(n)]
        gaps = [0.0]
        for i in range(1, n):
            was = self._team.workers[i].state
            self._stop_worker(i)
            gaps.append(math.inf if was == "sleep" else 0.0)
        bw = self.soc.dram_bandwidth_gbps * 1e9
        t = time_region(self._team.view, r, k, f, gaps, bw)
        self.sleeps += t.sleeps
        busy = [t.busy[i] * f[i] for i in range(n)]
        idle = [max(0.0, t.duration - t.busy[i]) if i == 0 else max(0.0, t.arrive[i] - t.busy[i])
                for i in range(n)]
        return busy, idle

    # Team members are callback chains, not SimPy processes: a member's work ends inside the
    # scheduler's replan (``run(on_done=...)``), where it arrives at the join at once.

    def _macro_member(self, i: int, r: Region, busy_cycles: float, idle_s: float, finishes: list,
                      team: "_Team") -> None:
        """One thread through a macro region: its busy cycles with its idle share interleaved
        (each repeat is far shorter than PELT's window: the kernel sees the average busy share)."""
        th = self._team.threads[i]
        w = r.team[i]
        k = self._cluster(i)
        amount = busy_cycles * w.speed[k]
        if amount <= 0:
            self.env.call_in(idle_s, lambda: self._member_arrives(i, finishes, team))
            return
        bpu = w.bytes_per_unit * w.units * r.repeat / amount
        self.sched.run(th, amount, w.speed, bpu, on_done=lambda: self._member_arrives(i, finishes, team),
                       idle_s_per_unit=idle_s / amount)

    def _member(self, i: int, w, delay_s: float, extra_cycles: float, finishes: list, team: "_Team",
                join: "_Join | None" = None) -> None:
        """One thread's chunk of a region after its wake-up delay; the master (``join``) then
        spins for its budget at the join and sleeps until the last worker arrives."""
        th = self._team.threads[i]

        def done() -> None:
            if join is not None:   # armed before arriving: the last arrival resumes the master at once
                tok = join.token
                self.env.call_in(self._spin_s(i), lambda: self._master_sleeps(join, tok))
            self._member_arrives(i, finishes, team)

        def work() -> None:
            k = self._cluster(i)
            # overheads in cycles become work units at this core's speed
            cyc = w.cycles(k) + extra_cycles
            amount = cyc * w.speed[k]
            bpu = (w.bytes_per_unit * w.units / amount) if amount else 0.0
            self.sched.run(th, amount, w.speed, bpu, on_done=done)

        if delay_s > 0:
            self.env.call_in(delay_s, work)
        else:
            work()

    def _member_arrives(self, i: int, finishes: list, team: "_Team") -> None:
        finishes[i] = self.env.now
        self._arrive(i)
        team.left -= 1
        if team.left == 0:
            team.resume()   # the master goes on within this replan

    def _arrive(self, i: int) -> None:
        """Thread ``i`` reaches the join: the master spins (its budget is the region's business);
        a worker waits as in the pool - spin for the budget, then sleep - until the next fork."""
        if i == 0:
            self.sched.spin(self.pool[0])
        else:
            self._park(i)

    def _master_sleeps(self, join: "_Join", tok: int) -> None:
        if join.token == tok:
            self.sched.stop(self.pool[0])
            join.asleep = True
            self.sleeps += 1

    # -- the BLAS pool ----------------------------------------------------------------------

    def _blas_cpus(self, choice: Choice) -> tuple[int, ...]:
        """The CPUs the BLAS pool's threads may use (and how many threads it holds)."""
        allowed = self.cpuset if self.cpuset is not None else tuple(range(self.soc.n_cpus))
        if choice.pinned and self._blas.pinned_pool == "choice":
            return tuple(c for c in choice.cpus if c in allowed) or allowed
        return allowed

    def _blas_size(self, choice: Choice) -> int:
        """Threads of the BLAS pool, its caller included."""
        return min(len(self._blas_cpus(choice)), self._blas.max_threads)

    def _blas_setup(self, choice: Choice) -> int:
        """Start (or re-pin) the pool's workers for ``choice``; returns their number."""
        cpus = self._blas_cpus(choice)
        n = self._blas_size(choice) - 1
        while len(self.blas_pool) < n:
            self.blas_pool.append(self.sched.spawn(f"{self.name}.blas{len(self.blas_pool)}", cpus, self.nice,
                                                   group=self.name, cgroup=self.cgroup, colocated=self.colocated))
            self._blas_workers.append(_Worker())
        if cpus != self._blas_affinity:
            for th in self.blas_pool:
                if th.affinity != cpus:
                    self.sched.set_affinity(th, cpus)
            self._blas_affinity = cpus
        return n

    def _blas_region(self, r: Region, choice: Choice, layer: int, phase: str):
        """A GEMM on the BLAS pool: the master's dispatch, then equal shares of the region's work
        on the master and the workers; sleeping workers start after their core's wake-up latency."""
        sched, master = self.sched, self.pool[0]
        self._stop_worker(0)
        n = self._blas_setup(choice) + 1
        w = r.team[0]
        share = sum(m.units for m in r.team) / n
        yield _Work(master, 1.0, r.fork_speed)
        if self._blas.per_call and r.gemm_calls > 1:
            yield self._blas_calls(r, n)
        team = _Team(n)
        fork = self.env.now
        finishes = [0.0] * n

        def arrive(i: int) -> None:
            finishes[i] = self.env.now
            if i == 0:
                sched.spin(master)          # the caller waits for its workers (exec_blas_async_wait)
            else:
                self._wait(self.blas_pool[i - 1], self._blas_workers[i - 1], self._blas.spin_s)
            team.left -= 1
            if team.left == 0:
                team.resume()

        def start(i: int) -> None:
            th = master if i == 0 else self.blas_pool[i - 1]
            sched.run(th, share, w.speed, w.bytes_per_unit, on_done=lambda: arrive(i))

        start(0)
        for j in range(n - 1):
            delay_s = self._take(self.blas_pool[j], self._blas_workers[j])
            if delay_s > 0:
                self.env.call_in(delay_s, lambda i=j + 1: start(i))
            else:
                start(j + 1)
        yield team
        sched.stop(master)
        if self.record_layers:
            b = self.batch_index
            threads = [master, *self.blas_pool[:n - 1]]
            for i, th in enumerate(threads):
                self.thread_rows.append((b, layer, phase, r.op, -i, self._cpu_of(th), fork, finishes[i], share))

    def _blas_calls(self, r: Region, n: int) -> _Work:
        """What region ``r``'s ``gemm_calls`` GEMM calls cost beyond their arithmetic, on a pool of
        ``n`` threads, as the master's work with the waits interleaved (OpenBLAS 0.3.18 built
        without OpenMP). Every call forks and joins the pool: the caller hands each worker its
        queue entry and polls its done flag (exec_blas_async / exec_blas_async_wait in
        driver/others/blas_server.c), a line to and a line from each worker. When several
        OpenMP threads call at once (slow_conv2d's parallel_for over the batch) they take turns
        on level3_lock, a plain pthread mutex held for the whole threaded GEMM (v0.3.18
        driver/level3/level3_thread.c L543, L592, L725): glibc's default mutex does not spin,
        so each turn after the first is a futex wake by the thread that releases it and a
        wake-up of a sleeping waiter. The one split of the region's work over the pool
        (`_blas_region`) stands for its calls' arithmetic. Assumption: a waiter's wake-up is
        its family's wake latency, as if its core were idle or the thread there (a spinning
        worker) were preempted at once; a waiter left to wait for a spinner's CFS turn would
        take longer."""
        calls = r.gemm_calls
        callers = min(len(r.team), calls)
        turns = calls - 1 if callers > 1 else 0
        lat = self.runtime.cross_cluster_factor if self.view.mixes_families(self._blas_affinity or ()) else 1.0
        cycles = [calls * 2 * (n - 1) * lat * self.view.fam(k).line_latency_cycles
                  + turns * self.runtime.futex_wake_instructions / c.scalar_ipc
                  for k, c in enumerate(self.soc.clusters)]
        waiters = self._team.threads[:callers]
        self.sleeps += turns
        sleep_s = turns * sum(self._wake_latency_of(th) for th in waiters) / len(waiters)
        return _Work(self.pool[0], 1.0, tuple(1.0 / c for c in cycles), idle_s_per_unit=sleep_s)

    # -- results --------------------------------------------------------------------------

    def batch_frame(self):
        import pandas as pd
        return pd.DataFrame(self.batch_rows, columns=["batch", "choice", "start_s", "latency_s",
                                                      "energy_j", "net_energy_j", "migrations"])

    def layer_frame(self):
        import pandas as pd
        return pd.DataFrame(self.layer_rows, columns=["batch", "layer", "name", "op", "phase",
                                                      "choice", "start_s", "end_s"])

    def thread_frame(self):
        """One row per thread per parallel region: when it forked and when it finished. ``thread``:
        the OpenMP team's index (0: the master); a BLAS pool's workers are -1, -2, ...; NNPACK's
        are ``NNP_THREAD_ID`` + 1, + 2, ..."""
        import pandas as pd
        df = pd.DataFrame(self.thread_rows, columns=["batch", "layer", "phase", "op", "thread",
                                                     "cpu", "fork_s", "finish_s", "units"])
        df["cluster"] = [self.soc.cluster_of(c).name for c in df["cpu"]]
        return df
