"""One phone, one model, one policy, one owner, for a while: what `swansim run` does.

The phone is a `swansim.device.Device` (optionally with profile figures overridden, see
`swansim.runs.overrides`); the model is a Swan task (`swansim.dnn.tasks`); the owner is a
usage trace - a trace set on disk, a synthetic owner drawn from a seed, or nobody (an idle
phone, screen off, discharging). Foreground sessions drive the screen and the owner's apps
(`swansim.apps.appmodels.TracePlayer`); the charger follows the trace's device states; the
battery starts at the trace's level and drains or charges by the simulated power.

Training is a `TrainingJob` driven by the policy through `PolicyDriver`: before each batch
the job's ``gate`` asks ``policy.admit`` (a declined engine waits for a state change or the
next poll), the job's plan asks ``policy.plan`` with a `PolicyView`, and ``on_batch`` hands
``policy.observe`` the batch's measurements. Training requests are FedAvg local rounds of
``request_batches`` batches (Swan explores one choice per request); a decline ends the
request. Everything recorded comes from probes attached from outside (the job's hooks,
``Platform.probes``, ``Scheduler.on_replan``, a sampling process): tables of batches, layer
phases, policy decisions, frames, power, temperatures and frequencies.

Energy per batch (the summary's ``energy_j``) is the paper's background-subtracted drain done
exactly: the platform's energy over the run minus that of the same run without training,
divided by the batches.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable

import pandas as pd

from swansim.apps.appmodels import TracePlayer, load_app_table
from swansim.apps.workbench import WorkBench, score, script, task_times
from swansim.apps.traces import Session, Trace, load_trace
from swansim.apps.ux import UxRecorder, jank_pct
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import Plan, enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.models import MODELS
from swansim.dnn.tasks import SWAN_TASKS, build_task
from swansim.dnn.training import TrainingJob
from swansim.errors import InputError
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.policies.base import Policy, make_policy, policy_class
from swansim.policies.view import BatchStats, History, LayerStat, ModelInfo, PhoneState, PolicyView
from swansim.runs.overrides import apply_overrides

# FedScale's default local round (fedscale/cloud/config_parser.py: --local_steps 20): a
# training request is that many mini-batches.
REQUEST_BATCHES = 20
# assumption: a declined engine re-reads the battery this often (Android delivers
# ACTION_BATTERY_CHANGED on level and temperature changes, seconds to minutes apart); screen,
# app and charger changes wake it at once.
ADMIT_POLL_S = 10.0
# With --start auto, this share of the run (at most AUTO_LEAD_MAX_S) leads up to the owner's
# first session: a short run sees the idle phone (Swan explores) and then the owner at work.
AUTO_LEAD_SHARE = 0.5
AUTO_LEAD_MAX_S = 120.0
# A run's battery without a trace: a phone that is not low (assumption: 80 %, well above any
# policy's minimum level, so admission does not depend on it).
IDLE_BATTERY_PCT = 80.0
# A benchmark session's share of the trace window when a run lasts until it ends (a bound: the
# benchmark takes ~25 s alone on a Pixel 3).
BENCH_WINDOW_S = 600.0


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on (the manifest records it)."""

    device: str = "pixel3"
    model: str = "resnet34"           # a Swan task, or any zoo model at torchvision's defaults
    policy: str = "swan"
    duration_s: float | None = 300.0  # None: until the owner's benchmark session ends
    trace: str | None = None          # a trace set directory
    user: str | None = None           # its user (default: the first)
    synthetic: bool = False           # a synthetic owner drawn from ``seed`` (one user, one day)
    start_s: float | None = None      # trace time of the run's start; None: auto (see AUTO_LEAD_*)
    bench_at_s: float | None = None   # the owner runs the Work-like benchmark then (a heavy app session)
    screen_on: bool = False           # the screen is on at the start (the owner holds the phone)
    seed: int = 0
    runtime: str = "pytorch"
    request_batches: int = REQUEST_BATCHES
    request_gap_s: float = 0.0        # between requests (0: the phone is asked again at once)
    sample_s: float = 1.0             # power and thermal sampling period
    overrides: tuple[tuple[str, str], ...] = ()   # (dotted profile path, value), see runs.overrides
    policy_args: tuple[tuple[str, float], ...] = ()  # e.g. (("slowdown_factor", 1.2),)

    def check(self, cat: Catalogue) -> DeviceSpec:
        """Every field, before any simulation; returns the phone's (overridden) spec."""
        spec = cat.device(self.device)
        if self.model not in MODELS:
            raise InputError("--model", "model", f"unknown model {self.model!r} (Swan's tasks: {', '.join(SWAN_TASKS)}; "
                                                 f"the zoo: {', '.join(m for m in MODELS if m not in SWAN_TASKS)})")
        policy_class(self.policy)
        load_runtime(self.runtime)
        if self.duration_s is None:
            if self.bench_at_s is None:
                raise InputError("--duration", "duration_s", "a run without a duration needs a benchmark session (--bench-at)")
        else:
            _positive("--duration", "duration_s", self.duration_s, 7 * 86400.0)
        if self.bench_at_s is not None and not (isinstance(self.bench_at_s, (int, float)) and
                                                0.0 <= self.bench_at_s < (self.duration_s or math.inf)):
            raise InputError("--bench-at", "bench_at_s", f"must be in 0..duration s, got {self.bench_at_s!r}")
        _positive("--sample-s", "sample_s", self.sample_s, 3600.0)
        if isinstance(self.request_batches, bool) or not isinstance(self.request_batches, int) or not 1 <= self.request_batches <= 100000:
            raise InputError("--request-batches", "request_batches", f"must be an integer in 1..100000, got {self.request_batches!r}")
        if not (isinstance(self.request_gap_s, (int, float)) and 0.0 <= self.request_gap_s <= 86400.0):
            raise InputError("--request-gap", "request_gap_s", f"must be in 0..86400 s, got {self.request_gap_s!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError("--seed", "seed", f"must be a non-negative integer, got {self.seed!r}")
        if self.trace is not None and self.synthetic:
            raise InputError("--trace", "trace", "give a trace directory or --synthetic, not both")
        if self.user is not None and self.trace is None:
            raise InputError("--user", "user", "a user needs --trace")
        if self.start_s is not None and (self.trace is None and not self.synthetic):
            raise InputError("--start", "start_s", "a start time needs --trace or --synthetic")
        if self.start_s is not None and not (math.isfinite(self.start_s) and self.start_s >= 0):
            raise InputError("--start", "start_s", f"must be a non-negative number of seconds, got {self.start_s!r}")
        if self.policy_args:
            make_policy(self.policy, **dict(self.policy_args))   # bad parameters fail here
        return apply_overrides(spec, self.overrides)


def _positive(option: str, name: str, value, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 < value <= hi):
        raise InputError(option, name, f"must be a number in (0, {hi:g}], got {value!r}")


# ---------------------------------------------------------------------------------------------
# The owner


@dataclass(frozen=True)
class Usage:
    """The owner over one run, in run time (0 = the run's start)."""

    sessions: tuple[Session, ...] = ()
    charging: tuple[tuple[float, bool], ...] = ((0.0, False),)   # change points, the first at 0
    battery_pct: float = IDLE_BATTERY_PCT
    start_s: float = 0.0     # trace time of the run's start
    user: str = "-"
    bench_at_s: float | None = None   # the Work-like benchmark app starts then (run time)

    @classmethod
    def idle(cls) -> "Usage":
        """Nobody touches the phone: screen off, discharging."""
        return cls()

    @classmethod
    def from_trace(cls, trace: Trace, user: str, start_s: float | None, duration_s: float) -> "Usage":
        """``user``'s sessions and charger over ``[start, start + duration)``, shifted to 0."""
        sessions = trace.sessions_of(user)
        if start_s is None:
            start_s = auto_start_s(trace, user, duration_s)
        if start_s >= trace.duration_s:
            raise InputError("--start", "start_s", f"{start_s:g} s is past the trace's end ({trace.duration_s:g} s)")
        end_s = start_s + duration_s
        shifted = tuple(replace(s, start_s=max(s.start_s, start_s) - start_s,
                                duration_s=min(s.end_s, end_s) - max(s.start_s, start_s))
                        for s in sessions if s.end_s > start_s and s.start_s < end_s)
        first = trace.state_at(user, start_s)
        charging = [(0.0, bool(first.charging) if first else False)]
        for st in trace.states_of(user):
            if start_s < st.time_s < end_s and st.charging != charging[-1][1]:
                charging.append((st.time_s - start_s, st.charging))
        battery = first.battery_pct if first else IDLE_BATTERY_PCT
        return cls(shifted, tuple(charging), battery, start_s, user)


def auto_start_s(trace: Trace, user: str, duration_s: float) -> float:
    """The run starts so that its first part (AUTO_LEAD_*) leads up to the first session the
    owner starts on battery after a lead-up on battery (else the first session, else 0)."""
    sessions = trace.sessions_of(user)
    if not sessions:
        return 0.0
    lead = min(AUTO_LEAD_SHARE * duration_s, AUTO_LEAD_MAX_S)
    for s in sessions:
        start = max(0.0, s.start_s - lead)
        st = trace.state_at(user, start)
        on_charger = st is not None and st.charging
        on_charger |= any(x.charging for x in trace.states_of(user) if start < x.time_s <= s.start_s)
        if not on_charger:
            return start
    return max(0.0, sessions[0].start_s - lead)


def usage_of(cfg: RunConfig) -> Usage:
    return replace(_owner(cfg), bench_at_s=cfg.bench_at_s)


def _owner(cfg: RunConfig) -> Usage:
    if cfg.trace is None and not cfg.synthetic:
        return Usage.idle()
    if cfg.synthetic:
        from swansim.apps.synth import synthesize
        trace = synthesize(1, 1, cfg.seed)
    else:
        trace = load_trace(cfg.trace)
    users = trace.users
    if not users:
        raise InputError(cfg.trace or "--synthetic", "user_id", "the trace has no users")
    user = cfg.user or users[0]
    if user not in users:
        raise InputError("--user", "user", f"unknown user {user!r} (the trace has {', '.join(users[:5])}"
                                           f"{', ...' if len(users) > 5 else ''})")
    # without a duration (until the benchmark ends) the trace window is the benchmark's lead-up
    return Usage.from_trace(trace, user, cfg.start_s, cfg.duration_s or cfg.bench_at_s + BENCH_WINDOW_S)


# ---------------------------------------------------------------------------------------------
# The policy at work


class PolicyDriver:
    """Wires a policy to a training job on a device: admission gate, plans, measurements.

    ``foreground()`` says whether an app of the owner's is in the foreground; ``notify()``
    must be called at every screen, app or charger change (it wakes a declined engine and
    marks the batch in flight as not quiet).
    """

    def __init__(self, dev: Device, policy: Policy, model: str, runtime: str = "pytorch",
                 foreground: Callable[[], bool] = lambda: False, request_batches: int = REQUEST_BATCHES,
                 request_gap_s: float = 0.0, keep_threads: bool = False):
        soc = dev.spec.soc
        self.dev, self.env, self.policy = dev, dev.env, policy
        self.foreground = foreground
        self.request_batches, self.request_gap_s = request_batches, request_gap_s
        self.keep_threads = keep_threads
        graph = build_task(model)
        self.info = ModelInfo(model, tuple(l.name for l in graph.layers), tuple(l.op for l in graph.layers))
        self.choices = tuple(enumerate_choices(soc, mixed=True))
        self.default_choice = pytorch_default(soc)
        # the phone's idle power (screen off, no charger loss), what a batch's energy is net of
        floor_w = dev.platform.total_power_w - dev.platform.charging_loss_w - \
            (dev.spec.screen_power_mw * 1e-3 if dev.platform.screen_on else 0.0)
        self.job = TrainingJob(dev.env, dev.sched, soc, graph, load_runtime(runtime), self._plan,
                               cpuset=dev.spec.cpusets.get("foreground"), name="train", idle_floor_w=floor_w,
                               record_layers=True)
        self.job.gate, self.job.on_batch = self._gate, self._on_batch
        self.stats: list[BatchStats] = []
        self._history = History(self.stats)
        self.batch_rows: list[dict] = []
        self.layer_rows: list[tuple] = []
        self.thread_rows: list[tuple] = []
        self.request, self.in_request = 0, 0
        self._gap_due = False
        self._admitted = True
        self.changes = 0
        self._changed = self.env.event()
        self._start: tuple[PhoneState, int, Plan] | None = None
        policy.begin(self.state())

    # -- the phone ------------------------------------------------------------------------

    def state(self) -> PhoneState:
        d = self.dev
        d.sched.sync()
        bat = d.battery
        return PhoneState(time_s=d.env.now, battery_pct=bat.soc_pct if bat else None,
                          battery_temp_c=d.battery_temp_c, charging=bool(bat and bat.charging),
                          screen_on=d.platform.screen_on, foreground_app=self.foreground(),
                          thermal_status=d.thermal_status)

    def notify(self) -> None:
        """The screen, an app or the charger changed."""
        self.changes += 1
        ev, self._changed = self._changed, self.env.event()
        ev.succeed()

    # -- the job's hooks ------------------------------------------------------------------

    def _gate(self):
        if self._gap_due:
            self._gap_due = False
            return self.env.timeout(self.request_gap_s)
        self._admitted = self.policy.admit(self.state())
        if self._admitted:
            return None
        if self.in_request:    # a declined request is dropped; training resumes with a new one
            self.request, self.in_request = self.request + 1, 0
        return self.env.any_of([self.env.timeout(ADMIT_POLL_S), self._changed])

    def _plan(self, batch: int) -> Plan:
        state = self.state()
        view = PolicyView(self.choices, self.default_choice, self.info, state, batch, self.request,
                          self.in_request, self._history)
        plan = self.policy.plan(view)
        self._start = (state, self.changes, plan)
        return plan

    def _on_batch(self, row: tuple, layer_rows: list) -> None:
        batch, label, t0, lat, energy, net, migrations = row
        state, changes, plan = self._start
        quiet = state.idle and not state.charging and changes == self.changes
        layers = []
        for (_, layer, name, op, phase, choice, start, end) in layer_rows:
            c = plan.fwd[layer] if phase == "fwd" else plan.update if phase == "update" else plan.bwd[layer]
            layers.append(LayerStat(layer, phase, c, start, end))
            self.layer_rows.append((batch, layer, name, op, phase, choice, start, end))
        self.job.layer_rows.clear()    # kept here; the job's copy would only grow
        if self.keep_threads:
            self.thread_rows += self.job.thread_rows
        self.job.thread_rows.clear()
        stats = BatchStats(batch, self.request, self.in_request, plan, t0, lat, net, tuple(layers), state, quiet)
        self.stats.append(stats)
        self.batch_rows.append({
            "batch": batch, "request": self.request, "batch_in_request": self.in_request,
            "purpose": self.policy.purpose, "plan": label, "start_s": t0, "latency_s": lat,
            "energy_j": net, "gross_energy_j": energy, "migrations": migrations, "quiet": quiet,
            "screen_on": state.screen_on, "foreground_app": state.foreground_app, "charging": state.charging,
            "battery_pct": state.battery_pct, "battery_temp_c": state.battery_temp_c})
        self.policy.observe(stats)
        self.in_request += 1
        if self.in_request >= self.request_batches:
            self.request, self.in_request = self.request + 1, 0
            self._gap_due = self.request_gap_s > 0

    def stop(self) -> None:
        self.job.stop()


class PolicyBackground:
    """A `swansim.runs.scenarios` background: the policy's training job on a fresh device
    (``foreground_from_s``: when the owner's benchmark app takes the foreground)."""

    def __init__(self, policy: Policy, model: str, runtime: str = "pytorch", foreground_from_s: float = 0.0):
        self.policy, self.model, self.runtime = policy, model, runtime
        self.foreground_from_s = foreground_from_s

    def __call__(self, dev: Device) -> PolicyDriver:
        return PolicyDriver(dev, self.policy, self.model, self.runtime,
                            foreground=lambda: dev.env.now >= self.foreground_from_s)


# ---------------------------------------------------------------------------------------------
# Probes


class Sampler:
    """Every ``every_s``: mean power over the interval (by component group), temperatures,
    battery, thermal status and frequency caps."""

    GROUPS = (("cpu_w", lambda n: n.startswith("cpu") or n.endswith(".cluster")), ("uncore_w", lambda n: n == "soc.uncore"),
              ("dram_w", lambda n: n == "dram"), ("base_w", lambda n: n == "base"),
              ("screen_w", lambda n: n == "screen"), ("charging_loss_w", lambda n: n == "charging_loss"))

    def __init__(self, dev: Device, every_s: float):
        self.dev, self.every_s = dev, every_s
        names = dev.platform.component_names
        self._groups = [(col, [i for i, n in enumerate(names) if pick(n)]) for col, pick in self.GROUPS]
        self.power_rows: list[dict] = []
        self.thermal_rows: list[dict] = []
        self._last = (dev.env.now, dev.platform.energy_j.copy())
        self.sample()
        dev.env.process(self._run())

    def _run(self):
        while True:
            yield self.dev.env.timeout(self.every_s)
            self.sample()

    def sample(self) -> None:
        d = self.dev
        d.sched.sync()
        t, e = d.env.now, d.platform.energy_j
        t0, e0 = self._last
        if t > t0:
            de = (e - e0) / (t - t0)
            row = {"time_s": t, "power_w": float(de.sum())}
            for col, idx in self._groups:
                if idx:
                    row[col] = float(de[idx].sum())
            if d.battery is not None:
                row["battery_pct"] = d.battery.soc_pct
                row["charging"] = d.battery.charging
            self.power_rows.append(row)
        th = {"time_s": t}
        for n in d.platform.thermal.nodes:
            th[f"temp_{n}_c"] = d.platform.temp_c(n)
        th["thermal_status"] = d.thermal_status.name
        for p in d.cpufreq:
            th[f"cap_{p.name}_mhz"] = p.cap_mhz
        self.thermal_rows.append(th)
        self._last = (t, e.copy())


class FrequencyLog:
    """A platform probe: every frequency change point per cluster, exactly."""

    def __init__(self, dev: Device):
        self.names = [c.name for c in dev.spec.soc.clusters]
        self._last = list(dev.platform.freq_mhz)
        self.rows = [(dev.env.now, n, f) for n, f in zip(self.names, self._last)]
        dev.platform.probes.append(self)

    def __call__(self, t0_s: float, t1_s: float, platform) -> None:
        # called after an interval is integrated; a change made at t1 shows in the next call
        for k, f in enumerate(platform.freq_mhz):
            if f != self._last[k]:
                self._last[k] = f
                self.rows.append((t0_s, self.names[k], f))


class CpuOccupancy:
    """A scheduler probe: when each non-training thread ran on which cpu (for the trace viewer)."""

    def __init__(self, dev: Device, skip_group: str = "train"):
        self.sched, self.env, self.skip = dev.sched, dev.env, skip_group
        self._open: dict[int, tuple[int, float]] = {}
        self.rows: list[tuple] = []    # (cpu, thread name, group, start_s, end_s)
        dev.sched.on_replan.append(self)

    def __call__(self) -> None:
        now = self.env.now
        cur = {t.tid: t.cpu for t in self.sched.threads
               if t.done is not None and t.group != self.skip and t.cpu is not None}
        for tid, (cpu, start) in list(self._open.items()):
            if cur.get(tid) != cpu:
                if now > start:
                    t = self.sched.threads[tid]
                    self.rows.append((cpu, t.name, t.group, start, now))
                del self._open[tid]
        for tid, cpu in cur.items():
            if tid not in self._open:
                self._open[tid] = (cpu, now)

    def close(self) -> None:
        now = self.env.now
        for tid, (cpu, start) in self._open.items():
            if now > start:
                t = self.sched.threads[tid]
                self.rows.append((cpu, t.name, t.group, start, now))
        self._open.clear()


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
    threads: pd.DataFrame | None = None    # per region per training thread (with ``trace_detail``)
    cpu_slices: pd.DataFrame | None = None  # the owner's threads on cpus (with ``trace_detail``)
    spec: DeviceSpec | None = field(default=None, repr=False)

    TABLES = ("batches", "layers", "decisions", "frames", "power", "thermal", "frequency")

    def write(self, out: Path | str, **manifest_extra) -> Path:
        """Every table as CSV, the summary, and a manifest under ``out``."""
        from swansim.results import write_manifest

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        files = []
        for name in self.TABLES:
            getattr(self, name).to_csv(out / f"{name}.csv", index=False)
            files.append(f"{name}.csv")
        pd.DataFrame([self.summary]).to_csv(out / "summary.csv", index=False)
        write_manifest(out, asdict(self.config), seed=self.config.seed, files=files + ["summary.csv"],
                       trace_start_s=self.summary.get("trace_start_s"), user=self.summary.get("user"),
                       **manifest_extra)
        return out


@lru_cache(maxsize=4)
def _catalogue() -> Catalogue:
    return Catalogue.load()


class _Phone:
    """A device with the owner (trace sessions, charger, benchmark session) and, unless
    ``policy`` is None, the policy's training job."""

    def __init__(self, cfg: RunConfig, spec: DeviceSpec, usage: Usage, policy: Policy | None, trace_detail: bool):
        placement = (policy.placement if policy is not None else None) or "wakeup"
        self.dev = dev = Device(DeviceConfig(device=cfg.device, seed=cfg.seed, placement=placement,
                                             screen_on=cfg.screen_on, initial_soc_pct=usage.battery_pct,
                                             charging=usage.charging[0][1]), spec=spec)
        self.rec = UxRecorder()
        self.driver: PolicyDriver | None = None
        self.player: TracePlayer | None = None
        self.bench: WorkBench | None = None
        self._bench_on = False
        if policy is not None:
            self.driver = PolicyDriver(dev, policy, cfg.model, cfg.runtime, self.foreground, cfg.request_batches,
                                       cfg.request_gap_s, keep_threads=trace_detail)
        table = load_app_table()
        if usage.sessions:
            self.player = TracePlayer(dev.env, dev.sched, dev.spec, usage.sessions, dev.rng, table=table,
                                      recorder=self.rec, set_screen=self.set_screen, until_s=cfg.duration_s)
        if usage.bench_at_s is not None:
            self.bench = WorkBench(dev.env, dev.sched, dev.spec, script(table.tasks, cfg.seed), table.android,
                                   self.rec, start_s=usage.bench_at_s, memory=table.memory)
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

    def bench_times(self) -> pd.Series:
        tasks = self.rec.tasks()
        return task_times(tasks[tasks["app"] == WorkBench.APP])


def run_policy(cfg: RunConfig, policy: Policy | None = None, oracle: dict[str, float] | None = None,
               trace_detail: bool = False, subtract_background: bool = True) -> RunResult:
    """Run ``cfg``. ``policy``: a policy object to use instead of a new one (it keeps what it
    learned); ``oracle``: the true latency per choice label for policies that need it
    (default: measured now, see `true_latencies`); ``trace_detail``: also record per-cpu
    thread activity (for `swansim.runs.perfetto`); ``subtract_background``: also run the same
    phone and owner without training (the energy and Work-like score references)."""
    spec = cfg.check(_catalogue())
    usage = usage_of(cfg)
    if policy is None:
        kwargs = dict(cfg.policy_args)
        if policy_class(cfg.policy).needs_oracle:
            kwargs["latency_by_choice"] = oracle or true_latencies(cfg.device, cfg.model, cfg.runtime, cfg.overrides)
        policy = make_policy(cfg.policy, **kwargs)
    phone = _Phone(cfg, spec, usage, policy, trace_detail)
    dev, driver = phone.dev, phone.driver
    sampler = Sampler(dev, cfg.sample_s)
    freq = FrequencyLog(dev)
    occupancy = CpuOccupancy(dev) if trace_detail else None
    phone.run(cfg.duration_s)
    end_s = dev.env.now
    sampler.sample()
    if occupancy is not None:
        occupancy.close()
    background = None
    if subtract_background:
        background = _Phone(cfg, spec, usage, None, False)
        background.run(end_s)

    batches = pd.DataFrame(driver.batch_rows, columns=_BATCH_COLUMNS)
    layers = pd.DataFrame(driver.layer_rows, columns=["batch", "layer", "name", "op", "phase", "choice",
                                                      "start_s", "end_s"])
    layers["latency_s"] = layers["end_s"] - layers["start_s"]
    decisions = pd.DataFrame([asdict(d) for d in policy.decisions],
                             columns=["time_s", "batch", "kind", "plan", "detail"])
    result = RunResult(cfg, {}, batches, layers, decisions, phone.rec.frames(), pd.DataFrame(sampler.power_rows),
                       pd.DataFrame(sampler.thermal_rows),
                       pd.DataFrame(freq.rows, columns=["time_s", "cluster", "freq_mhz"]), policy, spec=spec)
    if trace_detail:
        result.threads = pd.DataFrame(driver.thread_rows, columns=["batch", "layer", "phase", "op", "thread", "cpu",
                                                                   "fork_s", "finish_s", "units"])
        result.cpu_slices = pd.DataFrame(occupancy.rows, columns=["cpu", "thread", "group", "start_s", "end_s"])
    result.summary = summarise(cfg, usage, result, end_s, dev.platform.total_energy_j,
                               background.dev.platform.total_energy_j if background else None)
    if phone.bench is not None and background is not None:
        ref = background.bench_times()
        result.summary["ux_score_change_pct"] = 100.0 * (score(phone.bench_times(), ref) / 1000.0 - 1.0)
    return result


_BATCH_COLUMNS = ["batch", "request", "batch_in_request", "purpose", "plan", "start_s", "latency_s", "energy_j",
                  "gross_energy_j", "migrations", "quiet", "screen_on", "foreground_app", "charging",
                  "battery_pct", "battery_temp_c"]


def summarise(cfg: RunConfig, usage: Usage, r: RunResult, end_s: float, total_j: float,
              background_j: float | None) -> dict:
    b = r.batches
    n = len(b)
    train = b[b["purpose"] == "train"]
    last_explore = b.loc[b["purpose"] == "explore", "batch"].max() if (b["purpose"] == "explore").any() else -1
    steady = train[(train["batch"] > last_explore) & train["quiet"]]
    return {
        "device": cfg.device, "model": cfg.model, "policy": cfg.policy,
        "batches": n,
        "latency_s": float(b["latency_s"].mean()) if n else math.nan,
        "energy_j": (total_j - background_j) / n if n and background_j is not None else math.nan,
        "net_energy_j": float(b["energy_j"].mean()) if n else math.nan,
        "explore_batches": int((b["purpose"] == "explore").sum()),
        "steady_batches": len(steady),
        "steady_latency_s": float(steady["latency_s"].mean()) if len(steady) else math.nan,
        "steady_energy_j": float(steady["energy_j"].mean()) if len(steady) else math.nan,
        "final_plan": b["plan"].iloc[-1] if n else "-",
        "frames": len(r.frames),
        "jank_pct": jank_pct(r.frames),
        "train_s": float(b["latency_s"].sum()),
        "duration_s": end_s,
        "ux_score_change_pct": math.nan,
        "trace_start_s": usage.start_s, "user": usage.user,
        "sessions": len(usage.sessions),
    }


# ---------------------------------------------------------------------------------------------
# The oracle's knowledge


def measure_choice(device: str, model: str, runtime: str, overrides: tuple, label: str) -> float:
    """One choice's batch latency on a fresh idle phone (a pool worker)."""
    from swansim.runs.landscape import measure

    cat = _catalogue()
    spec = apply_overrides(cat.device(device), overrides)
    choice = _choices_with_default(spec)[label]
    cat = replace(cat, devices={**cat.devices, device: spec})
    lat, _, _ = measure(device, build_task(model), load_runtime(runtime), choice, catalogue=cat, record_layers=False)
    return lat


def _choices_with_default(spec: DeviceSpec) -> dict:
    soc = spec.soc
    return {c.label: c for c in (*enumerate_choices(soc, mixed=True), pytorch_default(soc))}


def oracle_tasks(device: str, model: str, runtime: str = "pytorch", overrides: tuple = ()) -> list[tuple]:
    """The `measure_choice` arguments of every choice of ``device`` (pool-ready)."""
    spec = apply_overrides(_catalogue().device(device), overrides)
    return [(device, model, runtime, overrides, label) for label in _choices_with_default(spec)]


def true_latencies(device: str, model: str, runtime: str = "pytorch", overrides: tuple = (),
                   jobs: int | None = 1) -> dict[str, float]:
    """The batch latency of every choice (and PyTorch's default) on an idle phone, by label:
    a landscape (`swansim.runs.landscape.measure`: warm-up batch, then the measured ones)."""
    from swansim.runs.pool import run_all

    tasks = oracle_tasks(device, model, runtime, overrides)
    lats = run_all(measure_choice, tasks, jobs, desc=f"oracle {device} {model}", progress=False)
    return {t[-1]: lat for t, lat in zip(tasks, lats)}


def run(device: str = "pixel3", model: str = "resnet34", policy: str = "swan", duration_s: float = 300.0,
        trace: str | None = None, user: str | None = None, synthetic: bool = False, seed: int = 0,
        start_s: float | None = None, **kwargs) -> RunResult:
    """The public API: one run, its tables as DataFrames (``result.batches``, ``.decisions``...)."""
    return run_policy(RunConfig(device=device, model=model, policy=policy, duration_s=duration_s, trace=trace,
                                user=user, synthetic=synthetic, seed=seed, start_s=start_s, **kwargs))
