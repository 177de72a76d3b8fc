"""The per-group loop's fast path against the simulation it stands for.

A grouped or depthwise convolution is PyTorch's loop over groups: thousands of small parallel
regions per batch. The training job runs such a loop as one macro region (`dnn.regions.time_region`
decides each member's busy and idle shares, `dnn.training.TrainingJob`): ``macro``. ``repeats``
runs every repeat as a region of its own, each fork and join through the scheduler: what the
macro region stands for. ``chunked``, the default and the path the runtime is fitted on: macro
regions of at most `dnn.training.MACRO_REPEATS` repeats. This script runs the same batches each way and prints,
per phone, task and choice, the latency and energy of each path and their ratio to ``repeats``;
then PyTorch's default against the fastest pinned choice of the table under each path (the
landscape's gap). ResNet-34 has no grouped convolution: every path is the same run, so it is
left out. Per path also how often the job's threads fell asleep per batch (``sleeps_*``, each a
futex_wait: the macro regions count theirs in closed form, where a worker's gap between repeats
against its spin budget decides), and with ``--runtime FILE.toml`` the paths at a variant of
the runtime (the fast path is fitted at the committed values; away from them it can decide the
other way: DESIGN.md, the per-group loop).

    python experiments/macro_check.py [--devices pixel3,galaxy-s10e,oneplus8]
        [--models shufflenet_v2_x2_0,mobilenet_v2] [--choices default,4,4567,0123]
        [--runtime pytorch|FILE.toml] [--jobs 2] [--out results/macro_check]

Every number is `swansim.batchmodel.simulate_batch` (one warm-up and one measured batch, batch
16, schedutil, top-app); the repeat-by-repeat run costs about 10x the macro one.
"""
from __future__ import annotations

import sys

import pandas as pd

from swansim import checks
from swansim.batchmodel import BatchKey, simulate_batch
from swansim.cli import Parser, guarded
from swansim.dnn.choices import parse_choice, pytorch_default
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP, load_runtime, training_runtime
from swansim.dnn.tasks import SWAN_TASKS
from swansim.dnn.training import LOOPS
from swansim.hw.profile import Catalogue
from swansim.pool import run_all
from swansim.results import write_csv


def one(device: str, model: str, label: str, path: str, runtime: str = "pytorch") -> dict:
    """One batch (a pool worker)."""
    soc = Catalogue.load().device(device).soc
    choice = pytorch_default(soc) if label == "default" else parse_choice(label, soc)
    key = BatchKey(device, model, choice)
    seen = {}
    cost = simulate_batch(key, runtime=load_runtime(runtime), record_layers=False, loops=path,
                          attach=lambda dev, job: seen.update(job=job))
    return {"device": device, "model": model, "choice": label, "path": path,
            "latency_s": cost.latency_s, "energy_j": cost.net_energy_j,
            "sleeps": seen["job"].sleeps / (key.warmup + key.batches)}


def compare(rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per case the paths side by side; per phone and task the default's gap under each."""
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["device", "model", "choice"], columns="path",
                          values=["latency_s", "energy_j", "sleeps"])
    wide.columns = [f"{m}_{p}" for m, p in wide.columns]
    for path in LOOPS:
        if path != "repeats":
            wide[f"latency_{path}_over_repeats"] = wide[f"latency_s_{path}"] / wide["latency_s_repeats"]
            wide[f"energy_{path}_over_repeats"] = wide[f"energy_j_{path}"] / wide["energy_j_repeats"]
    wide = wide.reset_index()
    gaps = []
    for (device, model), g in wide.groupby(["device", "model"], sort=False):
        pinned = g[g.choice != "default"]
        dflt = g[g.choice == "default"]
        if pinned.empty or dflt.empty:
            continue
        row = {"device": device, "model": model}
        for path in LOOPS:
            best = pinned.loc[pinned[f"latency_s_{path}"].idxmin()]
            row[f"best_{path}"] = best.choice
            row[f"default_over_best_{path}"] = float(dflt[f"latency_s_{path}"].iloc[0] / best[f"latency_s_{path}"])
        gaps.append(row)
    return wide, pd.DataFrame(gaps)


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="pixel3,galaxy-s10e,oneplus8")
    ap.add_argument("--models", default="shufflenet_v2_x2_0,mobilenet_v2")
    ap.add_argument("--choices", default="default,4,4567,0123")
    ap.add_argument("--runtime", default="pytorch", help="the PyTorch runtime: " + TRAINING_RUNTIME_HELP)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default="results/macro_check")
    args = ap.parse_args(argv)
    training_runtime(args.runtime, "--runtime")
    cat = Catalogue.load()
    devices = checks.names(checks.listed(args.devices), "--devices", cat.names, "device")
    models = checks.names(checks.listed(args.models), "--models", SWAN_TASKS, "model")
    labels = checks.listed(args.choices)
    for d in devices:   # a bad choice fails here, before any simulation
        for label in labels:
            if label != "default":
                parse_choice(label, cat.device(d).soc)
    out = checks.out_dir(args.out)
    cases = [(d, m, c, path, args.runtime) for d in devices for m in models for c in labels for path in LOOPS]
    rows = run_all(one, cases, args.jobs, desc="batches")
    wide, gaps = compare(rows)
    write_csv(wide, out / "paths.csv")
    write_csv(gaps, out / "gaps.csv")
    pd.set_option("display.width", 200)
    print(wide.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print("\nPyTorch's default over the fastest pinned choice of the table, under each path:")
    print(gaps.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"\nwrote {out}/paths.csv and gaps.csv")


if __name__ == "__main__":
    sys.exit(guarded(main, "macro_check.py"))
