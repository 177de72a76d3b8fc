"""Scheduler cost per replan, in bare SimPy events (see _bare.py).

Random threads (2, 8, 16) start and finish pieces of work on random pairs of cores for 20
simulated seconds: printed per case, replans, the CPU cost of one replan in bare events, and
the same with every thread holding a stake in the shared L3 (as app threads do), whose rates
the replan adjusts for L3 thrashing.

Run: .venv/bin/python benchmarks/bench_sched.py
"""
from __future__ import annotations

import sys
import time

import numpy as np
from _bare import bare_event_s

from swansim.cli import Parser, guarded
from swansim.device import Device, DeviceConfig
from swansim.hw.profile import Catalogue
from swansim.kernel.sched import L3Use

APP_L3 = L3Use(accesses_per_unit=5e-3, exposed_share=0.5, l3_bytes=2 * 2**20, working_set_bytes=2**19,
               hit_latency_s=30e-9)


def churn(n_threads: int, sim_s: float, seed: int = 0, l3: L3Use | None = None) -> tuple[float, int]:
    dev = Device(Catalogue.load().device("pixel3"), DeviceConfig(seed=seed))
    rng = np.random.default_rng(seed)
    n = dev.platform.n_cpus
    speed = [c.gemm_flop_per_cycle for c in dev.platform.clusters]

    def worker(i):
        t = dev.sched.spawn(f"w{i}", [int(x) for x in rng.choice(n, size=2, replace=False)], l3=l3)
        while True:
            yield dev.sched.run(t, float(rng.uniform(1e6, 5e7)), speed, 1.0)
            yield dev.env.timeout(float(rng.uniform(0, 2e-3)))

    for i in range(n_threads):
        dev.env.process(worker(i))
    t0 = time.process_time()
    dev.run(sim_s)
    return time.process_time() - t0, dev.sched.n_replans


def main(argv=None) -> None:
    Parser(description=__doc__.splitlines()[0]).parse_args(argv)
    print(f"{'threads':>7} {'replans':>9} {'bare events/replan':>19} {'with L3 stakes':>15}")
    for n in (2, 8, 16):
        bare = bare_event_s(100_000, 2)
        cpu, replans = churn(n, 20.0)
        cpu_l3, replans_l3 = churn(n, 20.0, l3=APP_L3)
        bare = (bare + bare_event_s(100_000, 2)) / 2
        print(f"{n:>7} {replans:>9} {cpu / replans / bare:>19.1f} {cpu_l3 / replans_l3 / bare:>15.1f}")


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_sched.py"))
