"""Time-to-accuracy at fleet scale: the paper's three tasks, Swan against PyTorch's default.

2,400 clients (100 synthetic base users x 24 hourly shifts), 100 per round (1.3x over-commit),
a FedAvg of a multinomial logistic regression on FedProx's Synthetic(1, 1), each client's
local training under its policy on its own phone (swansim.federated.local), in rounds as the
paper's FedScale ran them (the task's local steps, the model's download and upload at the
client's own rate, no deadline; swansim.federated.rounds). Writes per task its rounds and
summary, then ``fleet_tta.png`` (accuracy and clients online over time) and ``summary.csv``
(time and energy to the target accuracy, their ratios) under ``--out``.

    python experiments/fleet_tta.py [--rounds 200|paper] [--clients 2400] [--policies swan,pytorch-default]
        [--target-accuracy 0.35] [--charger-budget traced] [--bandwidth-sigma 1.2] [--runtime pytorch]
        [--jobs 2] [--no-limit] [--out results/fleet_tta]

``--rounds paper`` runs each task for as many rounds as the paper's fleet did (its Figs. 5-7:
2,000 for ShuffleNetV2 and MobileNetV2, 400 for ResNet-34; `swansim.dnn.tasks.Task.paper_rounds`),
over hundreds of simulated hours where the energy loan decides who stays online; it lifts the
bound on a run's work, which those counts exceed (README: how long it takes). The same span at a
tenth of the fleet: ``--tasks shufflenet_v2_x2_0 --clients 240 --per-round 10 --rounds 2000
--no-limit`` (15 min on one core; ``--charger-budget plugged`` for the reading under which every
loan is repaid overnight).

Resumable: run it again with the same arguments and finished rounds are kept.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from swansim import checks, plots
from swansim.cli import Parser, guarded
from swansim.dnn.tasks import SWAN_TASKS
from swansim.errors import InputError
from swansim.federated.energy import CHARGER_BUDGET, CHARGER_BUDGETS
from swansim.federated.local import memo_report, run_policy_fleet
from swansim.federated.fleet import FleetConfig, check_resume, validate
from swansim.pool import check_jobs


PAPER = "paper"


def parse_rounds(value: str) -> str | int:
    """``--rounds``: a count, or ``paper`` (each task's `Task.paper_rounds`)."""
    if value == PAPER:
        return value
    try:
        return int(value)
    except ValueError:
        raise InputError("--rounds", repr(value), f"not a number of rounds or {PAPER!r}") from None


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", default="200",
                    help=f"rounds per policy, or {PAPER!r}: each task's as the paper ran it (lifts the work bound; "
                         "default: %(default)s)")
    ap.add_argument("--clients", type=int, default=2400)
    ap.add_argument("--per-round", type=int, default=100)
    ap.add_argument("--policies", default="swan,pytorch-default")
    ap.add_argument("--tasks", default=",".join(SWAN_TASKS))
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--target-accuracy", type=float, default=FleetConfig.target_accuracy,
                    help="time-to-accuracy target (default: %(default)s; 200 rounds reach 0.35-0.37)")
    ap.add_argument("--charger-budget", choices=CHARGER_BUDGETS, default=CHARGER_BUDGET,
                    help="the energy loan's daily charger energy (swansim.federated.energy; default: %(default)s)")
    ap.add_argument("--bandwidth-sigma", type=float, default=FleetConfig.bandwidth_sigma,
                    help="log-sd of the clients' network rate factors (swansim.federated.network; 0: every "
                         "client at its network's average; default: %(default)s)")
    ap.add_argument("--no-limit", action="store_true",
                    help="lift the bound on a run's client-batches (the paper's 2,000 rounds exceed it)")
    ap.add_argument("--runtime", default=FleetConfig.runtime,
                    help="the runtime the phones train with: a name or a .toml file (a variant with one "
                         "figure changed; default: %(default)s)")
    ap.add_argument("--out", default="results/fleet_tta")
    args = ap.parse_args(argv)
    args.rounds = parse_rounds(args.rounds)
    out = Path(args.out)
    rounds, summaries, by_task = {}, [], {}
    tasks = checks.names(checks.listed(args.tasks), "--tasks", SWAN_TASKS, "task")
    no_limit = args.no_limit or args.rounds == PAPER
    configs = {task: FleetConfig(model=task, policies=tuple(args.policies.split(",")), clients=args.clients,
                                 per_round=args.per_round,
                                 rounds=SWAN_TASKS[task].paper_rounds if args.rounds == PAPER else args.rounds,
                                 target_accuracy=args.target_accuracy, charger_budget=args.charger_budget,
                                 bandwidth_sigma=args.bandwidth_sigma, runtime=args.runtime)
               for task in tasks}
    check_jobs(args.jobs)
    for task, cfg in configs.items():   # every task's input and checkpoint, before the first runs
        validate(cfg, no_limit=no_limit)
        check_resume(cfg, out / task)
    t0 = time.perf_counter()
    for task, cfg in configs.items():
        result, bm = run_policy_fleet(cfg, out / task, args.jobs, no_limit=no_limit)
        rounds[task] = result.rounds
        summaries.append(result.summary.assign(task=task))
        by_task[task] = result.summary
        print(f"{task}: {time.perf_counter() - t0:.0f} s so far; {memo_report(result, bm)}; "
              f"{result.bytes_per_client:.0f} bytes per client")
    summary = pd.concat(summaries, ignore_index=True)
    summary.to_csv(out / "summary.csv", index=False)
    plots.fleet_curves(rounds, by_task, out / "fleet_tta.png", cfg.target_accuracy)
    cols = ["task", "policy", "time_to_target_h", "energy_to_target_j", "speedup", "energy_efficiency",
            "median_round_s", "round_speedup", "mean_clients_online", "completed", "dropped", "dropped_loan"]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    sys.exit(guarded(main, "fleet_tta.py"))
