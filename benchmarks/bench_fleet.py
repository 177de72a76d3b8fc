"""What the phones cost in a fleet: swansim's FedAvg against the same FedAvg as a bare numpy loop.

The bare loop is the task alone: per round, ``per_round`` clients drawn from the population,
each ``local_steps`` mini-batches of local SGD on FedProx's Synthetic(1, 1) (`swansim.federated.fedavg`,
the very learner the fleet trains), then FedAvg. swansim runs the same task with every client's
local training simulated on its own phone under its policy (`swansim.federated`, fast-forwarded with
the batch model): cold (an empty memo: the prefill and every batch simulated once) and warm (the
memo a first run saved). Printed: CPU milliseconds per client-round (a selected client training
once) for each, and swansim's as a multiple of the bare loop's, measured in the same run so that
the ratio holds on a loaded machine.

Run: .venv/bin/python benchmarks/bench_fleet.py [--clients 2400] [--per-round 100] [--rounds 20]
     [--model resnet34] [--policies swan,pytorch-default] [--local-steps N] [--no-transfers] [--jobs 1]
     [--devices pixel3,pixel6,...] (default: the fleet's default mix)
"""
from __future__ import annotations

import math
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from swansim.cli import Parser, guarded
from swansim.federated import fedavg
from swansim.federated.local import run_policy_fleet
from swansim.federated.fleet import FleetConfig, build_population
from swansim.pool import one_blas_thread


def cpu_s() -> float:
    """CPU seconds of this process and its reaped children (a process pool's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bare_fedavg(cfg: FleetConfig) -> tuple[float, int]:
    """The task alone, as a plain loop: (CPU seconds, client-rounds); numpy's BLAS on one thread,
    as in swansim's fleet (`one_blas_thread`)."""
    pop = build_population(cfg)
    task = fedavg.SyntheticTask(cfg.alpha, cfg.beta, cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    selected = math.ceil(cfg.per_round * cfg.overcommit)
    t0 = cpu_s()
    n = 0
    with one_blas_thread():
        for _ in cfg.policies:
            weights, cursor = fedavg.zero_model(), np.zeros(len(pop), dtype=np.int64)
            for _ in range(cfg.rounds):
                clients = np.sort(rng.choice(len(pop), size=selected, replace=False))
                specs = [(int(k), int(pop.n_samples[k]), int(cursor[k])) for k in clients]
                models = fedavg.local_models(task, weights, specs, cfg.steps, cfg.batch_size, cfg.learning_rate)
                weights = fedavg.fedavg(models, pop.n_samples[clients])
                cursor[clients] += cfg.steps * cfg.batch_size
                n += len(clients)
    return cpu_s() - t0, n


def swansim_fleet(cfg: FleetConfig, out, jobs: int) -> tuple[float, int, str]:
    """One swansim fleet run into ``out``: (CPU seconds, client-rounds, the memo's and the wall
    time's report)."""
    t0, wall0 = cpu_s(), time.perf_counter()
    result, bm = run_policy_fleet(cfg, out, jobs, progress=False)
    cpu, wall = cpu_s() - t0, time.perf_counter() - wall0
    n = int(result.rounds["selected"].sum())
    hits, misses = result.lookups
    return cpu, n, (f"{len(bm)} batches in the memo, {misses} simulated in the rounds, {hits} hits; "
                    f"simulated {result.rounds['time_h'].max():.2f} h; {wall:.1f} s wall, {cpu / wall:.2f} cores busy")


def peak_rss_mib() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest reaped child (MiB)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_maxrss / 1024, kids.ru_maxrss / 1024


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=2400)
    ap.add_argument("--per-round", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--model", default="resnet34")
    ap.add_argument("--policies", default="swan,pytorch-default")
    ap.add_argument("--local-steps", type=int, default=None, help="default: the task's FedScale figure")
    ap.add_argument("--no-transfers", dest="transfers", action="store_false")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--devices", default="", help="comma-separated profiles, equally mixed")
    args = ap.parse_args(argv)
    devices = tuple((d, 1.0) for d in args.devices.split(",") if d)
    cfg = FleetConfig(model=args.model, policies=tuple(args.policies.split(",")), clients=args.clients,
                      per_round=args.per_round, rounds=args.rounds, local_steps=args.local_steps,
                      transfers=args.transfers, devices=devices)
    bare_s, bare_n = bare_fedavg(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        cold_s, cold_n, cold_memo = swansim_fleet(cfg, f"{tmp}/cold", args.jobs)
        # warm: a fresh run directory holding the memo the cold run saved
        Path(f"{tmp}/warm").mkdir()
        shutil.copy(f"{tmp}/cold/batch-memo.pkl", f"{tmp}/warm/batch-memo.pkl")
        warm_s, warm_n, warm_memo = swansim_fleet(cfg, f"{tmp}/warm", args.jobs)
    bare_ms = 1000 * bare_s / bare_n
    rss, rss_worker = peak_rss_mib()
    print(f"{args.clients} clients, {args.per_round} per round (x{cfg.overcommit} selected), {args.rounds} rounds, "
          f"{len(cfg.policies)} policies, {cfg.steps} local steps, transfers {cfg.transfers}, --jobs {args.jobs}, "
          f"phones {args.devices or 'the default mix'}")
    print(f"  bare numpy FedAvg   {bare_ms:8.3f} CPU ms per client-round  ({bare_n} client-rounds)")
    for name, s, n, memo in (("swansim, cold", cold_s, cold_n, cold_memo), ("swansim, warm", warm_s, warm_n, warm_memo)):
        ms = 1000 * s / n
        print(f"  {name:<18}  {ms:8.3f} CPU ms per client-round  = {ms / bare_ms:6.1f}x the bare loop  ({memo})")
    print(f"  peak memory: {rss:.0f} MiB in this process, {rss_worker:.0f} MiB in a worker; "
          f"{rss * 1024 / args.clients:.1f} KiB per client (this process's peak over the clients)")


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_fleet.py"))
