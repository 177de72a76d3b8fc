"""A Work-like benchmark: a fixed, seeded script of interactive tasks and a score from their times.

Modelled after PCMark Work 3.0 (UL): web browsing, writing, photo editing, data manipulation
and video editing. Each task is a few steps; a step is a burst of work on the app's UI thread
with, for the editing tasks, a small worker pool running concurrently, then a short animation
drawn frame by frame at the display refresh rate (`appmodels.FramePipeline`). The task
figures and their sources are in ``appmodels.toml`` (table ``workbench``).

A step is scored by the time its work takes plus what its animation lost to late frames (a
frame done x after its deadline shows the previous one ceil(x / period) vsyncs longer): PCMark
scores tasks by completion times, and an animation that keeps the display rate takes the same
time on any phone, so counting its whole length would only dilute the work's slowdown.
A task's time is the sum of its steps' times (idle gaps between steps excluded); the score is
``1000 x geometric mean over tasks of reference_time / time``, so the reference run scores
1000 and a run twice as slow on every task scores 500. The script is the same for every run
with the same seed: the per-step work factors are drawn before the run starts, so background
load never changes what the benchmark asks for, only how long it takes.

Layering: drives a scheduler like every app model; knows nothing of devices or training
(`swansim.runs.scenarios.work_score` combines them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import simpy

from swansim.apps.appmodels import (MINSTR, AndroidNice, AppMemory, FramePipeline, TaskSpec, exposed_misses,
                                    lognormal_factor, scalar_speed)
from swansim.apps.ux import FRAME_COLUMNS, UxRecorder
from swansim.hw.profile import TOP_APP, DeviceSpec
from swansim.kernel.sched import Scheduler

SCORE_SCALE = 1000.0


@dataclass(frozen=True)
class Step:
    """One scripted step: its work, fixed before the run."""

    task: str
    index: int
    gap_s: float
    ui_instr: float
    workers: int            # pool threads; -1 = one per core of the top-app cpuset
    pool_instr: float       # pool work, handed out in chunks to whichever worker is free
    chunks: int
    frames: int
    frame_ui_instr: tuple[float, ...]
    frame_render_instr: tuple[float, ...]
    dram_bytes_per_instr: float


def script(tasks: Sequence[TaskSpec], seed: int = 0, passes: int = 1) -> list[Step]:
    """The benchmark's fixed sequence of steps: ``passes`` times every task, in table order."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(passes):
        for t in tasks:
            for i in range(t.steps):
                f = lognormal_factor(rng, t.step_sigma)
                fu = tuple(t.ui_minstr_per_frame * MINSTR * lognormal_factor(rng, t.step_sigma)
                           for _ in range(t.frames))
                fr = tuple(t.render_minstr_per_frame * MINSTR * lognormal_factor(rng, t.step_sigma)
                           for _ in range(t.frames))
                steps.append(Step(t.name, i, t.gap_s, t.ui_minstr * MINSTR * f, t.workers,
                                  t.pool_minstr * MINSTR * f, t.pool_chunks, t.frames, fu, fr,
                                  t.dram_bytes_per_instr))
    return steps


