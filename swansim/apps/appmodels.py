"""The phone's owner's apps as SimPy processes: a UI thread and a RenderThread drawing frames.

An app of a trace category (`swansim.apps.traces.CATEGORIES`) is a UI (main) thread and a
RenderThread in the top-app cpuset at the nice values Android gives a top app, plus 0-2
worker threads. It draws only while there is something to draw: bursts of frames (a scroll,
an animation) at the display refresh rate, separated by idle gaps; continuous categories
(video, games, camera) draw all the time. Per frame the UI thread starts at a vsync, does its
work, hands the frame to the RenderThread (waiting if the previous frame still renders,
as hwui's DrawFrameTask does) and is free for the next vsync; the frame is done when the
RenderThread finishes. Work is in scalar (A55-equivalent) instructions: on a core it runs at
``scalar_ipc`` of its cluster per cycle.

Every demand figure lives in ``appmodels.toml`` next to its source or stated assumption;
`load_app_table` validates it and names the file and field of any bad figure.

Common random numbers: an app draws from streams of its own, keyed by the run's seed and the
app's name (`app_streams`), one per kind of draw (bursts and gaps, per-frame work, worker jobs).
So the same app with the same seed gets the same input - the same bursts, the same work for
its k-th frame - whatever runs beside it, and a comparison across backgrounds measures the
background, not a different draw. (Drawn from one shared stream, the interleaving of the
draws would follow the timing, which the background changes.)

Layering: this module drives a ``kernel.sched.Scheduler`` and reads ``hw`` specs; it never
imports the device or the training job. `play_trace` takes any object with ``env``, ``sched``,
``platform``, ``spec`` and ``config.seed`` (a `swansim.device.Device`).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

import numpy as np
import simpy

from swansim.apps.traces import CATEGORIES, Session
from swansim.apps.ux import UxRecorder
from swansim.errors import InputError
from swansim.hw.profile import TOP_APP, DeviceSpec
from swansim.hw.sourced import SourcedTable, read_toml
from swansim.kernel.sched import L3Use, Scheduler, Thread

APP_TABLE_PATH = Path(__file__).resolve().with_name("appmodels.toml")
MINSTR = 1e6
# Memory queueing (kernel.sched): an app thread waits for its DRAM misses' latency, which grows
# with the memory controller's load (training streams through it). Misses per instruction =
# dram_bytes_per_instr / CACHE_LINE_BYTES; an out-of-order core overlaps APP_MLP of them, so
# APP_MLP misses cost one latency. CACHE_LINE_BYTES: Arm Cortex-A55/A75/A76 TRMs (64-byte lines).
# APP_MLP: assumption, 2 (bounds 1-10: 1 = fully serialised misses; OoO cores overlap a few
# misses on app code); it also divides the app's L3 hits (table `memory`) into exposed ones.
# Queueing alone barely moves the Work-like score (the app's own DRAM traffic is small); what
# background training costs the app through memory is mostly its L3 working set (AppMemory).
CACHE_LINE_BYTES = 64.0
APP_MLP = 2.0


def exposed_misses(bytes_per_instr: float) -> float:
    """DRAM misses per instruction whose latency an app thread waits for."""
    return bytes_per_instr / CACHE_LINE_BYTES / APP_MLP
# A vsync index is rounded up from time * refresh; this absorbs float error at a boundary.
_VSYNC_EPS = 1e-9


# ---------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class AndroidNice:
    """Nice values Android gives the foreground app's threads (Process.THREAD_PRIORITY_*)."""

    ui_nice: int
    render_nice: int
    worker_nice: int


@dataclass(frozen=True)
class AppMemory:
    """How app code uses the shared L3 (``appmodels.toml`` table ``memory``)."""

    l2_misses_per_kinstr: float   # private-L2 misses that hit the L3 when the app runs alone
    l3_working_set_kib: float     # the app's code and data that live in the L3
    l3_hit_latency_ns: float

    def l3_use(self, spec: DeviceSpec) -> L3Use | None:
        """The app threads' stake in this SoC's L3 (None on an SoC without a shared L3)."""
        if spec.soc.l3_kib <= 0:
            return None
        return L3Use(accesses_per_unit=self.l2_misses_per_kinstr / 1000.0, exposed_share=1.0 / APP_MLP,
                     l3_bytes=spec.soc.l3_kib * 1024.0,
                     working_set_bytes=min(self.l3_working_set_kib, spec.soc.l3_kib) * 1024.0,
                     hit_latency_s=self.l3_hit_latency_ns * 1e-9)


