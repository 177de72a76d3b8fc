"""The owner's Work-like score with training behind it, Swan against PyTorch's default, on the
paper's five phones and three tasks: the setting of the Swan paper's Table 3 (the benchmark in
the foreground, training in the background).

Per phone, task and policy (`swansim.compare`, no trace): the policy trains on an idle phone
first (Swan long enough to explore every choice of its space, in requests of 3 batches; the
default a few seconds), then, as that left it, takes the task's federated requests on the
idle phone, and 30 s later the owner picks the phone up and runs the Work-like benchmark for
about ten minutes, as long as PCMark's Work test (the app table's passes of its script; Swan
takes requests only on an idle phone: the one under way runs on, under its adaptation, and
then it trains no more until the owner is done); the drop is against the same phone running
the benchmark alone (positive: the owner loses). Printed: every cell, each phone's mean over
the tasks, and Swan's drop as a share of the default's. experiments/swan_request_reading.py
shows Swan's drop under the other reading of its monitoring rule.

    .venv/bin/python experiments/owner_table3.py [--jobs N] [--devices a,b] [--models a,b] [--out DIR]
                                                            # -> results/owner_table3/
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import swansim
from swansim import checks
from swansim.cli import Parser, guarded
from swansim.plots import policy_ux
from swansim.results import write_csv, write_manifest
from swansim.hw.profile import SWAN_PHONES

MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")
POLICIES = ("pytorch-default", "swan")
# simulated seconds on the idle phone before the benchmark: Swan explores every choice (the
# slowest phone's exploration, experiments/policy_speedup.py); the default has nothing to learn
EXPLORE_S = {"resnet34": 75.0, "shufflenet_v2_x2_0": 520.0, "mobilenet_v2": 620.0}
STATIC_S = 5.0
OUT = Path("results/owner_table3")


def run(devices=SWAN_PHONES, models=MODELS, jobs: int | None = None, out: Path = OUT) -> pd.DataFrame:
    """One row per phone, task and policy (compare's columns); kept on disk (``out``) as each task ends."""
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    for model in models:
        frames.append(swansim.compare(devices, [model], ["swan"], duration_s=EXPLORE_S[model], jobs=jobs,
                                      request_batches=3))
        frames.append(swansim.compare(devices, [model], ["pytorch-default"], duration_s=STATIC_S, jobs=jobs))
        write_csv(pd.concat(frames, ignore_index=True), out / "runs.csv")
    return pd.concat(frames, ignore_index=True)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Drops side by side per phone and task, with Swan's share of the default's."""
    t = runs.pivot_table(index=["device", "model"], columns="policy", values="ux_score_drop_pct", sort=False)
    t = t[list(POLICIES)].reset_index()
    t["swan_share_of_default"] = _share(t["swan"], t["pytorch-default"])
    return t


def _share(swan, default):
    """Swan's drop as a share of the default's; none where the default costs the owner nothing
    (a share of a gain means nothing)."""
    return (swan / default).where(default > 0)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default=",".join(SWAN_PHONES))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=str(OUT), help="results directory (default: %(default)s)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    devices = checks.listed(args.devices, "--devices")
    models = checks.names(checks.listed(args.models, "--models"), "--models", MODELS, "Swan task")
    t = table(run(devices, models, args.jobs, out))
    write_csv(t, out / "table3.csv")
    policy_ux(t.melt(id_vars=["device", "model"], value_vars=list(POLICIES), var_name="policy",
                     value_name="ux_score_drop_pct"), out / "table3.png")
    per_phone = t.groupby("device", sort=False)[list(POLICIES)].mean()
    per_phone["swan_share_of_default"] = _share(per_phone["swan"], per_phone["pytorch-default"])
    write_manifest(out, {"devices": list(devices), "models": list(models), "explore_s": EXPLORE_S,
                         "static_s": STATIC_S}, seed=0, files=["runs.csv", "table3.csv", "table3.png"])
    fmt = {"float_format": lambda x: f"{x:.3g}"}
    print("Work-like score drop (%) with training in the background (positive: the owner loses)")
    print(t.to_string(index=False, **fmt))
    print("\nper phone, mean over the tasks")
    print(per_phone.to_string(**fmt))
    swan, default = t["swan"].mean(), t["pytorch-default"].mean()
    print(f"\nover the cells: Swan's mean drop {swan:.3g}% against the default's {default:.3g}%"
          + (f" (a share of {swan / default:.3g})" if default > 0 else "")
          + f"; Swan's drop below the default's in {(t['swan'] < t['pytorch-default']).sum()} of {len(t)} cells"
          f" and on {(per_phone['swan'] < per_phone['pytorch-default']).sum()} of {len(per_phone)} phones")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "owner_table3.py"))
