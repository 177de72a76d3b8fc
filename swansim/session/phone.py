"""One phone, one model, one policy, one owner, for a while: what `swansim run` does.

The phone is a `swansim.device.Device` (optionally with profile figures overridden, see
`swansim.session.overrides`); the model is a Swan task (`swansim.dnn.tasks`) or a zoo model; the
owner (`swansim.session.usage`) is a trace set on disk, a synthetic owner drawn from a seed, or
nobody (an idle phone), optionally with a Work-like benchmark session. Foreground sessions
drive the screen and the owner's apps (`swansim.apps.appmodels.TracePlayer`); the charger
follows the trace's device states; the battery starts at the trace's level and drains or
charges by the simulated power. The policy drives the training job through the job's hooks
(`swansim.session.driver`). Everything recorded comes from probes attached from outside (the
job's hooks, ``Platform.probes``, ``Scheduler.on_replan``, a sampling process; see
`swansim.session.probes`): tables of batches, layer phases, policy decisions, frames, power,
temperatures and frequencies.

Energy per batch (the summary's ``energy_j``) is the paper's background-subtracted drain done
exactly: the platform's energy over the run minus that of the same run without training,
divided by the batches. ``energy_above_idle_j`` is the mean of the batches' own ``energy_j``: the
phone's energy over each batch above its idle floor (screen off, nothing running). It also
counts whatever the owner's apps drew meanwhile, so with an owner it exceeds ``energy_j``.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from swansim import checks

from swansim.apps.appmodels import TracePlayer, load_app_table
from swansim.apps.workbench import WorkBench, score, script, task_times
from swansim.apps.ux import UxRecorder, jank_pct
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP, training_runtime
from swansim.dnn.models import MODELS
from swansim.dnn.tasks import SWAN_TASKS
from swansim.errors import InputError
from swansim.hw.profile import DEFAULT_DEVICE, Catalogue, DeviceSpec
from swansim.options import option, takes
from swansim.policy.base import Policy, make_policy, policy_class, policy_names
from swansim.session.driver import REQUEST_BATCHES, PolicyDriver
from swansim.session.overrides import apply_overrides
from swansim.session.probes import CpuOccupancy, FrequencyLog, Progress, Sampler
from swansim.session.usage import Usage, usage_of


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on (the manifest records it); the `swansim run` options and
    `swansim.run`'s keywords are these fields."""

    device: str = option(DEFAULT_DEVICE, help="phone, board or SoC profile (swansim.profiles())")
    model: str = option("resnet34", help="a Swan task (resnet34, shufflenet_v2_x2_0, mobilenet_v2) or a zoo model "
                                         "at torchvision's defaults")
    policy: str = option("swan", help="who decides where training runs", known=policy_names)
    duration_s: float | None = option(300.0, flag="--duration",
                                      help="simulated seconds; None: until the owner's benchmark session ends")
    trace: str | None = option(None, exclusive="owner", help="a trace set directory (sessions.csv, states.csv)")
    user: str | None = option(None, help="the trace's user (default: its first)")
    synthetic: bool = option(False, exclusive="owner", help="a synthetic owner drawn from the seed (one user, one day)")
    start_s: float | None = option(None, flag="--start", help="trace time (s) the run starts at (default: just "
                                                              "before the owner's first session on battery)")
    bench_at_s: float | None = option(None, flag="--bench-at", help="the owner runs the Work-like benchmark app at "
                                                                    "this time (s into the run); its score drop "
                                                                    "is NaN unless it ends within --duration")
    bench_passes: int | None = option(None, help="passes of the Work-like benchmark's script (default: the app "
                                                 "table's, a run as long as PCMark's Work test)")
    screen_on: bool = option(False, help="the screen is on at the start (the owner holds the phone)")
    seed: int = option(0, help="seed of the owner, the apps and the runtime's jitter")
    runtime: str = option("pytorch", help=TRAINING_RUNTIME_HELP)
    request_batches: int = option(REQUEST_BATCHES, help="mini-batches per training request (FedScale's local steps)")
    request_gap_s: float = option(0.0, flag="--request-gap", help="seconds between requests (0: asked again at once)")
    sample_s: float = option(1.0, help="power and thermal sampling period (s)")
    overrides: tuple[tuple[str, str], ...] = option(
        (), cli=False, help="profile figures set as if the files said so: (dotted path, value) pairs "
                            "(swansim.session.overrides; the CLI's --set)")
    policy_args: tuple[tuple[str, float], ...] = option(
        (), cli=False, help="the policy's parameters, e.g. (('slowdown_factor', 1.2),)")

    def check(self, cat: Catalogue) -> DeviceSpec:
        """Every field, before any simulation; returns the phone's (overridden) spec."""
        spec = cat.device(self.device, "--device")
        if self.model not in MODELS:
            raise InputError("--model", "model", f"unknown model {self.model!r} (Swan's tasks: {', '.join(SWAN_TASKS)}; "
                                                 f"the zoo: {', '.join(m for m in MODELS if m not in SWAN_TASKS)})")
        policy_class(self.policy)
        training_runtime(self.runtime, "--runtime")
        if self.duration_s is None:
            if self.bench_at_s is None:
                raise InputError("--duration", "duration_s", "a run without a duration needs a benchmark session (--bench-at)")
        else:
            _positive("--duration", "duration_s", self.duration_s, 6 * 3600.0)   # hours of simulation: a fleet's job beyond
        if self.bench_at_s is not None and not (isinstance(self.bench_at_s, (int, float)) and
                                                0.0 <= self.bench_at_s < (self.duration_s or math.inf)):
            raise InputError("--bench-at", "bench_at_s", f"must be in 0..duration s, got {self.bench_at_s!r}")
        if self.bench_passes is not None:
            checks.integer(self.bench_passes, "--bench-passes", 1, 100)
        _positive("--sample-s", "sample_s", self.sample_s, 3600.0)
        if not checks.is_int(self.request_batches) or not 1 <= self.request_batches <= 100000:
            raise InputError("--request-batches", "request_batches", f"must be an integer in 1..100000, got {self.request_batches!r}")
        if not (isinstance(self.request_gap_s, (int, float)) and 0.0 <= self.request_gap_s <= 86400.0):
            raise InputError("--request-gap", "request_gap_s", f"must be in 0..86400 s, got {self.request_gap_s!r}")
        checks.seed(self.seed)
        if self.trace is not None and not isinstance(self.trace, (str, os.PathLike)):
            raise InputError("--trace", checks.shown(self.trace), "expected a trace directory's path")
        if self.trace is not None and self.synthetic:
            raise InputError("--trace", "trace", "give a trace directory or --synthetic, not both")
        if self.user is not None and self.trace is None:
            raise InputError("--user", "user", "a user needs --trace")
        if self.start_s is not None and (self.trace is None and not self.synthetic):
            raise InputError("--start", "start_s", "a start time needs --trace or --synthetic")
        if self.start_s is not None and not (math.isfinite(self.start_s) and self.start_s >= 0):
            raise InputError("--start", "start_s", f"must be a non-negative number of seconds, got {self.start_s!r}")
        if self.policy_args and not policy_class(self.policy).needs_oracle:
            make_policy(self.policy, **dict(self.policy_args))   # bad parameters fail here
        return apply_overrides(spec, self.overrides)


