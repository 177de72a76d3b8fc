"""`swansim ux`: the owner's experience with DNN training in the background, after Swan's
Fig. 3 (`swansim.runs.ux`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, add_options, config_from, out_under


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.runs.ux import UxConfig

    p = sub.add_parser("ux", help="Work-like score and app jank with training in the background (Swan Fig. 3)")
    p.add_argument("--out", default="results", help="output directory; runs go to OUT/ux (default: %(default)s)")
    add_options(p, UxConfig)
    p.add_argument("--all", action="store_true", help="every phone and tablet profile (generic-phone and boards "
                                                      "excepted) instead of --devices")
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.hw.profile import Catalogue
    from swansim.runs.ux import UxConfig, phones_and_tablets, print_summary, run_ux

    cfg = config_from(args, UxConfig, **({"devices": phones_and_tablets(Catalogue.load())} if args.all else {}))
    out = out_under(args.out, "ux")
    drops, janks = run_ux(cfg, out, not args.no_plots, args.jobs, progress=not args.quiet)
    print_summary(drops, janks)
    print(f"wrote {out}/")
    return 0
