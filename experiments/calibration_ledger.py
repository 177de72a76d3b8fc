"""The calibration ledger: every published figure the project uses, its role, and its residual
at the current code, recomputed from the simulation.

    python experiments/calibration_ledger.py [--jobs 2] [--out experiments/calibration/ledger.csv]
        [--skip-fig3]

Rows (``experiments/calibration/ledger.csv``):
  * Swan Fig. 1 - one 512x512 fp32 matmul per core type (SD865/SD855/SD845): calibration (the
    GEMM efficiency per core family is their closed form); predicted from the runtime as written.
  * Swan Fig. 2a/2b - Pixel 3, PyTorch training, batch 16, each plotted choice's normalised
    latency/energy/power: calibration (the MAP fit of the pytorch runtime); the choice each
    panel is normalised to is listed as ``normaliser`` (1.00 by construction).
  * ncnn benchmark rows (Tencent/ncnn benchmark/README.md) for the profiled SoCs: calibration
    (the ncnn runtime's fit).
  * Swan Fig. 3 - the Work-score drop with PyTorch's default training in the background: the
    Pixel 3 ResNet-34 point is calibration (the app models' L3 intensity was set with it in
    view); the other four are validation (`runs.scenarios.fig3_drop_pct`, seed 0, a run as long
    as PCMark's Work test: the app table's 25 passes of the script).
Residuals: ``predicted / target - 1`` for times and normalised values, ``predicted - target``
(percentage points) for Fig. 3. The run takes minutes (Fig. 2: 44 simulated choices; Fig. 3:
seven ten-minute benchmark runs, 12 min with ``--jobs 1`` on shared cores); ``--skip-fig3``
keeps the Fig. 3 rows of the existing ledger. It then rewrites the README's "How close to the
paper" table from the ledger it wrote (`swansim.dnn.calibrate.closeness_markdown`;
tests/test_readme.py keeps the two in step).
"""
from __future__ import annotations

import csv
import math
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from swansim.cli import Parser, guarded
from swansim.dnn import calibrate as cal
from swansim.dnn.runtime import load_runtime
from swansim.hw.profile import Catalogue
from swansim.runs.calibration import Fig2, Ncnn
from swansim.pool import run_all
from swansim.runs.scenarios import PAPER_FIG3_DROP_PCT, fig3_drop_pct

LEDGER = cal.LEDGER
README = Path(__file__).resolve().parents[1] / "README.md"
FIELDS = ["figure", "point", "role", "target", "predicted", "unit", "residual"]
# The one Fig. 3 point the app models were built with in view (DESIGN.md "Physics and OS").
FIG3_CALIBRATION = ("pixel3", "resnet34")


def _row(figure, point, role, target, predicted, unit, residual) -> dict:
    return {"figure": figure, "point": point, "role": role, "target": f"{target:.6g}",
            "predicted": f"{predicted:.6g}", "unit": unit, "residual": f"{residual:+.4f}"}


def fig1_rows(cat: Catalogue, rt) -> list[dict]:
    out = []
    flops = 2.0 * 512 ** 3
    for soc_name, cluster, ms in cal.read_fig1():
        c = next(c for c in cat.socs[soc_name].clusters if c.name == cluster)
        eff = rt.ops["linear"].efficiency[rt.family_of(c.uarch)]
        pred = flops / (c.fmax_mhz * 1e6 * c.gemm_flop_per_cycle * eff) * 1000.0
        out.append(_row("Swan Fig. 1", f"{soc_name} {cluster} ({c.uarch}) 512x512 matmul", "calibration",
                        ms, pred, "ms", pred / ms - 1.0))
    return out


def fig2_rows(cat: Catalogue, rt, pool) -> list[dict]:
    fig2 = Fig2(cat, pool)
    metrics = fig2.metrics(rt)
    out = []
    for model, figs in fig2.figures.items():
        fig = "Swan Fig. 2a" if model == "resnet34" else "Swan Fig. 2b"
        for metric, target in figs.items():
            ref = max(target, key=target.get)
            for label, value in target.items():
                pred = metrics[model][metric][label] / metrics[model][metric][ref]
                role = "normaliser" if label == ref else "calibration"
                out.append(_row(fig, f"{model} {metric} {label}", role, value, pred,
                                f"relative to {ref}", pred / value - 1.0))
    return out


