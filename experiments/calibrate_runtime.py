"""Calibrate the runtime profiles and write the fitted values back into their TOML files.

    python experiments/calibrate_runtime.py [--runtime pytorch|ncnn|all] [--dry-run]
        [--sweeps N] [--grid N] [--tol T] [--jobs N] [--shufflenet-input 3x224x224]
        [--placement walt-prevcpu]

The data are the project's own transcriptions in experiments/calibration/ (see its README:
Swan paper Fig. 1/2a/2b, Tencent/ncnn benchmark/README.md rows); what is fitted, from which
prior and within which plausible bounds is the [[fit.param]] tables of each runtime TOML.
Every run starts from those priors, so a re-run reproduces the committed values exactly.

pytorch: Swan paper Fig. 1 (GEMM efficiency per core family, closed form), then Fig. 2a/2b
(Pixel 3, training, batch 16, under schedutil) by a MAP coordinate search over the runtime's
mechanism parameters with the paper's choice ordering as soft constraints. ncnn: the benchmark
rows (big cores, 1 and 4 threads) of the SoCs that have profiles. Prints the residuals per
figure (median and worst, at the priors and after the fit) and the fitted values against their
bounds. Every prediction is the simulation's (swansim.runs.calibration): one pytorch trial is
22 simulated choices x 2 batches (~5-10 CPU-s), one ncnn trial 48 rows (~2 CPU-s); a fit makes
several hundred trials over ``--jobs`` processes (an hour or more on two cores).
"""
from __future__ import annotations

import math
import sys
import time

from concurrent.futures import ProcessPoolExecutor

from swansim import checks
from swansim.cli import Parser, guarded
from swansim.dnn import calibrate as cal
from swansim.dnn.runtime import RUNTIME_DIR, get_path, load_runtime, with_paths
from swansim.dnn.tasks import task
from swansim.hw.profile import Catalogue
from swansim.kernel.placement import AUTO, PLACEMENTS
from swansim.runs.calibration import Fig2, Ncnn
from swansim.pool import check_jobs


def report(title: str, residuals) -> None:
    print(f"\n{title}")
    print(f"  {'figure':<16} {'n':>3} {'median %':>9} {'worst %':>8}  worst point")
    for fig, n, med, worst, point in cal.summarise(residuals):
        print(f"  {fig:<16} {n:>3} {med:>9.1f} {worst:>8.1f}  {point}")


def detail(residuals) -> None:
    for r in residuals:
        if r.figure == "Swan selection" and r.predicted <= 1.0:
            continue   # an ordering that holds
        print(f"    {r.figure:<14} {r.point:<46} target {r.target:>8.3f}  model {r.predicted:>8.3f}"
              f"  ({(r.predicted / r.target - 1) * 100:+.0f}%)")


def show_values(rt, params) -> None:
    print("\nfitted values (prior; bounds):")
    for p in params:
        v = get_path(rt, p.targets[0])
        edge = " AT BOUND" if (math.isclose(v, p.lo, rel_tol=0.02) or math.isclose(v, p.hi, rel_tol=0.02)) else ""
        print(f"  {p.name:<34} {v:10.4g}   ({p.prior:.4g}; {p.lo:.4g}..{p.hi:.4g}){edge}")


def at_priors(rt):
    return with_paths(rt, {t: p.prior for p in rt.fit_params for t in p.targets})


