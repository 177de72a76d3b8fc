"""`swansim landscape`: latency, energy and power of every execution choice for one model.

See `swansim.landscape` for what a row is and how energy is counted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from swansim.dnn.calibrate import SWAN_BATCH
from swansim.dnn.models import MODELS
from swansim.errors import InputError
from swansim.landscape import landscape_frame

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("landscape", help="latency/energy/power of every execution choice for a model")
    p.add_argument("--device", default="pixel3", help="phone, board or SoC profile name (default: %(default)s)")
    p.add_argument("--model", default="resnet34", help=f"one of: {', '.join(sorted(MODELS))}")
    p.add_argument("--runtime", default="pytorch", help="runtime profile: pytorch or ncnn (default: %(default)s)")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--batch", type=int, default=None, help=f"mini-batch size (default: {SWAN_BATCH} to train, 1 to infer)")
    p.add_argument("--classes", type=int, default=None, help="classes (default: the Swan workload's, else 1000)")
    p.add_argument("--input", default=None, help="CxHxW (default: the Swan workload's, else 3x224x224)")
    p.add_argument("--batches", type=int, default=2, help="measured batches per choice (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up batches per choice (default: %(default)s)")
    p.add_argument("--no-mixed", action="store_true", help="leave out the mixed big+little choices")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", default=None, help="also write the CSV here")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.batches < 1 or args.warmup < 0:
        raise InputError("--batches", "batches", "need at least one measured batch and no negative warm-up")
    df = landscape_frame(args.device, args.model, args.runtime, args.mode, args.batch, args.classes,
                         args.input, args.batches, args.warmup, not args.no_mixed)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0