def _positive(option: str, name: str, value, hi: float) -> None:
    if not checks.is_number(value) or not (0.0 < value <= hi):
        raise InputError(option, name, f"must be a number in (0, {hi:g}], got {value!r}")


# ---------------------------------------------------------------------------------------------
# A run


@dataclass
class RunResult:
    """A run's tidy tables and summary; ``policy`` is the policy object as the run left it."""

    config: RunConfig
    summary: dict
    batches: pd.DataFrame
    layers: pd.DataFrame
    decisions: pd.DataFrame
    frames: pd.DataFrame
    power: pd.DataFrame
    thermal: pd.DataFrame
    frequency: pd.DataFrame
    policy: Policy | None = None
    cpu_slices: pd.DataFrame | None = None  # which thread held which cpu when (with ``trace_detail``)
    spec: DeviceSpec | None = field(default=None, repr=False)

    TABLES = ("batches", "layers", "decisions", "frames", "power", "thermal", "frequency")

    @classmethod
    def file_names(cls) -> tuple[str, ...]:
        """Every file `write` puts in its directory."""
        return (*(f"{t}.csv" for t in cls.TABLES), "summary.csv", "manifest.json")

    def write(self, out: Path | str, also: tuple[str | Path, ...] = (), **manifest_extra) -> Path:
        """Every table as CSV, the summary, and a manifest under ``out``; ``also``: files written
        there beside them (a Perfetto trace) that the manifest lists too.

        At every moment the manifest lists exactly the files of this run that are there, with
        ``complete`` false until the last one is written: an earlier run's manifest and tables
        are gone before the first new table lands, and each file replaces its name whole
        (`swansim.results.atomic`), so a run killed while writing leaves complete files only,
        each listed."""
        from swansim.results import add_to_manifest, write_csv, write_manifest

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        also = [str(Path(f).resolve().relative_to(out.resolve())) for f in also
                if Path(f).resolve().parent == out.resolve()]
        write_manifest(out, asdict(self.config), seed=self.config.seed, files=also, complete=False,
                       trace_start_s=self.summary.get("trace_start_s"), user=self.summary.get("user"),
                       **manifest_extra)
        for name in self.file_names()[:-1]:
            if (out / name).is_file() or (out / name).is_symlink():
                (out / name).unlink()
        tables = [(f"{name}.csv", getattr(self, name)) for name in self.TABLES]
        for name, table in tables + [("summary.csv", pd.DataFrame([self.summary]))]:
            write_csv(table, out / name)
            add_to_manifest(out, [name])
        add_to_manifest(out, [], complete=True)
        return out


