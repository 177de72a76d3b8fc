"""`swansim thermal`: sustained dense load per phone, DVFS and thermal throttling over time
(`swansim.runs.thermal`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, add_options, config_from, out_under


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.runs.thermal import ThermalConfig

    p = sub.add_parser("thermal", help="sustained dense load per phone: DVFS, throttling, temperatures")
    p.add_argument("--out", default="results", help="output directory; runs go to OUT/thermal (default: %(default)s)")
    add_options(p, ThermalConfig)
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.thermal import ThermalConfig, format_summary, run_thermal

    out = out_under(args.out, "thermal")
    table = run_thermal(config_from(args, ThermalConfig), out, not args.no_plots, args.jobs, progress=not args.quiet)
    print(format_summary(table))
    print(f"wrote {out}/")
    return 0