@dataclass(frozen=True)
class CategoryModel:
    """CPU demand of one app category (see ``appmodels.toml`` for units and sources)."""

    name: str
    ui_minstr_per_frame: float
    render_minstr_per_frame: float
    frame_sigma: float
    frame_rate_hz: float
    burst_s: float
    gap_s: float
    workers: int
    worker_minstr: float
    worker_interval_s: float
    worker_nice: int
    dram_bytes_per_instr: float

    @property
    def continuous(self) -> bool:
        return self.gap_s == 0.0


@dataclass(frozen=True)
class TaskSpec:
    """One task of the Work-like benchmark (see ``appmodels.toml``)."""

    name: str
    steps: int
    ui_minstr: float
    workers: int
    pool_minstr: float
    pool_chunks: int
    frames: int
    ui_minstr_per_frame: float
    render_minstr_per_frame: float
    step_sigma: float
    gap_s: float
    dram_bytes_per_instr: float


@dataclass(frozen=True)
class AppTable:
    android: AndroidNice
    memory: AppMemory
    categories: dict[str, CategoryModel]
    tasks: tuple[TaskSpec, ...]
    path: Path
    passes: int   # the Work-like benchmark runs its script this often (table ``benchmark``)

    def benchmark_passes(self, passes: int | None = None) -> int:
        """How often the Work-like benchmark runs its script: ``passes``, or the table's (None)."""
        return self.passes if passes is None else passes

    def app(self, env: simpy.Environment, sched: Scheduler, spec: DeviceSpec, category: str, recorder: UxRecorder,
            seed: int, name: str | None = None, load_scale: float = 1.0) -> "App":
        """A session of ``category`` on a phone, with the table's Android nice values and memory
        use (not started: `App.start`). Every path that runs an owner's app builds it here."""
        return App(env, sched, spec, self.categories[category], self.android, recorder, seed,
                   name=name or category, load_scale=load_scale, memory=self.memory)


# Per field: (low, high, integer?) - a figure outside is refused as a likely unit mistake.
_BOUNDS = {
    "ui_nice": (-20, 19, True), "render_nice": (-20, 19, True), "worker_nice": (-20, 19, True),
    "ui_minstr_per_frame": (0.0, 1000.0, False), "render_minstr_per_frame": (0.0, 1000.0, False),
    "frame_sigma": (0.0, 2.0, False), "frame_rate_hz": (0.0, 240.0, False),
    "burst_s": (0.01, 3600.0, False), "gap_s": (0.0, 3600.0, False),
    "workers": (-1, 16, True), "worker_minstr": (0.0, 1e6, False), "worker_interval_s": (0.001, 3600.0, False),
    "dram_bytes_per_instr": (0.0, 10.0, False),
    "steps": (1, 1000, True), "ui_minstr": (0.0, 1e6, False), "frames": (0, 10000, True),
    "pool_minstr": (0.0, 1e7, False), "pool_chunks": (1, 10000, True),
    "step_sigma": (0.0, 2.0, False),
    "l2_misses_per_kinstr": (0.0, 100.0, False), "l3_working_set_kib": (1.0, 65536.0, False),
    "l3_hit_latency_ns": (1.0, 200.0, False),
}


def _read(table: dict, path: Path, prefix: str, cls: type, skip: tuple[str, ...] = ("name",)) -> dict:
    """The fields of ``cls`` from ``table``: each present, in bounds and with a source."""
    t = SourcedTable(table, path, prefix)
    out = {}
    for f in fields(cls):
        if f.name not in skip:
            lo, hi, integer = _BOUNDS[f.name]
            out[f.name] = t.int(f.name, lo, hi) if integer else t.num(f.name, lo, hi)
    t.done()
    return out


