"""`swansim fleet`: federated learning over a fleet of phones, one policy after another
(`swansim.federated.local.run_policy_fleet`: FedAvg rounds from `swansim.federated`, each client's
local training under its policy on its own phone, fast-forwarded with the batch model)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, add_options, as_options, config_from


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.federated.fleet import FleetConfig

    p = sub.add_parser("fleet", help="FedAvg over thousands of phones: time-to-accuracy, energy, clients online")
    add_options(p, FleetConfig)
    p.add_argument("--dask", default=None, metavar="ADDR", help="run on Dask distributed ('local' for a local cluster)")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", required=True, help="output directory (resumable: run again to continue)")
    p.add_argument("--no-limit", action="store_true",
                   help="lift the bound on the total work (5 million client-batches)")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    from swansim.federated.local import memo_report, run_policy_fleet
    from swansim.federated.fleet import WHERE, FleetConfig

    cfg = config_from(args, FleetConfig)
    with as_options(FleetConfig, WHERE):
        result, bm = run_policy_fleet(cfg, args.out, args.jobs, args.dask, progress=not args.quiet,
                                      no_limit=args.no_limit)
    if args.format == "csv":
        result.summary.to_csv(sys.stdout, index=False)
    else:
        print(result.summary.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"{memo_report(result, bm)}; wrote {result.out_dir}/")
    return 0