class _Phone:
    """A device with the owner (trace sessions, charger, benchmark session) and, unless
    ``policy`` is None, the policy's training job."""

    def __init__(self, cfg: RunConfig, spec: DeviceSpec, usage: Usage, policy: Policy | None, trace_detail: bool):
        # the phone's own kernel (DeviceConfig's default, as landscape and the batch model boot it)
        # unless the policy needs another placement
        placement = {"placement": policy.placement} if policy is not None and policy.placement else {}
        self.dev = dev = Device(spec, DeviceConfig(seed=cfg.seed, **placement, screen_on=cfg.screen_on,
                                                   initial_soc_pct=usage.battery_pct,
                                                   charging=usage.charging[0][1]))
        self.rec = UxRecorder()
        self.driver: PolicyDriver | None = None
        self.player: TracePlayer | None = None
        self.bench: WorkBench | None = None
        self._bench_on = False
        if policy is not None:
            self.driver = PolicyDriver(dev, policy, cfg.model, cfg.runtime, self.foreground, cfg.request_batches,
                                       cfg.request_gap_s)
        table = load_app_table()
        if usage.sessions:
            self.player = TracePlayer(dev.env, dev.sched, dev.spec, usage.sessions, dev.config.seed, table=table,
                                      recorder=self.rec, set_screen=self.set_screen, until_s=cfg.duration_s)
        if usage.bench_at_s is not None:
            steps = script(table.tasks, cfg.seed, table.benchmark_passes(cfg.bench_passes))
            self.bench = WorkBench(dev.env, dev.sched, dev.spec, steps, table.android, self.rec,
                                   start_s=usage.bench_at_s, memory=table.memory)
            dev.env.process(self._bench_session(usage.bench_at_s))
        dev.env.process(self._charger(usage))

    def foreground(self) -> bool:
        return self._bench_on or (self.player is not None and any(a.running for a in self.player.apps))

    def changed(self) -> None:
        if self.driver is not None:
            self.driver.notify()

    def set_screen(self, on: bool) -> None:
        self.dev.platform.set_screen(on)
        self.changed()

    def _bench_session(self, at_s: float):
        yield self.dev.env.timeout(at_s)
        self.dev.sched.sync()
        self._bench_on = True
        self.set_screen(True)
        yield self.bench.done
        self.dev.sched.sync()
        self._bench_on = False
        self.set_screen(False)

    def _charger(self, usage: Usage):
        for t, on in usage.charging[1:]:
            yield self.dev.env.timeout(t - self.dev.env.now)
            self.dev.set_charging(on)
            self.changed()

    def run(self, duration_s: float | None) -> None:
        """To ``duration_s``, or (None) until the benchmark session is over."""
        if duration_s is None:
            self.dev.env.run(until=self.bench.done)
            self.dev.sched.sync()
        else:
            self.dev.run(duration_s)

    @property
    def bench_complete(self) -> bool:
        """The owner's benchmark ran to its end within the run (a cut one has no score)."""
        return self.bench is not None and self.bench.done.triggered

    def bench_times(self) -> pd.Series:
        tasks = self.rec.tasks()
        return task_times(tasks[tasks["app"] == WorkBench.APP])


