"""`swansim fleet`: federated learning over a fleet of phones, one policy after another
(`swansim.fleet.local.run_policy_fleet`: FedAvg rounds from `swansim.fleet`, each client's
local training under its policy on its own phone, fast-forwarded with the batch model)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_jobs, split_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="FedAvg over thousands of phones: time-to-accuracy, energy, clients online")
    p.add_argument("--model", default="resnet34", help="the Swan task trained (default: %(default)s)")
    p.add_argument("--policies", default="swan,pytorch-default", help="comma-separated (default: %(default)s)")
    p.add_argument("--clients", type=int, default=2400, help="clients: base users x 24 hourly shifts (default: %(default)s)")
    p.add_argument("--per-round", type=int, default=100, help="K, participants aggregated per round (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=200, help="rounds per policy (default: %(default)s)")
    p.add_argument("--local-steps", type=int, default=None, help="mini-batches per client and round (default: the task's FedScale figure, 20 "
                   "for OpenImage, 30 for Google Speech)")
    p.add_argument("--target-accuracy", type=float, default=None, help="time-to-accuracy target (default: 0.35)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default="synthetic", help="'synthetic', a trace directory, a FLASH .json or a FedScale pickle")
    p.add_argument("--no-transfers", dest="transfers", action="store_false",
                   help="no model download and upload time (default: at the client's network rate)")
    p.add_argument("--no-share-profiles", dest="share_profiles", action="store_false",
                   help="no coordinator: each phone explores every choice itself")
    p.add_argument("--dask", default=None, metavar="ADDR", help="run on Dask distributed ('local' for a local cluster)")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--out", required=True, help="output directory (resumable: run again to continue)")
    p.add_argument("--no-limit", action="store_true",
                   help="lift the bound on the total work (5 million client-batches)")
    add_jobs(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import sys
    from dataclasses import replace

    from swansim.fleet.local import memo_report, run_policy_fleet
    from swansim.fleet.run import FleetConfig

    cfg = FleetConfig(model=args.model, policies=split_names(args.policies) or (), clients=args.clients,
                      per_round=args.per_round, rounds=args.rounds, seed=args.seed, trace=args.trace,
                      share_profiles=args.share_profiles, transfers=args.transfers)
    if args.local_steps is not None:
        cfg = replace(cfg, local_steps=args.local_steps)
    if args.target_accuracy is not None:
        cfg = replace(cfg, target_accuracy=args.target_accuracy)
    result, bm = run_policy_fleet(cfg, args.out, args.jobs, args.dask, progress=not args.quiet,
                                  no_limit=args.no_limit)
    if args.format == "csv":
        result.summary.to_csv(sys.stdout, index=False)
    else:
        print(result.summary.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"{memo_report(result, bm)}; wrote {result.out_dir}/")
    return 0
