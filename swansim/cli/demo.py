"""`swansim demo`: the quick reproduction - landscapes, throttling and UX on one phone, with plots.

1. Landscapes (after the Swan paper's Fig. 2): latency, energy and power of every execution
   choice for ResNet-34 and ShuffleNetV2-x2 training, through the full device simulation.
2. Throttling: ten minutes of sustained dense work on the big cores, then on the little ones.
3. User experience (after Fig. 3): the Work-like score with no training, with PyTorch's default
   execution of ResNet-34 training in the background, and with training on one little core.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from swansim.cli.thermal import plot_run, run_one
from swansim.device import DeviceConfig
from swansim.hw.profile import Catalogue
from swansim.landscape import landscape_frame
from swansim.plots import landscape_bars
from swansim.results import write_manifest
from swansim.scenarios import TrainingBackground, work_score

MODELS = ("resnet34", "shufflenet_v2_x2_0")
# The paper's normalised Fig. 2 figures, transcribed with their source (used for calibration).
PAPER_FIG2 = Path(__file__).resolve().parents[2] / "experiments" / "calibration" / "swan_fig2.csv"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="quick reproduction: landscapes, throttling, UX; tables and plots")
    p.add_argument("--out", default="results", help="output directory (default: %(default)s)")
    p.add_argument("--device", default="pixel3", help="phone profile (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--thermal-minutes", type=float, default=10.0)
    p.set_defaults(func=run)


def run(args) -> int:
    out = Path(args.out) / "demo"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    steps = tqdm(total=len(MODELS) + 2 + 3, desc="demo", unit="step")

    landscapes = {}
    for model in MODELS:
        df = landscape_frame(args.device, model)
        df.to_csv(out / f"landscape-{model}.csv", index=False)
        landscapes[model] = df
        steps.update()
    paper = pd.read_csv(PAPER_FIG2, comment="#") if PAPER_FIG2.exists() else None
    landscape_bars(landscapes, out / "landscapes.png", paper, f"{args.device}: training, batch 16, pytorch runtime")

    sensor = Catalogue.load().device(args.device).thermal.sensor_node
    thermal_rows = []
    for load in ("big", "little"):
        df, summary = run_one(args.device, load, args.thermal_minutes * 60.0, seed=args.seed)
        df.to_csv(out / f"thermal-{load}.csv", index=False)
        plot_run(df, out / f"thermal-{load}.png", f"{args.device}: sustained dense FP32 on the {load} cores",
                 sensor)
        thermal_rows.append(summary)
        steps.update()
    thermal = pd.DataFrame(thermal_rows)
    thermal.to_csv(out / "thermal-summary.csv", index=False)

    cfg = DeviceConfig(device=args.device, seed=args.seed)
    ux_rows = []
    for label, bg in (("none", None), ("resnet34 pytorch-default", TrainingBackground("resnet34")),
                      ("resnet34 one little core", TrainingBackground("resnet34", "little1"))):
        score, _ = work_score(cfg, bg, seed=args.seed, reference=None)
        ux_rows.append({"background": label, "score": score})
        steps.update()
    steps.close()
    ux = pd.DataFrame(ux_rows)
    ux["drop_pct"] = 100.0 * (1.0 - ux["score"] / ux["score"].iloc[0])
    ux.to_csv(out / "ux.csv", index=False)
    write_manifest(out, vars(args) | {"func": None}, seed=args.seed, wall_s=time.perf_counter() - t0)

    fmt = lambda x: f"{x:.3g}"  # noqa: E731
    for model, df in landscapes.items():
        print(f"\n== {args.device} {model}: one training step (batch 16) per execution choice")
        print(df.to_string(index=False, float_format=fmt))
    print(f"\n== {args.device}: sustained dense FP32, {args.thermal_minutes:g} simulated minutes")
    print(thermal.to_string(index=False, float_format=fmt))
    print(f"\n== {args.device}: Work-like score with training in the background")
    print(ux.to_string(index=False, float_format=fmt))
    print(f"\nwrote {out}/ in {time.perf_counter() - t0:.0f} s")
    return 0

