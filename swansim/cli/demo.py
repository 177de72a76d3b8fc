"""`swansim demo`: the quick reproduction - landscapes, throttling, the owner's experience,
Swan against PyTorch's default on the phone and in a small fleet - with tables and plots
(`swansim.runs.demo`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, out_under


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="quick reproduction: landscapes, throttling, UX, policies, a small fleet")
    p.add_argument("--out", default="results", help="output directory; files go to OUT/demo (default: %(default)s)")
    p.add_argument("--device", default="pixel3", help="phone profile (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--thermal-minutes", type=float, default=5.0)
    p.add_argument("--policy-s", type=float, default=600.0, help="simulated seconds per policy on the phone")
    p.add_argument("--fleet-rounds", type=int, default=40, help="FedAvg rounds per policy in the small fleet")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.demo import DemoConfig, run_demo
    from swansim.runs.thermal import format_summary

    out = out_under(args.out, "demo")
    tables = run_demo(DemoConfig(args.device, args.seed, args.thermal_minutes, args.policy_s,
                                 fleet_rounds=args.fleet_rounds), out, args.jobs,
                       progress=not args.quiet)
    for name, df in tables.items():
        print(f"\n== {args.device} {name}")
        print(format_summary(df) if name == "thermal" else
              df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"\nwrote {out}/")
    return 0
