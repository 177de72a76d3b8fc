"""Scenarios that combine a device, the owner's apps and background training.

This module sits above `swansim.device` (it builds devices) and joins what the layers below
keep apart: the Work-like benchmark (`swansim.apps.workbench`) and the training job
(`swansim.dnn.training`). A *background* is a callable ``background(device) -> job``
started on a fresh device before the benchmark; the job needs a ``stop()``.

`work_score` is the Swan paper's user-experience measurement (Fig. 3: the PCMark Work 3.0
score with and without training in the background), done on the simulated phone.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import pandas as pd

from swansim.apps.appmodels import AppTable, load_app_table
from swansim.apps.ux import UxRecorder, jank_summary
from swansim.apps.workbench import WorkBench, script, score, task_times
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import little_one, pytorch_default, top_one
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import TrainingJob
from swansim.hw.profile import TOP_APP, Catalogue, DeviceSpec
from swansim.kernel.placement import AUTO

Background = Callable[[Device], object]


# Swan paper Fig. 3: PCMark Work 3.0 score drop (%) with pytorch-default training in the
# background. The Pixel 3 ResNet-34 point is calibration (the app models' L3 intensity was set
# with it in view); the other four validate (experiments/calibration/ledger.csv).
PAPER_FIG3_DROP_PCT = {
    ("pixel3", "resnet34"): 26.7, ("pixel3", "shufflenet_v2_x2_0"): 25.1, ("pixel3", "mobilenet_v2"): 29.2,
    ("galaxy-s10e", "resnet34"): 7.0, ("galaxy-s10e", "shufflenet_v2_x2_0"): 15.5,
}
# placement name -> the choice it trains on (`TrainingBackground`)
BACKGROUND_PLACEMENTS = {"pytorch-default": pytorch_default, "little1": little_one, "top1": top_one}
# Training alone before the owner's benchmark or app starts: long enough for the job's
# cores to reach their steady clocks and the L3 to hold the training's stream (30 s).
WARMUP_S = 30.0


@dataclass
class TrainingBackground:
    """Start a training job on a device: the paper's baseline, or one thread on one core.

    ``placement``: "pytorch-default" (threads = big cores, no affinity, in the process's
    cpuset), "little1" (one thread pinned to the first little core) or "top1" (one thread pinned
    to the first core of the top-capacity cluster, as Swan settles). ``group``: the training
    process's Android group - its cpuset and schedtune attributes - at ``nice`` 0 (Swan does
    not renice it). Swan ran ``python`` in Termux: a process forked from Termux's app process
    keeps the cgroups it inherited at fork (ActivityManager moves only the app process's own
    threads), so a session opened with Termux on the screen stays in top-app even when Termux
    and the screen go to the background; "foreground" is the alternative of a session started
    while Termux was not on top. The process is not in top-app's colocation group (CAF's
    add_new_task_to_grp adds new threads of a colocated process, not new processes).
    """

    model: str = "resnet34"
    placement: str = "pytorch-default"
    runtime: str = "pytorch"
    nice: int = 0
    group: str = TOP_APP

    def __call__(self, dev: Device) -> TrainingJob:
        if self.placement not in BACKGROUND_PLACEMENTS:
            raise ValueError(f"placement must be one of {tuple(BACKGROUND_PLACEMENTS)}, got {self.placement!r}")
        soc = dev.spec.soc
        choice = BACKGROUND_PLACEMENTS[self.placement](soc)
        model = build_task(self.model)
        return TrainingJob(dev.env, dev.sched, soc, model, load_runtime(self.runtime), choice,
                           nice=self.nice, cpuset=dev.spec.cpuset(self.group), name="train",
                           record_layers=False, cgroup=self.group)

    @property
    def label(self) -> str:
        return f"{self.model}@{self.placement}"


@dataclass
class DenseLoad:
    """A stand-in background: ``threads`` threads spinning through dense work, back to back.

    ``cpus`` None: unpinned within the cpuset of Android ``group``; otherwise each thread
    pinned to one cpu of ``cpus`` in turn. Built on the scheduler API alone (no training job).
    """

    threads: int = 4
    cpus: tuple[int, ...] | None = None
    nice: int = 0
    group: str = TOP_APP
    chunk_instr: float = 5e8

    def __call__(self, dev: Device) -> "DenseLoad._Job":
        return DenseLoad._Job(self, dev)

    class _Job:
        def __init__(self, load: "DenseLoad", dev: Device):
            self.dev, self.load, self.stopped = dev, load, False
            allowed = dev.spec.cpuset(load.group)
            speed = tuple(c.scalar_ipc for c in dev.spec.soc.clusters)
            self.threads = [dev.sched.spawn(f"dense{i}", allowed if load.cpus is None else
                                            (load.cpus[i % len(load.cpus)],), load.nice, group="dense",
                                            cgroup=load.group)
                            for i in range(load.threads)]
            self.procs = [dev.env.process(self._spin(t, speed)) for t in self.threads]

        def _spin(self, t, speed):
            while not self.stopped:
                yield self.dev.sched.run(t, self.load.chunk_instr, speed)

        def stop(self) -> None:
            self.stopped = True


@dataclass(frozen=True)
class HeldClock:
    """No training: the smallest cluster's floor (scaling_min_freq) raised to its top OPP, as a
    thread that keeps one of its cores busy holds the cluster's one clock - that thread's effect
    on the cluster's other cores, without the thread (experiments/ux_raise.py)."""

    def __call__(self, dev: Device) -> None:
        soc = dev.spec.soc
        policy = dev.cpufreq[soc.clusters.index(soc.little)]
        policy.set_floor(policy.fmax_mhz)


