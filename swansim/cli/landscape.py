"""`swansim landscape`: latency, energy and power of every execution choice for one model
(`swansim.runs.landscape`: what a row is, how energy is counted)."""
from __future__ import annotations

import argparse
import sys

from swansim.cli.common import add_jobs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("landscape", help="latency/energy/power of every execution choice for a model")
    p.add_argument("--device", default="pixel3", help="phone, board or SoC profile name (default: %(default)s)")
    p.add_argument("--model", default="resnet34", help="a zoo model (swansim.dnn.models.MODELS)")
    p.add_argument("--runtime", default="pytorch", help="runtime profile: pytorch or ncnn (default: %(default)s)")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--batch", type=int, default=None, help="mini-batch size (default: 16 to train, 1 to infer)")
    p.add_argument("--classes", type=int, default=None, help="classes (default: the Swan task's, else 1000)")
    p.add_argument("--input", default=None, help="CxHxW (default: the Swan task's, else 3x224x224)")
    p.add_argument("--batches", type=int, default=2, help="measured batches per choice (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up batches per choice (default: %(default)s)")
    p.add_argument("--no-mixed", action="store_true", help="leave out the mixed big+little choices")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", default=None, help="also write the CSV to this file (and NAME.manifest.json)")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.landscape import LandscapeConfig, describe, run_landscape

    cfg = LandscapeConfig(args.device, args.model, args.runtime, args.mode, args.batch, args.classes, args.input,
                          args.batches, args.warmup, not args.no_mixed)
    df = run_landscape(cfg, args.out, args.jobs, progress=not args.quiet)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(describe(cfg))
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print("speedup and energy_vs_baseline: relative to the default row (PyTorch's default threads, no affinity)")
    return 0
