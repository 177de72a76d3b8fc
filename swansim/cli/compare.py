"""`swansim compare`: policies side by side over devices, models and swept profile figures
(`swansim.runs.compare`: what a row is)."""
from __future__ import annotations

import argparse
import sys

from swansim.cli.common import add_jobs, add_options, config_from


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.runs.compare import CompareConfig

    p = sub.add_parser("compare", help="policies side by side: latency, energy, Work-like score, jank")
    add_options(p, CompareConfig)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=V1,V2",
                   help="sweep a profile figure by its key in the profile files (soc. for the SoC's), e.g. ambient_c=25,35 (repeatable)")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", default=None, help="write compare.csv (as rows finish) and a manifest here")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.compare import CompareConfig, compare_frame
    from swansim.session.overrides import parse_set

    cfg = config_from(args, CompareConfig, sets=tuple(parse_set(s) for s in args.set))
    df = compare_frame(cfg, args.out, args.jobs, progress=not args.quiet)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if args.out:
        print(f"wrote {args.out}/compare.csv")
    return 0