def load_app_table(path: str | Path = APP_TABLE_PATH) -> AppTable:
    """Read and validate the app-model table (categories, Android nice values, benchmark tasks)."""
    path = Path(path)
    data = read_toml(path)
    for key in ("android", "memory", "categories", "workbench", "benchmark"):
        if not isinstance(data.get(key), dict):
            raise InputError(path, key, "missing required table")
    android = AndroidNice(**_read(data["android"], path, "android", AndroidNice, skip=()))
    memory = AppMemory(**_read(data["memory"], path, "memory", AppMemory, skip=()))
    cats = {}
    for name in CATEGORIES:
        if name not in data["categories"]:
            raise InputError(path, f"categories.{name}", "missing category")
        cats[name] = CategoryModel(name=name, **_read(data["categories"][name], path, f"categories.{name}",
                                                      CategoryModel))
        if cats[name].workers < 0:
            raise InputError(path, f"categories.{name}.workers", "must be 0 or more (-1 is for benchmark pools)")
    for name in data["categories"]:
        if name not in CATEGORIES:
            raise InputError(path, f"categories.{name}", f"unknown category (expected one of {', '.join(CATEGORIES)})")
    tasks = tuple(TaskSpec(name=n, **_read(t, path, f"workbench.{n}", TaskSpec))
                  for n, t in data["workbench"].items())
    if not tasks:
        raise InputError(path, "workbench", "no tasks")
    bench = SourcedTable(data["benchmark"], path, "benchmark")
    passes = bench.int("passes", 1, 100)
    bench.done()
    return AppTable(android, memory, cats, tasks, path, passes)


# ---------------------------------------------------------------------------------------------
# Running apps


def scalar_speed(spec: DeviceSpec) -> tuple[float, ...]:
    """Scalar instructions per cycle per cluster: the speed of app work on each core type."""
    return tuple(c.scalar_ipc for c in spec.soc.clusters)


class Vsync:
    """The display's vsync grid: tick k at k / refresh_hz."""

    def __init__(self, refresh_hz: float):
        if refresh_hz <= 0:
            raise ValueError(f"display refresh must be positive, got {refresh_hz}")
        self.refresh_hz = refresh_hz
        self.period_s = 1.0 / refresh_hz

    def index_at_or_after(self, t_s: float) -> int:
        return math.ceil(t_s * self.refresh_hz - _VSYNC_EPS)

    def time(self, k: int) -> float:
        return k / self.refresh_hz


class FramePipeline:
    """A UI thread and a RenderThread producing frames on vsync, recorded once each when done.

    The UI thread starts a frame at a vsync, hands it to the RenderThread (waiting while the
    previous frame still renders) and may start the next frame at a later vsync while this one
    renders. Every started frame ends up exactly once in ``recorded`` (done), ``abandoned``
    (cut short by `abandon`) or `in_flight`.
    """

    def __init__(self, env: simpy.Environment, sched: Scheduler, app: str, ui: Thread, render: Thread,
                 speed: Sequence[float], vsync: Vsync, recorder: UxRecorder, bytes_per_instr: float = 0.0):
        self.env, self.sched, self.app = env, sched, app
        self.ui, self.render = ui, render
        self.speed, self.vsync, self.recorder = tuple(speed), vsync, recorder
        self.bytes_per_instr = bytes_per_instr
        self._render_free: simpy.Event | None = None   # pending while a frame renders
        self._render_proc: simpy.Process | None = None
        self._ui_open = False                          # the UI thread holds a started frame
        self.started = 0
        self.recorded = 0
        self.abandoned = 0

    @classmethod
    def top_app(cls, env: simpy.Environment, sched: Scheduler, spec: DeviceSpec, app: str, cpus: Sequence[int],
                android: AndroidNice, recorder: UxRecorder, l3: L3Use | None,
                bytes_per_instr: float = 0.0) -> "FramePipeline":
        """A pipeline on new UI and render threads of a top app (Android's nice values)."""
        # an app ActivityManager put on top: top-app group, attached to its related thread group
        ui = sched.spawn(f"{app}.ui", cpus, android.ui_nice, group=app, l3=l3, cgroup=TOP_APP, colocated=True)
        render = sched.spawn(f"{app}.render", cpus, android.render_nice, group=app, l3=l3, cgroup=TOP_APP,
                             colocated=True)
        return cls(env, sched, app, ui, render, scalar_speed(spec), Vsync(spec.display_refresh_hz), recorder,
                   bytes_per_instr)

    @property
    def in_flight(self) -> int:
        return int(self._ui_open) + int(self._render_proc is not None)

    def frame(self, ui_instr: float, render_instr: float, every_vsyncs: int = 1):
        """Generator: draw one frame at the next vsync (of every ``every_vsyncs``-th one)."""
        env = self.env
        k = self.vsync.index_at_or_after(env.now)
        if every_vsyncs > 1:
            k = -(-k // every_vsyncs) * every_vsyncs
        vsync_s = self.vsync.time(k)
        if vsync_s > env.now:
            yield env.timeout(vsync_s - env.now)
        self.started += 1
        self._ui_open = True
        ui_start = env.now
        yield self.sched.run(self.ui, ui_instr, self.speed, self.bytes_per_instr, exposed_misses(self.bytes_per_instr))
        ui_done = env.now
        while self._render_free is not None:
            yield self._render_free
        self._ui_open = False
        self._render_free = env.event()
        self._render_proc = env.process(self._render(vsync_s, ui_start, ui_done, render_instr))

    def _render(self, vsync_s: float, ui_start: float, ui_done: float, render_instr: float):
        start = self.env.now
        try:
            yield self.sched.run(self.render, render_instr, self.speed, self.bytes_per_instr,
                                 exposed_misses(self.bytes_per_instr))
        except simpy.Interrupt:
            return
        self.recorder.add_frame(self.app, vsync_s, self.vsync.period_s, ui_start, ui_done, start, self.env.now)
        self.recorded += 1
        free, self._render_free, self._render_proc = self._render_free, None, None
        free.succeed()

    def idle(self):
        """Generator: wait until the last handed-off frame has rendered."""
        while self._render_free is not None:
            yield self._render_free

    def abandon(self) -> None:
        """Drop work in flight (the app left the screen): those frames are not recorded."""
        self.abandoned += self.in_flight
        if self._render_proc is not None and self._render_proc.is_alive:
            self._render_proc.interrupt()
        self._render_proc, self._render_free, self._ui_open = None, None, False
        self.sched.stop(self.ui)
        self.sched.stop(self.render)


@dataclass
class AppStreams:
    """An app's random streams, one per kind of draw, so that how many draws one kind makes
    (frames per burst depend on timing) never shifts another."""

    bursts: np.random.Generator    # burst lengths and the gaps between bursts, in turn
    frames: np.random.Generator    # per-frame UI and render work, frame by frame
    workers: np.random.Generator   # worker job intervals and amounts, in turn


def named_stream(seed: int, name: str) -> np.random.Generator:
    """The stream keyed by (seed, name): the same name and seed draw the same numbers in any
    run. The key is a hash of the name (stable across processes, unlike ``hash``)."""
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(key,)))


