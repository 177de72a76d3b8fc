"""Synthetic workloads for experiments and benchmarks: sustained dense FP32 on chosen cores, and
short bursts of background work."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from swansim.apps.appmodels import named_stream

if TYPE_CHECKING:
    from swansim.device import Device


class SustainedGemm:
    """One thread pinned to each of ``cpus`` doing dense FP32 work back to back for ``duration_s``.

    Work comes in chunks (one `Scheduler.run` each); `flops_done()` counts the finished chunks
    plus the progress of the running ones, so throughput can be read at any instant exactly.
    Bigger chunks mean fewer events; they do not change the rates.
    """

    def __init__(self, dev: "Device", cpus: Sequence[int], duration_s: float, flops_per_chunk: float = 1e9):
        self.dev = dev
        self.chunk = flops_per_chunk
        self.peak = [c.gemm_flop_per_cycle for c in dev.platform.clusters]
        self.finished = {"flops": 0.0}   # FLOPs of finished chunks
        self.end_s = dev.env.now + duration_s
        self.threads = [dev.sched.spawn(f"gemm@{cpu}", [cpu], group="gemm") for cpu in cpus]
        self.procs = [dev.env.process(self._worker(t)) for t in self.threads]

    def _worker(self, t):
        env, sched = self.dev.env, self.dev.sched
        while env.now < self.end_s:
            yield sched.run(t, self.chunk, self.peak)
            self.finished["flops"] += self.chunk

    def flops_done(self) -> float:
        """FLOPs done up to the scheduler's last sync (call ``sched.sync()`` first for now)."""
        running = sum(self.chunk - t.remaining for t in self.threads if t.done is not None)
        return self.finished["flops"] + running


class Bursts:
    """``threads`` threads allowed on ``cpus`` (one Android cpuset), each sleeping an exponential
    time of mean ``period_s``, then running ``burst_s`` of work (that long at the cpus' top clock,
    longer at a lower one), for as long as the phone runs: background activity of the kind a
    phone's services make, at figures the caller chooses (none is sourced here). At the top clock
    each thread keeps a core busy ``burst_s / (period_s + burst_s)`` of the time.
    """

    def __init__(self, dev: "Device", cpus: Sequence[int], threads: int, period_s: float, burst_s: float,
                 seed: int = 0):
        self.dev = dev
        fmax_hz = max(dev.spec.soc.cluster_of(c).fmax_mhz for c in cpus) * 1e6
        self.cycles = burst_s * fmax_hz   # work in cycles, one a cycle on any core
        self.speed = [1.0] * len(dev.platform.clusters)
        self.period_s = period_s
        self.rng = named_stream(seed, "bursts")   # a stream of its own under the phone's seed
        self.threads = [dev.sched.spawn(f"burst{i}", cpus, group="bursts") for i in range(threads)]
        self.procs = [dev.env.process(self._worker(t)) for t in self.threads]

    def _worker(self, t):
        env, sched = self.dev.env, self.dev.sched
        while True:
            yield env.timeout(self.rng.exponential(self.period_s))
            yield sched.run(t, self.cycles, self.speed)
