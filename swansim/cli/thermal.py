"""`swansim thermal`: sustained dense load per phone, DVFS and thermal throttling over time
(`swansim.runs.thermal`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, out_under, split_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("thermal", help="sustained dense load per phone: DVFS, throttling, temperatures")
    p.add_argument("--out", default="results", help="output directory; runs go to OUT/thermal (default: %(default)s)")
    p.add_argument("--devices", default=None, help="comma-separated profiles (default: every device profile but the generic chassis)")
    p.add_argument("--minutes", type=float, default=30.0, help="simulated minutes per run (default: %(default)s)")
    p.add_argument("--sample-s", type=float, default=1.0, help="timeline sample period (default: %(default)s)")
    p.add_argument("--governor", default="schedutil", help="cpufreq governor (default: %(default)s)")
    p.add_argument("--thermal-governor", default=None, help="thermal governor (default: the profile's)")
    p.add_argument("--seed", type=int, default=0, help="devices' seed (default: %(default)s)")
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.runs.thermal import format_summary, run_thermal

    out = out_under(args.out, "thermal")
    table = run_thermal(out, split_names(args.devices), args.minutes, args.sample_s, args.governor,
                        args.thermal_governor, not args.no_plots, args.jobs, progress=not args.quiet,
                        seed=args.seed)
    print(format_summary(table))
    print(f"wrote {out}/")
    return 0