def ncnn_rows(cat: Catalogue, pool) -> list[dict]:
    rt = load_runtime("ncnn")
    ncnn = Ncnn(cat, cal.read_ncnn(cat), pool)
    return [_row(r.figure, r.point, "calibration", r.target, r.predicted, "ms", r.predicted / r.target - 1.0)
            for r in ncnn.residuals(rt)]


def _fig3_point(device: str, model: str) -> float:
    return fig3_drop_pct(device, model)


def fig3_rows(jobs: int) -> list[dict]:
    points = list(PAPER_FIG3_DROP_PCT)
    drops = run_all(_fig3_point, points, jobs, desc="Fig. 3 points", labels=[f"{d} {m}" for d, m in points])
    return [_row("Swan Fig. 3", f"{d} {m} Work score drop with pytorch-default training",
                 "calibration" if (d, m) == FIG3_CALIBRATION else "validation",
                 PAPER_FIG3_DROP_PCT[(d, m)], drop, "% (residual in points)", drop - PAPER_FIG3_DROP_PCT[(d, m)])
            for (d, m), drop in zip(points, drops)]


read_ledger = cal.read_ledger


def summary(rows: list[dict]) -> list[str]:
    out = []
    for fig in dict.fromkeys(r["figure"] for r in rows):
        for role in ("calibration", "validation"):
            rs = [r for r in rows if r["figure"] == fig and r["role"] == role]
            if not rs:
                continue
            res = [abs(float(r["residual"])) for r in rs]
            worst = max(rs, key=lambda r: abs(float(r["residual"])))
            if "points" in rs[0]["unit"]:
                out.append(f"{fig:<14} {role:<11} n={len(rs):<3} |residual| median {statistics.median(res):.1f} pp, "
                           f"worst {worst['point']} {float(worst['predicted']):.1f} vs {float(worst['target']):.1f}")
            else:
                logs = [abs(math.log(float(r["predicted"]) / float(r["target"]))) for r in rs]
                out.append(f"{fig:<14} {role:<11} n={len(rs):<3} geo-mean error x{math.exp(sum(logs) / len(logs)):.2f}, "
                           f"median |err| {100 * statistics.median(res):.0f}%, worst {worst['point']} "
                           f"({100 * float(worst['residual']):+.0f}%)")
    return out


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default=str(LEDGER))
    p.add_argument("--skip-fig3", action="store_true",
                   help="keep the Fig. 3 rows of --out (of the committed ledger if --out does not exist yet)")
    args = p.parse_args(argv)
    if args.skip_fig3:   # read before any work, so a bad file fails first
        kept = Path(args.out) if Path(args.out).exists() else LEDGER
        fig3 = [r for r in read_ledger(kept) if r["figure"] == "Swan Fig. 3"]
    cat = Catalogue.load()
    rt = load_runtime("pytorch")
    rows = fig1_rows(cat, rt)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows += fig2_rows(cat, rt, pool)
        rows += ncnn_rows(cat, pool)
    if args.skip_fig3:
        rows += fig3
    else:
        rows += fig3_rows(args.jobs)
    with open(args.out, "w", newline="") as fh:
        fh.write("# Calibration ledger: every published figure swansim uses, its role and its residual at the\n"
                 "# code that wrote it (experiments/calibration_ledger.py; sources in experiments/calibration/README.md).\n"
                 "# residual: predicted/target - 1, or predicted - target in points for Fig. 3.\n")
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    for line in summary(rows):
        print(line)
    if Path(args.out).resolve() == LEDGER.resolve():
        README.write_text(cal.with_readme_block(README.read_text(), cal.closeness_markdown(cal.read_ledger())))
        print(f"rewrote the closeness table in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "calibration_ledger.py"))