@dataclass(frozen=True)
class WorkRun:
    """One benchmark run: its score, per-task times and the frames it drew."""

    score: float
    tasks: pd.DataFrame
    frames: pd.DataFrame
    end_s: float


def run_workbench(spec: DeviceSpec, config: DeviceConfig, background: Background | None = None,
                  warmup_s: float = WARMUP_S, passes: int | None = None, seed: int = 0, table: AppTable | None = None,
                  reference: pd.Series | None = None, placement: str = AUTO) -> WorkRun:
    """The Work-like benchmark on a fresh ``spec`` phone, after ``warmup_s`` of background load
    alone; ``passes`` of its script (None: the app table's, a run as long as PCMark's)."""
    table = table or load_app_table()
    dev = Device(spec, replace(config, screen_on=True, placement=placement))
    job = background(dev) if background is not None else None
    rec = UxRecorder()
    steps = script(table.tasks, seed, table.benchmark_passes(passes))
    bench = WorkBench(dev.env, dev.sched, dev.spec, steps, table.android, rec,
                      start_s=warmup_s if job is not None else 0.0, memory=table.memory)
    dev.env.run(until=bench.done)
    dev.sched.sync()
    if job is not None:
        job.stop()
    tasks = rec.tasks()
    times = task_times(tasks)
    return WorkRun(score(times, reference), tasks, rec.frames(), dev.now_s)


@lru_cache(maxsize=64)
def _reference(device: str, passes: int, seed: int, placement: str) -> tuple[tuple[str, float], ...]:
    run = run_workbench(Catalogue.load().device(device), DeviceConfig(seed=seed), None, passes=passes, seed=seed,
                        placement=placement)
    return tuple(task_times(run.tasks).items())


def reference_times(device: str = "pixel3", passes: int | None = None, seed: int = 0,
                    placement: str = AUTO) -> pd.Series:
    """Per-task times of the benchmark alone on ``device`` (cached): the score's yardstick."""
    passes = load_app_table().benchmark_passes(passes)   # one cache entry per run, however it was asked for
    return pd.Series(dict(_reference(device, passes, seed, placement)), name="time_s")


def work_score(spec: DeviceSpec, config: DeviceConfig, background: Background | None = None,
               warmup_s: float = WARMUP_S, passes: int | None = None, seed: int = 0, reference: str | None = "pixel3",
               placement: str = AUTO) -> tuple[float, pd.DataFrame]:
    """Work-like score of a ``spec`` phone, with an optional background load, and its per-task frame.

    ``reference``: the device whose unloaded task times score 1000 (default the Pixel 3, so
    scores compare across phones); None scores against ``spec``'s own profile unloaded.
    The per-task frame has the task, its time, the reference time and the task's score.
    """
    ref = reference_times(reference or spec.name, passes, seed, placement)
    run = run_workbench(spec, config, background, warmup_s, passes, seed, reference=ref, placement=placement)
    per = task_times(run.tasks).rename("time_s").to_frame()
    per["reference_s"] = ref.reindex(per.index)
    per["task_score"] = 1000.0 * per["reference_s"] / per["time_s"]
    return run.score, per.reset_index()


def fig3_drop_pct(device: str, model: str, seed: int = 0, passes: int | None = None, placement: str = AUTO,
                  group: str = TOP_APP) -> float:
    """Swan Fig. 3's quantity: the Work-like score drop (%) of ``device`` with PyTorch's default
    training ``model`` in the background (after `WARMUP_S` of training alone), against the same
    phone without training; both scored against the Pixel 3 alone."""
    from swansim.apps.workbench import score_drop_pct

    ref = reference_times("pixel3", passes, seed, placement)
    spec, cfg = Catalogue.load().device(device), DeviceConfig(seed=seed)
    alone = run_workbench(spec, cfg, None, passes=passes, seed=seed, reference=ref, placement=placement).score
    loaded = run_workbench(spec, cfg, TrainingBackground(model, "pytorch-default", group=group), WARMUP_S, passes, seed,
                           reference=ref, placement=placement).score
    return score_drop_pct(alone, loaded)


def app_jank(spec: DeviceSpec, config: DeviceConfig, category: str, background: Background | None = None,
             duration_s: float = 60.0, warmup_s: float = WARMUP_S, placement: str = AUTO,
             table: AppTable | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One app of ``category`` in the foreground of a ``spec`` phone for ``duration_s`` (after
    ``warmup_s`` of background alone); returns its frames and its jank summary (one row)."""
    table = table or load_app_table()
    dev = Device(spec, replace(config, screen_on=True, placement=placement))
    job = background(dev) if background is not None else None
    rec = UxRecorder()
    app = table.app(dev.env, dev.sched, dev.spec, category, rec, config.seed)
    start_s = warmup_s if job is not None else 0.0
    dev.env.timeout(start_s).callbacks.append(lambda _e: app.start())
    dev.run(start_s + duration_s)
    app.stop()
    if job is not None:
        job.stop()
    frames = rec.frames()
    return frames, jank_summary(frames, by="app")