def run_policy(cfg: RunConfig, policy: Policy | None = None, oracle: dict[str, float] | None = None,
               trace_detail: bool = False, subtract_background: bool = True, progress: bool = False) -> RunResult:
    """Run ``cfg``. ``policy``: a policy object to use instead of a new one (it keeps what it
    learned); ``oracle``: the true latency per choice label for policies that need it
    (default: measured now, see `true_latencies`); ``trace_detail``: also record per-cpu
    thread activity (for `swansim.session.perfetto`); ``subtract_background``: also run the same
    phone and owner without training (the energy and Work-like score references); ``progress``:
    a bar on stderr over simulated time (the run, then its reference run). A probe that only
    reads the clock: the results do not depend on it."""
    spec = cfg.check(Catalogue.load())
    usage = usage_of(cfg)
    if policy is None:
        kwargs = dict(cfg.policy_args)
        if policy_class(cfg.policy).needs_oracle:
            kwargs["latency_by_choice"] = oracle or true_latencies(cfg.device, cfg.model, cfg.runtime, cfg.overrides)
        policy = make_policy(cfg.policy, **kwargs)
    first_decision = len(policy.decisions)    # a policy carried over from an earlier run keeps its log
    phone = _Phone(cfg, spec, usage, policy, trace_detail)
    dev, driver = phone.dev, phone.driver
    sampler = Sampler(dev, cfg.sample_s)
    freq = FrequencyLog(dev)
    occupancy = CpuOccupancy(dev) if trace_detail else None
    show = progress and cfg.duration_s is not None
    bar = Progress(dev, cfg.duration_s, f"{cfg.device} {cfg.model} {cfg.policy}") if show else None
    phone.run(cfg.duration_s)
    if bar is not None:
        bar.close()
    end_s = dev.env.now
    sampler.sample()
    if occupancy is not None:
        occupancy.close()
    background, background_j = None, None
    if subtract_background:
        background = _Phone(cfg, spec, usage, None, False)
        bar = Progress(background.dev, end_s, "reference run (no training)") if show else None
        background.run(end_s)
        background_j = background.dev.platform.total_energy_j
        if bar is not None:
            bar.close()
        if phone.bench_complete and not background.bench_complete:
            # Its benchmark ends at or after the training phone's: run on to its end, since a score
            # needs every task whole (stopped at end_s exactly, the last step's end is not yet
            # processed and a task missing a step would count as a faster one).
            background.run(None)

    batches = pd.DataFrame(driver.batch_rows, columns=_BATCH_COLUMNS)
    layers = pd.DataFrame(driver.layer_rows, columns=["batch", "layer", "name", "op", "phase", "choice",
                                                      "start_s", "end_s"])
    layers["latency_s"] = layers["end_s"] - layers["start_s"]
    decisions = pd.DataFrame([asdict(d) for d in policy.decisions[first_decision:]],
                             columns=["time_s", "batch", "kind", "plan", "detail"])
    result = RunResult(cfg, {}, batches, layers, decisions, phone.rec.frames(), pd.DataFrame(sampler.power_rows),
                       pd.DataFrame(sampler.thermal_rows),
                       pd.DataFrame(freq.rows, columns=["time_s", "cluster", "freq_mhz"]), policy, spec=spec)
    if trace_detail:
        result.cpu_slices = pd.DataFrame(occupancy.rows, columns=["cpu", "thread", "group", "spinning", "start_s",
                                                                  "end_s"])
    result.summary = summarise(cfg, usage, result, end_s, dev.platform.total_energy_j, background_j, driver.declines)
    if phone.bench_complete and background is not None:
        ref = background.bench_times()
        # a drop is positive, as `swansim ux` reports it
        result.summary["ux_score_drop_pct"] = 100.0 * (1.0 - score(phone.bench_times(), ref) / 1000.0)
    return result


_BATCH_COLUMNS = ["batch", "request", "batch_in_request", "purpose", "plan", "plan_id", "start_s", "latency_s",
                  "energy_j", "gross_energy_j", "migrations", "quiet", "screen_on", "foreground_app", "charging",
                  "battery_pct", "battery_temp_c"]


def steady_batches(b: pd.DataFrame) -> pd.DataFrame:
    """The run's settled end: the trailing batches on its final plan (training, phone quiet),
    without the first of them (it pays the switch to the plan, or the cold start)."""
    if not len(b):
        return b
    same = (b["plan_id"] == b["plan_id"].iloc[-1]) & (b["purpose"] == "train") & b["quiet"]
    tail = len(b) - (len(b) if same.all() else int(same[::-1].to_numpy().argmin()))
    return b.iloc[tail + 1:] if same.iloc[-1] else b.iloc[:0]


