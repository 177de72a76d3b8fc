"""Why training in the background can raise the owner's Work-like score: the mechanism, isolated.

`swansim ux --all` shows training on one little core raising the benchmark's score by a point
or two on the Snapdragon 855/865 phones. This runs, per phone, the benchmark

  alone            nothing else on the phone (the yardstick)
  held clock       no training, but the little cluster's floor (scaling_min_freq) at its top OPP:
                   what a thread that keeps one little core busy does to the cluster's one clock
  little1 (ResNet-34)     ResNet-34 training pinned to the first little core (as `ux`)
  default (MobileNetV2)   PyTorch's default training MobileNetV2 (as `ux`)

and prints each drop against "alone" (positive: the owner loses); ``drops.csv`` and
``drops.png`` go under ``--out``. If "held clock" gains at least what "little1" gains, the
raise is the shared clock: the benchmark's threads on the other little cores run at the clock
the training holds up, and, as WALT scales a task's demand by its clock, they look bigger and
move up to the gold cores sooner. Real phones do this: Android's documentation names a busy loop
in a background thread as the common way apps raise their clocks, which its Performance Hint API
replaces (source.android.com/docs/core/perf/performance-hint-api, "Clock speed"); more in the
README ("Where the model stands").

    .venv/bin/python experiments/ux_raise.py [--devices galaxy-s10e,oneplus8,pixel3]
        [--passes N] [--jobs 2] [--out results/ux_raise]
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.apps.workbench import score_drop_pct
from swansim.cli import Parser, guarded
from swansim.device import DeviceConfig
from swansim.hw.profile import Catalogue
from swansim.pool import run_all
from swansim.results import write_csv, write_manifest
from swansim.runs.scenarios import HeldClock, TrainingBackground, reference_times, run_workbench

DEVICES = ("galaxy-s10e", "oneplus8", "pixel3")
ROWS = {
    "alone": None,
    "held clock": HeldClock(),
    "little1 (ResNet-34)": TrainingBackground("resnet34", "little1"),
    "default (MobileNetV2)": TrainingBackground("mobilenet_v2", "pytorch-default"),
}


def _run(device: str, row: str, passes: int | None, ref: pd.Series) -> float:
    """A pool worker: the benchmark's score on ``device`` with ``row``'s background."""
    spec = Catalogue.load().device(device)
    return run_workbench(spec, DeviceConfig(seed=0), ROWS[row], passes=passes, seed=0, reference=ref).score


def main(argv: list[str] | None = None) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--passes", type=int, default=None, help="benchmark passes (default: the app table's)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="results/ux_raise")
    args = ap.parse_args(argv)
    cat = Catalogue.load()
    devices = tuple(d for d in args.devices.split(",") if d)
    checks.names(devices, "--devices", cat.names, "profile")
    if args.passes is not None:
        checks.integer(args.passes, "--passes", 1, 100)
    out = checks.out_dir(Path(args.out))
    ref = reference_times("pixel3", args.passes, 0)
    plan = [(d, r) for d in devices for r in ROWS]
    scores = run_all(_run, [(d, r, args.passes, ref) for d, r in plan], args.jobs, desc="benchmark runs",
                     labels=[f"{d} {r}" for d, r in plan])
    table = pd.DataFrame([{"device": d, "background": r, "score": s} for (d, r), s in zip(plan, scores)])
    alone = table[table["background"] == "alone"].set_index("device")["score"]
    table["drop_pct"] = [score_drop_pct(alone[d], s) for d, s in zip(table["device"], table["score"])]
    write_csv(table, out / "drops.csv")
    from swansim.plots import ux_drops
    bars = table.assign(model="", placement=table["background"].where(table["background"] != "alone", "none"),
                        seeds=1, drop_min_pct=table["drop_pct"], drop_max_pct=table["drop_pct"], paper_drop_pct=None)
    ux_drops(bars, out / "drops.png", title="Work-like score drop against the benchmark alone")
    write_manifest(out, vars(args), seed=0, files=["drops.csv", "drops.png"])
    wide = table.pivot(index="device", columns="background", values="drop_pct").reindex(index=devices,
                                                                                      columns=list(ROWS))
    print("Work-like score drop, % (positive: the owner loses)")
    print(wide.drop(columns="alone").round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "ux_raise.py"))
