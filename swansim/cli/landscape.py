"""`swansim landscape`: latency, energy and power of every execution choice for one model
(`swansim.runs.landscape`: what a row is, how energy is counted)."""
from __future__ import annotations

import argparse
import sys

from swansim.cli.common import add_jobs, add_options, config_from


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.runs.landscape import LandscapeConfig

    p = sub.add_parser("landscape", help="latency/energy/power of every execution choice for a model")
    add_options(p, LandscapeConfig)
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", default=None, help="also write the CSV to this file (and NAME.manifest.json)")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.landscape import LandscapeConfig, describe, run_landscape

    cfg = config_from(args, LandscapeConfig)
    df = run_landscape(cfg, args.out, args.jobs, progress=not args.quiet)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(describe(cfg))
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print("speedup and energy_vs_baseline: relative to the default row (as many threads as big cores, no "
              "affinity: PyTorch's default)")
    return 0
