"""The owner's experience with DNN training in the background (after Swan's Fig. 3).

Per phone: the Work-like score (`swansim.apps.workbench`) with no training, with the paper's
baseline (pytorch-default: threads = big cores, no affinity) training each model, and with
training confined to one little core; the score drop in percent; and the jank of light apps
(messaging, browsing, audio) alone and with each kind of training. Scores are relative to
the Pixel 3 without training (= 1000), so they compare across phones; drops are relative to
the same phone without training.

The benchmark's script is drawn from the seed, and one run's drop moves by a few points from
seed to seed; ``seeds=N`` runs seeds ``seed .. seed+N-1`` and reports each drop's mean and
range. Runs are independent and go over a process pool.

Writes under ``out``: ``work_scores.csv`` (one row per phone, background and seed, with the
paper's Fig. 3 drop where it has one), ``work_drops.csv`` (per phone and background: mean, min
and max drop over the seeds), ``work_tasks.csv`` (per-task times and slowdowns),
``light_jank.csv`` and ``work_drop.png`` / ``light_jank.png``, plus ``manifest.json``.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from swansim import checks
from swansim.apps.ux import slowdown
from swansim.apps.workbench import score_drop_pct
from swansim.device import DeviceConfig
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP, training_runtime
from swansim.dnn.tasks import SWAN_TASKS
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.kernel.placement import AUTO, PLACEMENTS
from swansim.results import write_csv, write_manifest
from swansim.options import option
from swansim.pool import check_jobs, run_all
from swansim.runs.scenarios import (PAPER_FIG3_DROP_PCT, WARMUP_S, TrainingBackground, app_jank,
                                    reference_times, run_workbench)

DEFAULT_DEVICES = ("pixel3", "galaxy-s10e")
DEFAULT_MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")
LIGHT_APPS = ("messaging", "browsing", "audio")
REFERENCE_DEVICE = "pixel3"


@dataclass(frozen=True)
class UxConfig:
    """What `run_ux` runs: phones x backgrounds x seeds, and the light apps."""

    devices: tuple[str, ...] = option(DEFAULT_DEVICES, help="phone profiles")
    models: tuple[str, ...] = option(DEFAULT_MODELS, help="the Swan tasks trained in the background")
    passes: int | None = option(None, help="benchmark passes per run (default: the app table's, a run as long as "
                                           "PCMark's Work test)")
    warmup_s: float = option(WARMUP_S, help="seconds of training alone before the benchmark or app starts")
    light_s: float = option(60.0, help="seconds of each light app per run; 0 skips them")
    placement: str = option(AUTO, help="thread placement (auto: the phone's kernel, walt where its profile names "
                                       "one, else wakeup)", known=lambda: (AUTO, *PLACEMENTS))
    seed: int = option(0, help="first seed")
    seeds: int = option(1, help="benchmark scripts per run, seeds seed..seed+N-1")
    runtime: str = option("pytorch", help=TRAINING_RUNTIME_HELP)

    def check(self, cat: Catalogue) -> None:
        """Every field, before any work: one InputError naming the first bad one."""
        checks.names(self.devices, "--devices", cat.names, "profile")
        checks.names(self.models, "--models", SWAN_TASKS, "model")
        if self.passes is not None:
            checks.integer(self.passes, "--passes", 1, 100)
        checks.integer(self.seeds, "--seeds", 1, 1000)
        checks.seed(self.seed)
        checks.number(self.warmup_s, "--warmup-s", 0.0, 3600.0, "of seconds")
        checks.number(self.light_s, "--light-s", 0.0, 3600.0, "of seconds")
        checks.one_of(self.placement, "--placement", (AUTO, *PLACEMENTS), "placement")
        training_runtime(self.runtime, "--runtime")


def phones_and_tablets(cat: Catalogue) -> tuple[str, ...]:
    """Every phone and tablet profile (the generic chassis and boards excepted)."""
    return tuple(n for n, d in cat.devices.items() if n != "generic-phone" and d.kind in ("phone", "tablet"))


def backgrounds(models: Sequence[str], runtime: str = "pytorch") -> list[tuple[str, str, TrainingBackground | None]]:
    """(model, placement, background) per run: none, the baseline per model, one little core."""
    runs: list[tuple[str, str, TrainingBackground | None]] = [("-", "none", None)]
    runs += [(m, "pytorch-default", TrainingBackground(m, "pytorch-default", runtime)) for m in models]
    runs.append((models[0], "little1", TrainingBackground(models[0], "little1", runtime)))
    return runs


def _reference(passes: int | None, seed: int, placement: str) -> pd.Series:
    return reference_times(REFERENCE_DEVICE, passes, seed, placement)


def _bench(cfg: UxConfig, seed: int, spec: DeviceSpec, bg: TrainingBackground | None, ref: pd.Series):
    """A pool worker: one benchmark run; (score, tasks, jank %, simulated s)."""
    r = run_workbench(spec, DeviceConfig(seed=seed), bg, cfg.warmup_s, cfg.passes, seed,
                      reference=ref, placement=cfg.placement)
    jank = 100.0 * float(r.frames["janky"].mean()) if len(r.frames) else float("nan")
    return r.score, r.tasks, jank, r.end_s


def _light(cfg: UxConfig, spec: DeviceSpec, category: str, bg: TrainingBackground | None) -> pd.DataFrame:
    """A pool worker: one light app's jank summary."""
    _, summary = app_jank(spec, DeviceConfig(seed=cfg.seed), category, bg, cfg.light_s, cfg.warmup_s,
                          cfg.placement)
    return summary


