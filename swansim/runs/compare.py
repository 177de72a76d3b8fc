"""Policies side by side: devices x models x policies (x swept profile figures).

Every configuration is a `swansim.session.phone` run of the same owner (a trace, a synthetic owner
or an idle phone) for the same duration; its row has the mean latency and training energy per
batch, the owner's frames and jank (where the owner runs apps: a trace or a synthetic owner), how
often the policy declined to train and why, and - unless ``ux=False`` - the Work-like score drop
(positive: the owner loses, as `swansim ux` reports it): the policy, as
that run left it (what it explored, it keeps), trains on an idle phone in requests of the
task's federated local steps (`dnn.tasks.Task.fl_local_steps`, as a deployment sends them),
and after `scenarios.WARMUP_S` the owner picks the phone up and runs the Work-like benchmark,
against the same phone running the benchmark without training. A policy that takes requests
only on an idle phone (Swan) trains during the benchmark until the request in flight ends.
``sets`` sweep profile figures by dotted path (`swansim.session.overrides`); each gets a column.

The oracle's knowledge (every choice's true latency, per device, model and swept figures) is
measured first. All runs go over `swansim.pool.run_all`; finished rows are written to
``compare.csv`` as they arrive (in configuration order), so an interrupted sweep keeps them.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP
from swansim.dnn.tasks import task
from swansim.errors import InputError
from swansim.hw.profile import DEFAULT_DEVICE, Catalogue
from swansim.options import option, takes
from swansim.policy.base import DECLINE_REASONS, policy_class, policy_names
from swansim.pool import check_jobs, run_all
from swansim.results import write_csv, write_manifest
from swansim.session.driver import REQUEST_BATCHES
from swansim.session.overrides import distinct_values
from swansim.session.phone import RunConfig, measure_choice, oracle_tasks, run_policy
from swansim.session.usage import usage_of
from swansim.runs.scenarios import WARMUP_S

METRICS = ["latency_s", "energy_j", "ux_score_drop_pct", "jank_pct", "batches", "explore_batches",
           "steady_latency_s", "steady_energy_j", "final_plan", "frames", "duration_s",
           *(f"declined_{why}" for why in DECLINE_REASONS)]
# The bound on a comparison's total simulated time (runs x duration; a 120 s run takes ~10-20 s
# of wall time on one core): 12 simulated hours, an hour or two on two cores.
MAX_SIMULATED_S = 12 * 3600.0

# Columns measured only when there is something to measure: the owner's apps' frames and jank
# (none on an idle phone), the Work-like score drop (not with ``ux=False``).
OWNER_METRICS = ("jank_pct", "frames")


@dataclass(frozen=True)
class CompareConfig:
    """Devices x models x policies x swept profile figures; the `swansim compare` options and
    `swansim.compare`'s keywords are these fields."""

    devices: tuple[str, ...] = option((DEFAULT_DEVICE,), help="phone, board or SoC profiles")
    models: tuple[str, ...] = option(("resnet34",), help="Swan tasks or zoo models")
    policies: tuple[str, ...] = option(("swan", "pytorch-default"), help="policies", known=policy_names)
    trace: str | None = option(None, exclusive="owner", help="a trace set directory (default: an idle phone)")
    user: str | None = option(None, help="the trace's user (default: its first)")
    synthetic: bool = option(False, exclusive="owner", help="a synthetic owner drawn from the seed")
    seed: int = option(0, help="seed of the owner, the apps and the runtime's jitter")
    duration_s: float = option(120.0, flag="--duration", help="simulated seconds per run")
    sets: tuple[tuple[str, tuple[str, ...]], ...] = option(
        (), cli=False, help="profile figures swept: (dotted path, values) pairs (the CLI's --set)")
    ux: bool = option(True, flag="--no-ux", help="the Work-like benchmark runs and their ux_score_drop_pct "
                                                  "column (--no-ux: none)")
    request_batches: int = option(REQUEST_BATCHES, help="mini-batches per training request")
    runtime: str = option("pytorch", help=TRAINING_RUNTIME_HELP)
    bench_passes: int | None = option(None, help="passes of the Work-like benchmark's script (default: the app "
                                                 "table's, a run as long as PCMark's Work test)")
    no_limit: bool = option(False, help="lift the bound on the total simulated time (12 h: runs x duration)")

    def metrics(self) -> list[str]:
        """The metric columns this comparison measures (see `OWNER_METRICS`)."""
        owner = self.trace is not None or self.synthetic
        return [m for m in METRICS if (owner or m not in OWNER_METRICS) and (self.ux or m != "ux_score_drop_pct")]

    def runs(self) -> list[RunConfig]:
        """One run configuration per device x model x policy x combination of swept values."""
        fields = [f for f, _ in self.sets]
        combos = list(itertools.product(*[v for _, v in self.sets])) or [()]
        return [RunConfig(device=d, model=m, policy=p, duration_s=self.duration_s, trace=self.trace, user=self.user,
                          synthetic=self.synthetic, seed=self.seed, request_batches=self.request_batches,
                          runtime=self.runtime, bench_passes=self.bench_passes,
                          overrides=tuple(zip(fields, combo)))
                for d in self.devices for m in self.models for combo in combos for p in self.policies]

    def check(self, cat: Catalogue) -> list[RunConfig]:
        """Every argument, before any simulation: one InputError naming the first bad one."""
        for name, values in (("--devices", self.devices), ("--models", self.models), ("--policies", self.policies)):
            if not values:
                raise InputError(name, name.lstrip("-"), "nothing named")
            if len(set(values)) != len(values):
                raise InputError(name, name.lstrip("-"), "a name is given twice")
        for d in self.devices:
            cat.device(d, "--devices")
        for p in self.policies:
            policy_class(p, "--policies")
        checks.seed(self.seed)
        for f, values in self.sets:
            distinct_values(f, values)
        fields = [f for f, _ in self.sets]
        if len(set(fields)) != len(fields):
            raise InputError("--set", "set", "a field is swept twice")
        n = len(self.devices) * len(self.models) * len(self.policies) * math.prod(len(v) for _, v in self.sets)
        checks.number(self.duration_s, "--duration", 1e-3, 6 * 3600.0, "s")
        checks.work(n * self.duration_s, MAX_SIMULATED_S, f"simulated s ({n} runs x {self.duration_s:g} s)",
                    "--duration", self.no_limit)
        runs = self.runs()
        for rc in runs:
            rc.check(cat)          # devices, models, policies, durations, every swept value on every device
        usage_of(runs[0])          # the trace and its user
        return runs


