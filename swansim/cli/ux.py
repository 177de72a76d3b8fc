"""`swansim ux`: the owner's experience with DNN training in the background, after Swan's
Fig. 3 (`swansim.runs.ux`)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, out_under, split_names


# Defaults live in swansim.runs.ux.UxConfig; an option left out keeps its default there.
def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ux", help="Work-like score and app jank with training in the background (Swan Fig. 3)")
    p.add_argument("--out", default="results", help="output directory; runs go to OUT/ux (default: %(default)s)")
    p.add_argument("--devices", default=None, help="comma-separated profiles (default: pixel3,galaxy-s10e)")
    p.add_argument("--all", action="store_true", help="every phone and tablet profile (generic-phone and boards excepted)")
    p.add_argument("--models", default=None, help="training models (default: resnet34,shufflenet_v2_x2_0,mobilenet_v2)")
    p.add_argument("--passes", type=int, default=None, help="benchmark passes per run (default: 1)")
    p.add_argument("--warmup-s", type=float, default=None,
                   help="training alone before the benchmark or app starts (default: 30)")
    p.add_argument("--light-s", type=float, default=None, help="seconds of each light app per run; 0 skips them (default: 60)")
    p.add_argument("--placement", default=None, help="thread placement: auto (the phone's kernel: walt where its profile names one, else wakeup), walt, walt-nocorectl, wakeup, eas or throughput (default: auto)")
    p.add_argument("--seed", type=int, default=None, help="first seed (default: 0)")
    p.add_argument("--seeds", type=int, default=None, help="benchmark scripts per run, seeds seed..seed+N-1 (default: 1)")
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.hw.profile import Catalogue
    from swansim.runs.ux import UxConfig, phones_and_tablets, print_summary, run_ux

    given = {"passes": args.passes, "warmup_s": args.warmup_s, "light_s": args.light_s,
             "placement": args.placement, "seed": args.seed, "seeds": args.seeds}
    kw = {k: v for k, v in given.items() if v is not None}
    if args.all:
        kw["devices"] = phones_and_tablets(Catalogue.load())
    elif args.devices is not None:
        kw["devices"] = split_names(args.devices)
    if args.models is not None:
        kw["models"] = split_names(args.models)
    cfg = UxConfig(**kw)
    out = out_under(args.out, "ux")
    drops, janks = run_ux(cfg, out, not args.no_plots, args.jobs, progress=not args.quiet)
    print_summary(drops, janks)
    print(f"wrote {out}/")
    return 0