def run_ux(cfg: UxConfig, out: Path | str, plots: bool = True, jobs: int | None = None,
           progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every run of ``cfg`` over a process pool; writes tables (after every finished run, so an
    interrupted sweep keeps them), plots and a manifest under ``out``; (drops, janks)."""
    started = time.perf_counter()
    cat = Catalogue.load()
    cfg.check(cat)
    specs = {d: cat.device(d, "--devices") for d in cfg.devices}
    jobs = check_jobs(jobs)
    out = checks.out_dir(out)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    refs = dict(zip(seeds, run_all(_reference, [(cfg.passes, s, cfg.placement) for s in seeds], jobs,
                                   desc="reference runs", progress=progress)))
    plan = [(seed, d, *b) for seed in seeds for d in cfg.devices for b in backgrounds(cfg.models, cfg.runtime)]
    light = ([(d, cat_, *b) for d in cfg.devices for b in backgrounds(cfg.models[:1], cfg.runtime) for cat_ in LIGHT_APPS]
             if cfg.light_s > 0 else [])
    bench: dict[int, tuple] = {}
    janks: dict[int, pd.DataFrame] = {}

    def save() -> tuple[pd.DataFrame, pd.DataFrame]:
        return save_progress(out, plan, bench, light, janks)

    run_all(_bench, [(cfg, seed, specs[d], bg, refs[seed]) for seed, d, _, _, bg in plan], jobs, desc="benchmark runs",
            on_result=lambda i, r: (bench.__setitem__(i, r), save()), progress=progress,
            labels=[f"{d} {m} {p} seed {s}" for s, d, m, p, _ in plan])
    run_all(_light, [(cfg, specs[d], c, bg) for d, c, _, _, bg in light], jobs, desc="light apps",
            on_result=lambda i, r: (janks.__setitem__(i, r), save()), progress=progress,
            labels=[f"{d} {c} {p}" for d, c, _, p, _ in light])
    scores, jank_table = save()
    drops = drop_summary(scores)
    write_csv(drops, out / "work_drops.csv")
    files = ["work_scores.csv", "work_tasks.csv", "work_drops.csv"] + (["light_jank.csv"] if len(jank_table) else [])
    if plots:
        from swansim import plots as P
        P.ux_drops(drops, out / "work_drop.png")
        files.append("work_drop.png")
        if len(jank_table):
            P.ux_jank(jank_table, out / "light_jank.png")
            files.append("light_jank.png")
    write_manifest(out, asdict(cfg), seed=cfg.seed, files=files, reference_device=REFERENCE_DEVICE,
                   wall_s=round(time.perf_counter() - started, 1))
    return drops, jank_table


def _keyed(df: pd.DataFrame, **keys) -> pd.DataFrame:
    """``df`` with the run's key columns in front, in the order given."""
    for i, (name, value) in enumerate(keys.items()):
        df.insert(i, name, value)
    return df


def save_progress(out: Path, plan: list, bench: dict, light: list, janks: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write every finished run's rows, in plan order (so the files do not depend on which run
    finished first); a background's drop needs its phone's unloaded run of the same seed."""
    alone = {(plan[i][0], plan[i][1]): r for i, r in bench.items() if plan[i][3] == "none"}
    score_rows, task_frames = [], []
    for i in sorted(bench):
        seed, device, model, placement, _ = plan[i]
        score, tasks, jank, end_s = bench[i]
        base = alone.get((seed, device))
        score_rows.append({
            "device": device, "model": model, "placement": placement, "seed": seed, "score": score,
            "drop_pct": score_drop_pct(base[0], score) if base else float("nan"),
            "paper_drop_pct": PAPER_FIG3_DROP_PCT.get((device, model)) if placement == "pytorch-default" else None,
            "bench_jank_pct": jank, "sim_s": end_s,
        })
        if base:
            task_frames.append(_keyed(slowdown(tasks, base[1]), device=device, model=model,
                                      placement=placement, seed=seed))
    scores = pd.DataFrame(score_rows)
    write_csv(scores, out / "work_scores.csv")
    if task_frames:
        write_csv(pd.concat(task_frames, ignore_index=True), out / "work_tasks.csv")
    frames = [_keyed(janks[i].copy(), device=light[i][0], model=light[i][2], placement=light[i][3])
              for i in sorted(janks)]
    jank_table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(jank_table):
        write_csv(jank_table, out / "light_jank.csv")
    return scores, jank_table


def drop_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per phone and background (in run order): seeds, mean score, mean/min/max drop, paper, jank."""
    keys = ["device", "model", "placement"]
    g = scores.groupby(keys, sort=False)
    out = g.agg(seeds=("seed", "size"), score=("score", "mean"), drop_pct=("drop_pct", "mean"),
                drop_min_pct=("drop_pct", "min"), drop_max_pct=("drop_pct", "max"),
                paper_drop_pct=("paper_drop_pct", "first"), bench_jank_pct=("bench_jank_pct", "mean"))
    return out.reset_index()


def print_summary(drops: pd.DataFrame, janks: pd.DataFrame) -> None:
    n = int(drops["seeds"].max()) if len(drops) else 1
    spread = f" {'range (' + str(n) + ' seeds)':>16}" if n > 1 else ""
    print("Work-like score with training in the background (pytorch-default: as many threads as big cores, "
          "unpinned; little1: one thread on the first little core); drop = score lost to training")
    print(f"{'device':<14} {'training':<32} {'score':>7} {'drop %':>7}{spread} {'paper %':>8} {'jank %':>7}")
    for r in drops.itertuples():
        label = "none" if r.placement == "none" else f"{r.model} {r.placement}"
        paper = f"{r.paper_drop_pct:.1f}" if pd.notna(r.paper_drop_pct) else "-"
        rng = f" {f'{r.drop_min_pct:.1f}..{r.drop_max_pct:.1f}':>16}" if n > 1 else ""
        print(f"{r.device:<14} {label:<32} {r.score:>7.0f} {r.drop_pct:>7.1f}{rng} {paper:>8} {r.bench_jank_pct:>7.2f}")
    if (drops["drop_pct"] < 0).any():
        print("A negative drop is a gain. Where it comes from on the SD855/SD865 phones (the little cluster's "
              "one clock, held up by the training): experiments/ux_raise.py.")
    if len(janks):
        print(f"\n{'device':<14} {'app':<10} {'training':<24} {'frames':>7} {'jank %':>7} {'p95 ms':>7}")
        for r in janks.itertuples():
            label = "none" if r.placement == "none" else f"{r.model} {r.placement}"
            print(f"{r.device:<14} {r.app:<10} {label:<24} {int(r.frames):>7} {r.jank_pct:>7.2f} {r.p95_ms:>7.1f}")


