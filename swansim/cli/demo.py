"""`swansim demo`: the quick reproduction - landscapes, throttling, the owner's experience,
Swan against PyTorch's default on the phone and in a small fleet - with tables and plots
(`swansim.runs.demo`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, add_options, config_from, out_under


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.runs.demo import DemoConfig

    p = sub.add_parser("demo", help="quick reproduction: landscapes, throttling, UX, policies, a small fleet")
    p.add_argument("--out", default="results", help="output directory; files go to OUT/demo (default: %(default)s)")
    add_options(p, DemoConfig)
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.demo import DemoConfig, run_demo
    from swansim.runs.thermal import format_summary

    out = out_under(args.out, "demo")
    tables = run_demo(config_from(args, DemoConfig), out, args.jobs,
                       progress=not args.quiet)
    for name, df in tables.items():
        print(f"\n== {args.device} {name}")
        print(format_summary(df) if name == "thermal" else
              df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"\nwrote {out}/")
    return 0