class WorkBench:
    """Runs a script as the top app: one UI thread, one RenderThread, a worker pool."""

    APP = "workbench"

    def __init__(self, env: simpy.Environment, sched: Scheduler, spec: DeviceSpec, steps: Sequence[Step],
                 android: AndroidNice, recorder: UxRecorder | None = None, start_s: float = 0.0,
                 cpuset: Sequence[int] | None = None, memory: AppMemory | None = None):
        self.env, self.sched, self.spec = env, sched, spec
        self.steps = tuple(steps)
        self.recorder = recorder or UxRecorder()
        self.start_s = start_s
        cpus = tuple(cpuset if cpuset is not None else spec.cpusets[TOP_APP])
        self.speed = scalar_speed(spec)
        l3 = memory.l3_use(spec) if memory is not None else None
        self.pipeline = FramePipeline.top_app(env, sched, spec, self.APP, cpus, android, self.recorder, l3)
        n_workers = max((self._pool_size(s, cpus) for s in self.steps), default=0)
        self.workers = [sched.spawn(f"{self.APP}.worker{i}", cpus, android.worker_nice, group=self.APP, l3=l3,
                                    cgroup=TOP_APP, colocated=True)
                        for i in range(n_workers)]
        self._cpus = cpus
        self.done = env.event()
        self.process = env.process(self._run())

    @staticmethod
    def _pool_size(step: Step, cpus: Sequence[int]) -> int:
        if step.pool_instr <= 0:
            return 0
        return len(cpus) if step.workers < 0 else step.workers

    def _pool(self, step: Step):
        """Generator: the pool's work in chunks, each taken by whichever worker is free."""
        env = self.env
        left = [step.chunks]
        chunk = step.pool_instr / step.chunks

        def worker(th):
            while left[0] > 0:
                left[0] -= 1
                yield self.sched.run(th, chunk, self.speed, step.dram_bytes_per_instr,
                                     exposed_misses(step.dram_bytes_per_instr))

        n = self._pool_size(step, self._cpus)
        yield simpy.AllOf(env, [env.process(worker(w)) for w in self.workers[:n]])

    def _run(self):
        env, sched = self.env, self.sched
        if self.start_s > env.now:
            yield env.timeout(self.start_s - env.now)
        for s in self.steps:
            yield env.timeout(s.gap_s)
            self.pipeline.bytes_per_instr = s.dram_bytes_per_instr
            start = env.now
            jobs = [sched.run(self.pipeline.ui, s.ui_instr, self.speed, s.dram_bytes_per_instr,
                              exposed_misses(s.dram_bytes_per_instr))]
            if self._pool_size(s, self._cpus):
                jobs.append(env.process(self._pool(s)))
            yield simpy.AllOf(env, jobs)
            work_s = env.now - start
            first = len(self.recorder.frame_rows)
            for fu, fr in zip(s.frame_ui_instr, s.frame_render_instr):
                yield from self.pipeline.frame(fu, fr)
            yield from self.pipeline.idle()
            stretch_s = animation_stretch_s(self.recorder.frame_rows[first:], self.APP, self.pipeline.vsync.period_s)
            self.recorder.add_task(self.APP, s.task, start, env.now, work_s + stretch_s)
        self.done.succeed()


_APP, _DEADLINE, _DONE = (FRAME_COLUMNS.index(c) for c in ("app", "deadline_s", "done_s"))


def animation_stretch_s(frame_rows, app: str, period_s: float) -> float:
    """How much longer ``app``'s animation showed than at the display rate: a frame done x after
    its deadline keeps the previous one on screen ceil(x / period) more vsyncs.

    ``frame_rows`` are `UxRecorder.frame_rows` tuples (columns `ux.FRAME_COLUMNS`)."""
    late = [r[_DONE] - r[_DEADLINE] for r in frame_rows if r[_APP] == app and r[_DONE] > r[_DEADLINE] + 1e-9]
    return period_s * sum(math.ceil(x / period_s - 1e-9) for x in late)


def task_times(tasks: pd.DataFrame) -> pd.Series:
    """Time per task (sum over its steps), in the order tasks first appear."""
    return tasks.groupby("task", sort=False)["time_s"].sum()


def score(times: Mapping[str, float] | pd.Series, reference: Mapping[str, float] | pd.Series | None = None) -> float:
    """1000 x the geometric mean over tasks of reference time / time (1000 without a reference)."""
    times = dict(times)
    if not times:
        raise ValueError("no task times to score")
    ref = dict(reference) if reference is not None else times
    missing = set(times) - set(ref)
    if missing:
        raise ValueError(f"reference lacks tasks {sorted(missing)}")
    logs = [math.log(ref[k] / t) for k, t in times.items()]
    return SCORE_SCALE * math.exp(sum(logs) / len(logs))


def score_drop_pct(baseline: float, loaded: float) -> float:
    """How much lower the loaded score is, in percent of the baseline."""
    return 100.0 * (baseline - loaded) / baseline
