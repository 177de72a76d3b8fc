"""Calibrate the runtime profiles and write the fitted values back into their TOML files.

    python experiments/calibrate_runtime.py [--runtime pytorch|ncnn|all] [--dry-run]
        [--ncnn-csv PATH] [--sweeps N] [--shufflenet-input 3x112x112]

pytorch: Swan paper Fig. 1 (GEMM efficiency per core family, closed form), then Fig. 2a/2b
(Pixel 3, training, batch 16) by a MAP coordinate search over the runtime's mechanism
parameters. ncnn: the ncnn benchmark rows (ncnn benchmark/README.md; big cluster, 1 and 4
threads) of the SoCs that have profiles. Prints the residuals per figure (median and worst)
and the fitted values; re-running starts from the values in the files (priors stay the
documented assumptions only on a fresh checkout: the fit is idempotent near its optimum).
Uses only the analytical cost path: about a minute.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from swansim.dnn import calibrate as cal
from swansim.dnn.runtime import RUNTIME_DIR, load_runtime
from swansim.hw.profile import Catalogue

DEFAULT_CSV = Path(os.environ.get("SWANSIM_NCNN_CSV", "reference/calibration/ncnn_cpu_latency.csv"))


def report(title: str, residuals) -> None:
    print(f"\n{title}")
    print(f"  {'figure':<16} {'n':>3} {'median %':>9} {'worst %':>8}  worst point")
    for fig, n, med, worst, point in cal.summarise(residuals):
        print(f"  {fig:<16} {n:>3} {med:>9.1f} {worst:>8.1f}  {point}")


def detail(residuals) -> None:
    for r in residuals:
        print(f"    {r.figure:<14} {r.point:<40} target {r.target:>8.3f}  model {r.predicted:>8.3f}"
              f"  ({(r.predicted / r.target - 1) * 100:+.0f}%)")


def run_pytorch(cat: Catalogue, args) -> None:
    path = RUNTIME_DIR / "pytorch.toml"
    rt = load_runtime(path)
    eff, fig1 = cal.fig1_efficiency(cat, rt)
    print("pytorch: GEMM efficiency per core family from Fig. 1:",
          ", ".join(f"{k} {v:.3f}" for k, v in eff.items()))
    report("Fig. 1 residuals", fig1)
    prov1 = "calibrated: Swan paper Fig. 1 (per-core 512x512 fp32 matmul, SD865/SD855/SD845) by experiments/calibrate_runtime.py"
    if not args.dry_run:
        cal.write_gemm(path, eff, ("linear",), prov1)
        rt = load_runtime(path)
    else:
        rt = cal.with_values(rt, {(f"ops.linear.efficiency", f): v for f, v in eff.items()})
    # conv/pointwise start from the GEMM efficiency (im2col + the same GEMM); the fit may move them
    rt = cal.with_values(rt, {(f"ops.{op}.efficiency", f): v for f, v in eff.items() for op in ("conv", "pointwise")})
    workloads = dict(cal.SWAN_WORKLOADS)
    if args.shufflenet_input:
        workloads["shufflenet_v2_x2_0"] = (tuple(int(x) for x in args.shufflenet_input.split("x")), 600)
    fig2 = cal.Fig2(cat, workloads)
    report("Fig. 2 residuals before the fit", fig2.residuals(rt))
    params = cal.pytorch_params()
    t0 = time.time()
    fitted, values = cal.fit(rt, params, fig2.residuals, sweeps=args.sweeps)
    print(f"  fit took {time.time() - t0:.0f} s")
    res = fig2.residuals(fitted)
    report("Fig. 2 residuals after the fit", res)
    detail(res)
    print("\nfitted values:")
    for k, v in values.items():
        print(f"  {k:<34} {v:.4g}")
    if not args.dry_run:
        shape = "x".join(map(str, workloads["shufflenet_v2_x2_0"][0]))
        prov = ("calibrated: Swan paper Fig. 2a/2b (Pixel 3, PyTorch training, batch 16; ResNet-34 1x32x32, "
                f"ShuffleNetV2-x2 {shape}) by experiments/calibrate_runtime.py")
        cal.write_back(path, fitted, params, prov)
        print(f"wrote {path}")


def run_ncnn(cat: Catalogue, args) -> None:
    path = RUNTIME_DIR / "ncnn.toml"
    if not args.ncnn_csv.exists():
        sys.exit(f"calibrate_runtime: no ncnn CSV at {args.ncnn_csv} (use --ncnn-csv or SWANSIM_NCNN_CSV)")
    rows = cal.read_ncnn_csv(args.ncnn_csv, cat)
    socs = sorted({r.soc for r in rows})
    print(f"\nncnn: {len(rows)} benchmark rows on {', '.join(socs)}")
    rt = load_runtime(path)
    nc = cal.Ncnn(cat, rows)
    report("ncnn residuals before the fit", nc.residuals(rt))
    params = cal.ncnn_params()
    t0 = time.time()
    fitted, values = cal.fit(rt, params, nc.residuals, sweeps=args.sweeps)
    print(f"  fit took {time.time() - t0:.0f} s")
    res = nc.residuals(fitted)
    report("ncnn residuals after the fit", res)
    detail(res)
    print("\nfitted values:")
    for k, v in values.items():
        print(f"  {k:<34} {v:.4g}")
    if not args.dry_run:
        prov = ("calibrated: ncnn benchmark/README.md rows (" + ", ".join(socs)
                + "; big cores, 1 and 4 threads, 224x224 inference) by experiments/calibrate_runtime.py")
        cal.write_back(path, fitted, params, prov)
        print(f"wrote {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runtime", choices=("pytorch", "ncnn", "all"), default="all")
    p.add_argument("--dry-run", action="store_true", help="fit and report, do not write the TOML files")
    p.add_argument("--ncnn-csv", type=Path, default=DEFAULT_CSV)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--shufflenet-input", default=None, help="CxHxW for the Fig. 2b sensitivity check")
    args = p.parse_args(argv)
    cat = Catalogue.load()
    if args.runtime in ("pytorch", "all"):
        run_pytorch(cat, args)
    if args.runtime in ("ncnn", "all"):
        run_ncnn(cat, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
