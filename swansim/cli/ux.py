"""`swansim ux`: the owner's experience with DNN training in the background (after Swan's Fig. 3).

Per phone: the Work-like score (`swansim.apps.workbench`) with no training, with the paper's
baseline (pytorch-default: threads = big cores, no affinity) training each model, and with
training confined to one little core; the score drop in percent; and the jank of light apps
(messaging, browsing, audio) alone and with each kind of training. Scores are relative to
the Pixel 3 without training (= 1000), so they compare across phones; drops are relative to
the same phone without training.

The benchmark's script is drawn from the seed, and one run's drop moves by a few points from
seed to seed; ``--seeds N`` runs seeds ``seed .. seed+N-1`` and reports each drop's mean and
range.

Writes under ``<out>/ux/``: ``work_scores.csv`` (one row per phone, background and seed, with
the paper's Fig. 3 drop where it has one), ``work_drops.csv`` (per phone and background: mean,
min and max drop over the seeds), ``work_tasks.csv`` (per-task times and slowdowns),
``light_jank.csv`` and ``work_drop.png`` / ``light_jank.png``, plus ``manifest.json``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from swansim.apps.ux import slowdown
from swansim.apps.workbench import score_drop_pct
from swansim.device import DeviceConfig
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.kernel.sched import PLACEMENTS
from swansim.results import write_manifest
from swansim.scenarios import (PAPER_FIG3_DROP_PCT, PAPER_WORKLOADS, TrainingBackground, app_jank,
                               reference_times, run_workbench)

DEFAULT_DEVICES = ("pixel3", "galaxy-s10e")
DEFAULT_MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")
LIGHT_APPS = ("messaging", "browsing", "audio")
REFERENCE_DEVICE = "pixel3"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ux", help="Work-like score and app jank with training in the background (Swan Fig. 3)")
    p.add_argument("--out", default="results", help="output directory (default: %(default)s)")
    p.add_argument("--devices", default=",".join(DEFAULT_DEVICES),
                   help="comma-separated profiles (default: %(default)s)")
    p.add_argument("--all", action="store_true", help="every phone and tablet profile (generic-phone and boards excepted)")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="training models (default: %(default)s)")
    p.add_argument("--passes", type=int, default=1, help="benchmark passes per run (default: %(default)s)")
    p.add_argument("--warmup-s", type=float, default=30.0,
                   help="training alone before the benchmark starts (default: %(default)s)")
    p.add_argument("--light-s", type=float, default=60.0,
                   help="seconds of each light app per run; 0 skips them (default: %(default)s)")
    p.add_argument("--placement", default="wakeup", choices=sorted(PLACEMENTS),
                   help="thread placement (default: %(default)s; see swansim.kernel.sched.WakeupPlacement)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1,
                   help="benchmark scripts per run, seeds seed..seed+N-1 (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    p.set_defaults(func=run)


def device_names(args, cat: Catalogue) -> list[str]:
    if args.all:
        return [n for n, d in cat.devices.items() if n != "generic-phone" and d.kind in ("phone", "tablet")]
    names = [n.strip() for n in args.devices.split(",") if n.strip()]
    for n in names:
        cat.device(n)  # unknown names fail early, naming the known ones
    return names


def backgrounds(models: list[str]) -> list[tuple[str, str, TrainingBackground | None]]:
    """(model, placement, background) per run: none, the baseline per model, one little core."""
    runs: list[tuple[str, str, TrainingBackground | None]] = [("-", "none", None)]
    runs += [(m, "pytorch-default", TrainingBackground(m, "pytorch-default")) for m in models]
    runs.append((models[0], "little1", TrainingBackground(models[0], "little1")))
    return runs


def run(args) -> int:
    t_start = time.perf_counter()
    cat = Catalogue.load()
    devices = device_names(args, cat)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in PAPER_WORKLOADS:
            raise InputError("--models", m, f"unknown model (expected some of {', '.join(PAPER_WORKLOADS)})")
    if args.passes < 1:
        raise InputError("--passes", "value", "must be at least 1")
    if args.seeds < 1:
        raise InputError("--seeds", "value", "must be at least 1")
    out = Path(args.out) / "ux"
    out.mkdir(parents=True, exist_ok=True)
    seeds = range(args.seed, args.seed + args.seeds)
    plan = [(seed, d, *b) for seed in seeds for d in devices for b in backgrounds(models)]
    light = [(d, *b) for d in devices for b in backgrounds(models[:1])] if args.light_s > 0 else []
    score_rows, task_frames, jank_frames = [], [], []
    alone: dict[tuple[int, str], tuple[float, pd.DataFrame]] = {}
    with tqdm(total=len(plan) + len(light) * len(LIGHT_APPS), desc="swansim ux", unit="run") as bar:
        for seed, device, model, placement, bg in plan:
            bar.set_postfix_str(f"{device} {model} {placement} seed {seed}")
            cfg = DeviceConfig(device=device, seed=seed)
            ref = reference_times(REFERENCE_DEVICE, args.passes, seed, args.placement)
            t0 = time.perf_counter()
            r = run_workbench(cfg, bg, args.warmup_s, args.passes, seed, reference=ref,
                              placement=args.placement)
            if bg is None:
                alone[seed, device] = (r.score, r.tasks)
            base_score, base_tasks = alone[seed, device]
            jank = 100.0 * float(r.frames["janky"].mean()) if len(r.frames) else float("nan")
            score_rows.append({
                "device": device, "model": model, "placement": placement, "seed": seed, "score": r.score,
                "drop_pct": score_drop_pct(base_score, r.score),
                "paper_drop_pct": PAPER_FIG3_DROP_PCT.get((device, model)) if placement == "pytorch-default" else None,
                "bench_jank_pct": jank, "sim_s": r.end_s, "wall_s": time.perf_counter() - t0,
            })
            task_frames.append(_keyed(slowdown(r.tasks, base_tasks), device=device, model=model,
                                      placement=placement, seed=seed))
            save_progress(out, score_rows, task_frames, jank_frames)
            bar.update()
        for device, model, placement, bg in light:
            cfg = DeviceConfig(device=device, seed=args.seed)
            for category in LIGHT_APPS:
                bar.set_postfix_str(f"{device} {category} {placement}")
                _, summary = app_jank(cfg, category, bg, args.light_s, min(args.warmup_s, 10.0), args.placement)
                jank_frames.append(_keyed(summary, device=device, model=model, placement=placement))
                save_progress(out, score_rows, task_frames, jank_frames)
                bar.update()
    scores, janks = save_progress(out, score_rows, task_frames, jank_frames)
    drops = drop_summary(scores)
    drops.to_csv(out / "work_drops.csv", index=False)
    wall_s = time.perf_counter() - t_start
    if not args.no_plots:
        plot_drops(drops, out / "work_drop.png")
        if len(janks):
            plot_jank(janks, out / "light_jank.png")
    write_manifest(out, vars(args) | {"func": None}, seed=args.seed, devices=devices, wall_s=wall_s,
                   reference_device=REFERENCE_DEVICE)
    print_summary(drops, janks)
    print(f"wrote {out}/ in {wall_s:.0f} s")
    return 0


def _keyed(df: pd.DataFrame, **keys) -> pd.DataFrame:
    """``df`` with the run's key columns in front, in the order given."""
    for i, (name, value) in enumerate(keys.items()):
        df.insert(i, name, value)
    return df