def app_streams(seed: int, name: str) -> AppStreams:
    """Streams keyed by (seed, app name, kind) (`named_stream`)."""
    return AppStreams(*(named_stream(seed, f"{name}/{kind}") for kind in ("bursts", "frames", "workers")))


def lognormal_factor(rng: np.random.Generator, sigma: float) -> float:
    """A factor with mean 1 (sigma 0 gives exactly 1)."""
    return float(rng.lognormal(-0.5 * sigma * sigma, sigma)) if sigma > 0 else 1.0


class App:
    """One foreground session of a category: frame bursts, idle gaps, worker jobs, until `stop`.

    Its random input comes from ``app_streams(seed, name)`` (common random numbers)."""

    def __init__(self, env: simpy.Environment, sched: Scheduler, spec: DeviceSpec, model: CategoryModel,
                 android: AndroidNice, recorder: UxRecorder, seed: int,
                 name: str | None = None, load_scale: float = 1.0, cpuset: Sequence[int] | None = None,
                 memory: AppMemory | None = None):
        if load_scale <= 0:
            raise ValueError(f"load_scale must be positive, got {load_scale}")
        self.env, self.sched, self.spec, self.model = env, sched, spec, model
        self.recorder = recorder
        self.name = name or model.name
        self.streams = app_streams(seed, self.name)
        self.load_scale = load_scale
        cpus = tuple(cpuset if cpuset is not None else spec.cpusets[TOP_APP])
        self.speed = scalar_speed(spec)
        l3 = memory.l3_use(spec) if memory is not None else None
        self.pipeline = FramePipeline.top_app(env, sched, spec, self.name, cpus, android, recorder, l3,
                                              model.dram_bytes_per_instr)
        self.vsync = self.pipeline.vsync
        self.workers = [sched.spawn(f"{self.name}.worker{i}", cpus, model.worker_nice, group=self.name, l3=l3,
                                    cgroup=TOP_APP, colocated=True)
                        for i in range(model.workers)]
        self._procs: list[simpy.Process] = []
        self.running = False

    @property
    def threads(self) -> list[Thread]:
        return [self.pipeline.ui, self.pipeline.render, *self.workers]

    def start(self) -> "App":
        self.running = True
        self._procs = [self.env.process(self._draw())]
        if self.workers and self.model.worker_minstr > 0:
            self._procs.append(self.env.process(self._work()))
        return self

    def stop(self) -> None:
        """The app leaves the screen: work in flight is dropped, its threads sleep."""
        if not self.running:
            return
        self.running = False
        for p in self._procs:
            if p.is_alive:
                p.interrupt()
        self.pipeline.abandon()
        for w in self.workers:
            self.sched.stop(w)

    def _every_vsyncs(self) -> int:
        rate = self.model.frame_rate_hz
        if rate <= 0 or rate >= self.vsync.refresh_hz:
            return 1
        return max(1, round(self.vsync.refresh_hz / rate))

    def _draw(self):
        m, env = self.model, self.env
        bursts, frames = self.streams.bursts, self.streams.frames
        every = self._every_vsyncs()
        try:
            while True:
                burst_end = env.now + (m.burst_s if m.continuous else bursts.exponential(m.burst_s))
                while env.now < burst_end:
                    ui = m.ui_minstr_per_frame * MINSTR * self.load_scale * lognormal_factor(frames, m.frame_sigma)
                    rd = m.render_minstr_per_frame * MINSTR * self.load_scale * lognormal_factor(frames, m.frame_sigma)
                    yield from self.pipeline.frame(ui, rd, every)
                if not m.continuous:
                    yield from self.pipeline.idle()
                    yield env.timeout(bursts.exponential(m.gap_s))
        except simpy.Interrupt:
            return

    def _work(self):
        m, rng, env = self.model, self.streams.workers, self.env
        try:
            while True:
                yield env.timeout(rng.exponential(m.worker_interval_s))
                start = env.now
                amount = m.worker_minstr * MINSTR * self.load_scale * lognormal_factor(rng, m.frame_sigma)
                jobs = [self.sched.run(w, amount, self.speed, m.dram_bytes_per_instr,
                                       exposed_misses(m.dram_bytes_per_instr)) for w in self.workers]
                yield simpy.AllOf(env, jobs)
                self.recorder.add_task(self.name, f"{m.name}.worker_job", start, env.now)
        except simpy.Interrupt:
            return


