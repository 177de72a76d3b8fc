"""The yardstick of every benchmark: a bare SimPy loop timed in the same run.

A process that yields a zero-work timeout, over and over: what one SimPy event costs on this
machine, right now. Benchmarks report their CPU time in these units (bare events), so their
figures compare across machines and survive a loaded one.
"""
from __future__ import annotations

import time

import simpy


def bare_event_s(n: int = 200_000, repeats: int = 3) -> float:
    """CPU seconds per event of a bare SimPy loop (the best of ``repeats`` runs)."""
    best = float("inf")
    for _ in range(repeats):
        env = simpy.Environment()

        def loop():
            for _ in range(n):
                yield env.timeout(1.0)

        env.process(loop())
        t0 = time.process_time()
        env.run()
        best = min(best, (time.process_time() - t0) / n)
    return best