def save_progress(out: Path, score_rows: list, task_frames: list, jank_frames: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write every finished run's rows (after each run, so an interrupted sweep keeps them)."""
    scores = pd.DataFrame(score_rows)
    scores.to_csv(out / "work_scores.csv", index=False)
    if task_frames:
        pd.concat(task_frames, ignore_index=True).to_csv(out / "work_tasks.csv", index=False)
    janks = pd.concat(jank_frames, ignore_index=True) if jank_frames else pd.DataFrame()
    if len(janks):
        janks.to_csv(out / "light_jank.csv", index=False)
    return scores, janks


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
    print(f"{'device':<14} {'training':<32} {'score':>7} {'drop %':>7}{spread} {'paper %':>8} {'jank %':>7}")
    for r in drops.itertuples():
        label = "none" if r.placement == "none" else f"{r.model} {r.placement}"
        paper = f"{r.paper_drop_pct:.1f}" if pd.notna(r.paper_drop_pct) else "-"
        rng = f" {f'{r.drop_min_pct:.1f}..{r.drop_max_pct:.1f}':>16}" if n > 1 else ""
        print(f"{r.device:<14} {label:<32} {r.score:>7.0f} {r.drop_pct:>7.1f}{rng} {paper:>8} {r.bench_jank_pct:>7.2f}")
    if len(janks):
        print(f"\n{'device':<14} {'app':<10} {'training':<24} {'frames':>7} {'jank %':>7} {'p95 ms':>7}")
        for r in janks.itertuples():
            label = "none" if r.placement == "none" else f"{r.model} {r.placement}"
            print(f"{r.device:<14} {r.app:<10} {label:<24} {int(r.frames):>7} {r.jank_pct:>7.2f} {r.p95_ms:>7.1f}")


def plot_drops(drops: pd.DataFrame, path: Path) -> None:
    """Mean drop per phone and background, with its range over the seeds as an error bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = drops[drops["placement"] != "none"].copy()
    df["run"] = df["model"] + " " + df["placement"]
    runs = list(dict.fromkeys(df["run"]))
    devices = list(dict.fromkeys(df["device"]))
    width = 0.8 / max(len(runs), 1)
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 + 1.6 * len(devices)), 4))
    for j, run in enumerate(runs):
        sub = df[df["run"] == run].set_index("device").reindex(devices)
        xs = [i + (j - (len(runs) - 1) / 2) * width for i in range(len(devices))]
        err = [sub["drop_pct"] - sub["drop_min_pct"], sub["drop_max_pct"] - sub["drop_pct"]]
        ax.bar(xs, sub["drop_pct"], width, label=run, yerr=err if (sub["seeds"] > 1).any() else None,
               capsize=2)
        for x, p in zip(xs, sub["paper_drop_pct"]):
            if pd.notna(p):
                ax.plot([x - width / 2, x + width / 2], [p, p], color="black", lw=2)
    ax.plot([], [], color="black", lw=2, label="Swan paper Fig. 3")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xticks(range(len(devices)), devices)
    ax.set_ylabel("Work-like score drop (%)")
    ax.set_title("Work-like score drop, training in the background")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_jank(janks: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = janks.copy()
    df["run"] = [("none" if p == "none" else f"{m} {p}") for m, p in zip(df["model"], df["placement"])]
    df["x"] = df["device"] + "\n" + df["app"]
    piv = df.pivot_table(index="x", columns="run", values="jank_pct", sort=False)
    ax = piv.plot.bar(figsize=(max(5, 0.9 * len(piv)), 4), rot=0)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("janky frames (%)")
    ax.set_xlabel("")
    ax.set_title("Light apps: frames missing their deadline")
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)
