"""`swansim compare`: policies side by side over devices, models and swept profile figures
(`swansim.runs.compare`: what a row is)."""
from __future__ import annotations

import argparse
import sys

from swansim.cli.common import add_jobs, split_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="policies side by side: latency, energy, Work-like score, jank")
    p.add_argument("--devices", default="pixel3", help="comma-separated phone profiles (default: %(default)s)")
    p.add_argument("--models", default="resnet34", help="comma-separated models (default: %(default)s)")
    p.add_argument("--policies", default="swan,pytorch-default", help="comma-separated policies (default: %(default)s)")
    owner = p.add_mutually_exclusive_group()
    owner.add_argument("--trace", default=None, help="a trace set directory (default: an idle phone)")
    owner.add_argument("--synthetic", action="store_true", help="a synthetic owner drawn from --seed")
    p.add_argument("--user", default=None, help="the trace's user (default: its first)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=120.0, help="simulated seconds per run (default: %(default)s)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=V1,V2",
                   help="sweep a profile figure by its key in the profile files (soc. for the SoC's), e.g. ambient_c=25,35 (repeatable)")
    p.add_argument("--no-ux", action="store_true", help="skip the Work-like benchmark runs (no ux_score_drop_pct column)")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", default=None, help="write compare.csv (as rows finish) and a manifest here")
    p.add_argument("--no-limit", action="store_true",
                   help="lift the bound on the total simulated time (12 h: runs x duration)")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.compare import CompareConfig, compare_frame
    from swansim.runs.overrides import parse_set

    cfg = CompareConfig(devices=tuple(split_names(args.devices)),
                        models=tuple(split_names(args.models)),
                        policies=tuple(split_names(args.policies)), trace=args.trace, user=args.user,
                        synthetic=args.synthetic, seed=args.seed, duration_s=args.duration,
                        sets=tuple(parse_set(s) for s in args.set), ux=not args.no_ux, no_limit=args.no_limit)
    df = compare_frame(cfg, args.out, args.jobs, progress=not args.quiet)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    if args.out:
        print(f"wrote {args.out}/compare.csv")
    return 0