class TracePlayer:
    """Plays one user's foreground sessions: screen on, the category's app, screen off."""

    def __init__(self, env: simpy.Environment, sched: Scheduler, spec: DeviceSpec,
                 sessions: Sequence[Session], seed: int,
                 table: AppTable | None = None, recorder: UxRecorder | None = None,
                 set_screen=None, until_s: float | None = None):
        self.env, self.sched, self.spec = env, sched, spec
        self.sessions = tuple(sessions)
        self.seed = seed
        self.table = table or load_app_table()
        self.recorder = recorder or UxRecorder()
        self._set_screen = set_screen or sched.platform.set_screen
        self.until_s = until_s
        self.apps: list[App] = []
        self.process = env.process(self._play())

    def _screen(self, on: bool) -> None:
        self.sched.sync()  # energy so far at the old screen power
        self._set_screen(on)

    def _play(self):
        env = self.env
        for i, s in enumerate(self.sessions):
            if self.until_s is not None and s.start_s >= self.until_s:
                return
            if s.start_s > env.now:
                yield env.timeout(s.start_s - env.now)
            self._screen(True)
            app = self.table.app(env, self.sched, self.spec, s.app_category, self.recorder, self.seed,
                                 name=f"{s.user_id}#{i}:{s.app_category}", load_scale=s.load_scale).start()
            self.apps.append(app)
            end_s = s.end_s if self.until_s is None else min(s.end_s, self.until_s)
            yield env.timeout(max(0.0, end_s - env.now))
            app.stop()
            self._screen(False)


def play_trace(device, trace, user: str, table: AppTable | None = None,
               recorder: UxRecorder | None = None, until_s: float | None = None) -> TracePlayer:
    """Play ``user``'s sessions of ``trace`` on ``device`` (anything with env, sched, spec, config.seed)."""
    return TracePlayer(device.env, device.sched, device.spec, trace.sessions_of(user), device.config.seed,
                       table=table, recorder=recorder, until_s=until_s)
