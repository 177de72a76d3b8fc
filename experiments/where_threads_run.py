"""Where an execution choice's threads run, and what its batch's time goes to, per phone and task.

For each phone and task (default: the Swan paper's five phones and three tasks) and one choice
(default: PyTorch's default, the baseline), the batch as the landscape simulates it
(`swansim.runs.placement.batch_placement`): its latency, the share of it spent in ops the
runtime runs as GEMMs (the rest: batch norm, activations, the optimizer, ... - OpenMP regions),
and per role of thread and cluster, the mean number of threads runnable there (busy, and
spinning), on which cores. Writes ``threads.csv`` and ``ops.csv`` under ``--out``.

    .venv/bin/python experiments/where_threads_run.py [--choice default] [--devices pixel3,oneplus8]
        [--models resnet34] [--jobs 2] [--out results/where_threads_run]
"""
from __future__ import annotations

import sys

import pandas as pd

from swansim import checks
from swansim.batchmodel import BatchKey
from swansim.cli import Parser, guarded
from swansim.dnn.choices import parse_choice, pytorch_default
from swansim.dnn.tasks import SWAN_TASKS
from swansim.errors import InputError
from swansim.hw.profile import SWAN_PHONES, Catalogue
from swansim.pool import check_jobs, run_all
from swansim.runs.landscape import LandscapeConfig
from swansim.runs.placement import batch_placement


def _one(device: str, model: str, choice: str) -> tuple[float, list[dict], list[dict]]:
    """One cell, keyed as a landscape row is (its warm-up and measured batches)."""
    soc = Catalogue.load().device(device).soc
    c = pytorch_default(soc) if choice == "default" else parse_choice(choice, soc)
    cfg = LandscapeConfig()
    p = batch_placement(BatchKey(device, model, c, batches=cfg.batches, warmup=cfg.warmup))
    return p.cost.latency_s, p.threads, p.ops


def main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--choice", default="default", help="an execution choice (e.g. 4567) or 'default' (PyTorch's)")
    ap.add_argument("--devices", default=",".join(SWAN_PHONES), help="phones, comma-separated")
    ap.add_argument("--models", default=",".join(SWAN_TASKS), help="tasks, comma-separated")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--out", default="results/where_threads_run")
    args = ap.parse_args(argv)
    cat = Catalogue.load()
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for d in devices:
        soc = cat.device(d, "--devices").soc
        if args.choice != "default":
            try:
                parse_choice(args.choice, soc)
            except InputError as e:
                reason = e.reason.removeprefix(f"{args.choice!r}: ")
                raise InputError("--choice", repr(args.choice), f"{reason} on {d}") from None
    for m in models:
        checks.one_of(m, "--models", sorted(SWAN_TASKS), "Swan task")
    jobs = check_jobs(args.jobs)
    out = checks.out_dir(args.out)
    cells = [(d, m, args.choice) for d in devices for m in models]
    got = run_all(_one, cells, jobs, desc="where threads run")
    thread_rows, op_rows = [], []
    for (d, m, _), (latency_s, threads, ops) in zip(cells, got):
        gemm = sum(o["share"] for o in ops if o["gemm"])
        print(f"\n{d} {m} {args.choice}: {latency_s:.3f} s a batch, {gemm:.0%} of it in GEMM ops, "
              f"{1 - gemm:.0%} in the rest")
        print(f"  {'role':<8} {'cluster':<8} {'busy':>6} {'spinning':>9}  cores")
        for r in threads:
            if r["busy"] + r["spinning"] >= 0.005:
                print(f"  {r['role']:<8} {r['cluster']:<8} {r['busy']:>6.2f} {r['spinning']:>9.2f}  {r['cores']}")
        thread_rows += [{"device": d, "model": m, "choice": args.choice, "latency_s": latency_s, **r} for r in threads]
        op_rows += [{"device": d, "model": m, "choice": args.choice, **o} for o in ops]
    pd.DataFrame(thread_rows).to_csv(out / "threads.csv", index=False)
    pd.DataFrame(op_rows).to_csv(out / "ops.csv", index=False)
    print(f"\n(busy, spinning: mean threads of that role runnable on that cluster's cores over the batch)\n"
          f"wrote {out / 'threads.csv'} and {out / 'ops.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "where_threads_run.py"))