def summarise(cfg: RunConfig, usage: Usage, r: RunResult, end_s: float, total_j: float,
              background_j: float | None, declines: dict[str, int]) -> dict:
    """The run in one row. ``declined_<reason>``: the policy's refusals to train, counted per
    admission check (a declined phone is asked again at each change of its state or every
    `driver.ADMIT_POLL_S`), by `policy.base.DECLINE_REASONS`."""
    b = r.batches
    n = len(b)
    steady = steady_batches(b)
    return {
        "device": cfg.device, "model": cfg.model, "policy": cfg.policy,
        "batches": n,
        "latency_s": float(b["latency_s"].mean()) if n else math.nan,
        "energy_j": (total_j - background_j) / n if n and background_j is not None else math.nan,
        "energy_above_idle_j": float(b["energy_j"].mean()) if n else math.nan,
        "explore_batches": int((b["purpose"] == "explore").sum()),
        "steady_batches": len(steady),
        "steady_latency_s": float(steady["latency_s"].mean()) if len(steady) else math.nan,
        "steady_energy_j": float(steady["energy_j"].mean()) if len(steady) else math.nan,
        "final_plan": b["plan"].iloc[-1] if n else "-",
        "frames": len(r.frames),
        "jank_pct": jank_pct(r.frames),
        "train_s": float(b["latency_s"].sum()),
        "duration_s": end_s,
        "ux_score_drop_pct": math.nan,
        **{f"declined_{why}": n for why, n in declines.items()},
        "trace_start_s": usage.start_s, "user": usage.user,
        "sessions": len(usage.sessions),
    }


# ---------------------------------------------------------------------------------------------
# The oracle's knowledge


def measure_choice(device: str, model: str, runtime: str, overrides: tuple, label: str) -> float:
    """One choice's batch latency on a fresh idle phone (the batch model; a pool worker)."""
    from swansim.batchmodel import BatchKey, simulate_batch

    spec = apply_overrides(Catalogue.load().device(device), overrides)
    choice = _choices_with_default(spec)[label]
    return simulate_batch(BatchKey(device, model, choice, runtime=runtime), spec=spec, record_layers=False).latency_s


def _choices_with_default(spec: DeviceSpec) -> dict:
    soc = spec.soc
    return {c.label: c for c in (*enumerate_choices(soc, mixed=True), pytorch_default(soc))}


def oracle_tasks(device: str, model: str, runtime: str = "pytorch", overrides: tuple = ()) -> list[tuple]:
    """The `measure_choice` arguments of every choice of ``device`` (pool-ready)."""
    spec = apply_overrides(Catalogue.load().device(device), overrides)
    return [(device, model, runtime, overrides, label) for label in _choices_with_default(spec)]


def true_latencies(device: str, model: str, runtime: str = "pytorch", overrides: tuple = (),
                   jobs: int | None = 1) -> dict[str, float]:
    """The batch latency of every choice (and PyTorch's default) on an idle phone, by label:
    a landscape (each choice's `swansim.batchmodel.simulate_batch` latency, what a landscape row is)."""
    from swansim.pool import run_all

    tasks = oracle_tasks(device, model, runtime, overrides)
    lats = run_all(measure_choice, tasks, jobs, desc=f"oracle {device} {model}", progress=False)
    return {t[-1]: lat for t, lat in zip(tasks, lats)}


@takes(RunConfig)
def run(device: str = DEFAULT_DEVICE, model: str = "resnet34", policy: str = "swan", duration_s: float = 300.0,
        trace: str | None = None, user: str | None = None, synthetic: bool = False, seed: int = 0,
        start_s: float | None = None, progress: bool = True, **kwargs) -> RunResult:
    """One phone, one model, one policy and its owner for ``duration_s`` simulated seconds: the
    run's tables as DataFrames (``result.batches``, ``.layers``, ``.decisions``, ``.frames``,
    ``.power``, ``.thermal``, ``.frequency``) and ``result.summary``. ``progress=False``
    silences the bar on stderr; an unknown keyword is one InputError naming the nearest."""
    checks.keywords(kwargs, RunConfig, "swansim.run")
    with checks.as_keywords("swansim.run", RunConfig, renames={"--set": "overrides"}):
        return run_policy(RunConfig(device=device, model=model, policy=policy, duration_s=duration_s, trace=trace,
                                    user=user, synthetic=synthetic, seed=seed, start_s=start_s, **kwargs),
                          progress=progress)
