"""Scheduler throughput: replans (events) per wall second, and simulated/wall time ratio.

Each case runs twice: plain threads, and threads with a stake in the shared L3 (what every app
thread has), whose rates the replan adjusts for L3 thrashing; the last column is the ratio of
wall time per replan (L3 threads run slower, so a run has fewer replans).

Run: .venv/bin/python benchmarks/bench_sched.py
Ratios are measured in one run, so they compare like with like on whatever machine runs them.
"""
from __future__ import annotations

import time

import numpy as np

from swansim.device import Device, DeviceConfig
from swansim.kernel.sched import L3Use

APP_L3 = L3Use(accesses_per_unit=5e-3, exposed_share=0.5, l3_bytes=2 * 2**20, working_set_bytes=2**19,
               hit_latency_s=30e-9)


def churn(n_threads: int, sim_s: float, seed: int = 0, l3: L3Use | None = None) -> tuple[float, int, float]:
    dev = Device(DeviceConfig(seed=seed))
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
    t0 = time.perf_counter()
    dev.run(sim_s)
    wall = time.perf_counter() - t0
    return wall, dev.sched.n_replans, sim_s / wall


if __name__ == "__main__":
    print(f"{'threads':>7} {'replans':>9} {'wall s':>7} {'replans/s':>10} {'sim/wall':>9} {'L3 cost/replan':>15}")
    for n in (2, 8, 16):
        wall, replans, ratio = churn(n, 20.0)
        wall_l3, replans_l3, _ = churn(n, 20.0, l3=APP_L3)
        cost = (wall_l3 / replans_l3) / (wall / replans)
        print(f"{n:>7} {replans:>9} {wall:>7.2f} {replans / wall:>10.0f} {ratio:>9.1f} {cost:>15.2f}")