def run_pytorch(cat: Catalogue, args, pool) -> None:
    path = RUNTIME_DIR / "pytorch.toml"
    rt = load_runtime(path)
    eff, fig1 = cal.fig1_efficiency(cat, rt)
    print("pytorch: GEMM efficiency per core family from Fig. 1:",
          ", ".join(f"{k} {v:.3f}" for k, v in eff.items()))
    report("Fig. 1 residuals", fig1)
    prov1 = "calibrated: closed form on Swan paper Fig. 1 by experiments/calibrate_runtime.py"
    if not args.dry_run:
        cal.write_gemm(path, eff, ("linear",), prov1)
        rt = load_runtime(path)
    else:
        rt = with_paths(rt, {f"ops.linear.efficiency.{f}": v for f, v in eff.items()})
    shapes = {}
    if args.shufflenet_input:
        shapes["shufflenet_v2_x2_0"] = tuple(int(x) for x in args.shufflenet_input.split("x"))
    fig2 = Fig2(cat, pool, input_shapes=shapes, placement=args.placement)
    if args.placement != AUTO:
        print(f"Fig. 2 simulated under placement {args.placement!r} (a dry run: nothing is written)")
    report("Fig. 2 residuals at the committed values", fig2.residuals(rt))
    report("Fig. 2 residuals at the priors", fig2.residuals(at_priors(rt)))
    t0 = time.time()
    fitted, values, obj = cal.fit(rt, fig2.residuals, sweeps=args.sweeps, tol=args.tol, grid=args.grid)
    print(f"  fit took {time.time() - t0:.0f} s; objective {obj:.4f}")
    res = fig2.residuals(fitted)
    report("Fig. 2 residuals after the fit", res)
    detail(res)
    show_values(fitted, rt.fit_params)
    if not args.dry_run:
        shape = "x".join(map(str, shapes.get("shufflenet_v2_x2_0", task("shufflenet_v2_x2_0").input_shape)))
        prov = ("calibrated: Swan paper Fig. 2a/2b (Pixel 3, PyTorch training, batch 16, schedutil; "
                f"ResNet-34 1x32x32, ShuffleNetV2-x2 {shape}) by experiments/calibrate_runtime.py")
        cal.write_back(path, fitted, rt.fit_params, prov)
        record(path, fig2.residuals)


def record(path, residual_fn) -> None:
    """Store the objective at the values as written (rounded): the drift check of the tests."""
    obj = cal.current_objective(load_runtime(path), residual_fn)
    cal.write_back(path, load_runtime(path), (), "", obj)
    print(f"wrote {path} (objective at the written values {obj:.6f})")


def run_ncnn(cat: Catalogue, args, pool) -> None:
    path = RUNTIME_DIR / "ncnn.toml"
    rows = cal.read_ncnn(cat)
    socs = sorted({r.soc for r in rows})
    print(f"\nncnn: {len(rows)} benchmark rows on {', '.join(socs)}")
    rt = load_runtime(path)
    nc = Ncnn(cat, rows, pool)
    report("ncnn residuals at the committed values", nc.residuals(rt))
    report("ncnn residuals at the priors", nc.residuals(at_priors(rt)))
    t0 = time.time()
    fitted, values, obj = cal.fit(rt, nc.residuals, sweeps=args.sweeps, tol=args.tol, grid=args.grid)
    print(f"  fit took {time.time() - t0:.0f} s; objective {obj:.4f}")
    res = nc.residuals(fitted)
    report("ncnn residuals after the fit", res)
    detail(res)
    show_values(fitted, rt.fit_params)
    if not args.dry_run:
        prov = ("calibrated: ncnn benchmark rows (" + ", ".join(socs)
                + "; big cores, 1 and 4 threads, inference at benchncnn's input) by experiments/calibrate_runtime.py")
        cal.write_back(path, fitted, rt.fit_params, prov)
        record(path, nc.residuals)


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--runtime", choices=("pytorch", "ncnn", "all"), default="all")
    p.add_argument("--dry-run", action="store_true", help="fit and report, do not write the TOML files")
    p.add_argument("--sweeps", type=int, default=2)
    p.add_argument("--grid", type=int, default=5, help="scan points per parameter and sweep (default: %(default)s)")
    p.add_argument("--tol", type=float, default=0.05, help="golden-section tolerance, log units (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=None, help="processes (default: every core)")
    p.add_argument("--shufflenet-input", default=None,
                   help="CxHxW for a Fig. 2b sensitivity check (a dry run: nothing is written)")
    p.add_argument("--placement", default=AUTO,
                   help="the Fig. 2 phone's thread placement, e.g. walt-prevcpu for the kernels' own rules "
                        "(a dry run unless %(default)s: nothing is written)")
    args = p.parse_args(argv)
    checks.one_of(args.placement, "--placement", (AUTO, *PLACEMENTS), "placement")
    if args.shufflenet_input or args.placement != AUTO:
        args.dry_run = True
    cat = Catalogue.load()
    with ProcessPoolExecutor(max_workers=check_jobs(args.jobs)) as pool:
        if args.runtime in ("pytorch", "all"):
            run_pytorch(cat, args, pool)
        if args.runtime in ("ncnn", "all"):
            run_ncnn(cat, args, pool)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "calibrate_runtime.py"))