def _row(cfg: CompareConfig, rc: RunConfig, oracle: dict | None) -> dict:
    """One configuration (a pool worker): its run, and the owner's benchmark with it."""
    r = run_policy(rc, oracle=oracle)
    s = r.summary
    row = {"device": rc.device, "model": rc.model, "policy": rc.policy, **dict(rc.overrides),
           **{k: s[k] for k in cfg.metrics() if k in s}}
    if cfg.ux:
        row["ux_score_drop_pct"] = run_policy(benchmark_config(rc), policy=r.policy).summary["ux_score_drop_pct"]
    return row


def benchmark_config(rc: RunConfig) -> RunConfig:
    """The owner's benchmark run after ``rc`` (module doc): an idle phone with no trace, the
    task's federated requests, the Work-like benchmark at `scenarios.WARMUP_S`."""
    return replace(rc, trace=None, user=None, synthetic=False, start_s=None, duration_s=None,
                   bench_at_s=WARMUP_S, screen_on=False, request_batches=task(rc.model).fl_local_steps)


def compare_frame(cfg: CompareConfig, out: Path | str | None = None, jobs: int | None = None,
                  progress: bool = False) -> pd.DataFrame:
    """The comparison as a tidy frame (one row per configuration, in configuration order);
    with ``out``, ``compare.csv`` (kept up to date as rows finish) and a manifest there."""
    runs = cfg.check(Catalogue.load())
    check_jobs(jobs)
    out = checks.out_dir(out) if out is not None else None

    # the oracle's knowledge: every choice's true latency, once per device, model and swept values
    keys = sorted({(rc.device, rc.model, rc.runtime, rc.overrides) for rc in runs if rc.policy == "oracle"})
    tasks = [t for k in keys for t in oracle_tasks(*k)]
    lats = run_all(measure_choice, tasks, jobs, desc="oracle landscapes", progress=progress,
                   labels=[f"{t[0]} {t[1]} {t[-1]}" for t in tasks])
    oracles: dict[tuple, dict[str, float]] = {}
    for t, lat in zip(tasks, lats):
        oracles.setdefault(t[:4], {})[t[-1]] = lat

    columns = ["device", "model", "policy", *[f for f, _ in cfg.sets], *cfg.metrics()]
    done: dict[int, dict] = {}

    def keep(i: int, row: dict) -> None:
        done[i] = row
        if out is not None:   # the table and a manifest that describes it, after every row
            write_csv(pd.DataFrame([done[k] for k in sorted(done)], columns=columns), out / "compare.csv")
            write_manifest(out, asdict(cfg), seed=cfg.seed, files=["compare.csv"], rows_done=len(done),
                           rows_planned=len(runs))

    if out is not None:   # a manifest of an earlier comparison must not describe this one's files
        (out / "manifest.json").unlink(missing_ok=True)

    args = [(cfg, rc, oracles.get((rc.device, rc.model, rc.runtime, rc.overrides))) for rc in runs]
    rows = run_all(_row, args, jobs, desc="compare", on_result=keep, progress=progress,
                   labels=[f"{rc.device} {rc.model} {rc.policy} {dict(rc.overrides) or ''}" for rc in runs])
    return pd.DataFrame(rows, columns=columns)


@takes(CompareConfig)
def compare(devices=(DEFAULT_DEVICE,), models=("resnet34",), policies=("swan", "pytorch-default"), trace=None,
            synthetic=False, duration_s=120.0, sets=None, jobs=None, out=None, progress=True,
            **kwargs) -> pd.DataFrame:
    """Devices x models x policies (x swept profile figures), one row per run: latency, energy,
    the owner's experience, declines. ``sets`` maps a dotted profile path to the values to sweep
    (``{"soc.dram_bandwidth_gbps": [8, 29.9]}``); ``out`` a directory for compare.csv and its
    manifest; ``jobs`` processes; ``progress=False`` silences the bar on stderr."""
    checks.keywords(kwargs, CompareConfig, "swansim.compare")
    with checks.as_keywords("swansim.compare", CompareConfig, RunConfig, renames={"--set": "sets"}):
        devices, models, policies = (checks.listed(v, f"swansim.compare({k}=...)") for k, v in
                                     (("devices", devices), ("models", models), ("policies", policies)))
        sets = tuple((k, tuple(str(v) for v in vs)) for k, vs in (sets or {}).items())
        cfg = CompareConfig(devices=tuple(devices), models=tuple(models), policies=tuple(policies), trace=trace,
                            synthetic=synthetic, duration_s=duration_s, sets=sets, **kwargs)
        return compare_frame(cfg, out, jobs, progress=progress)
