"""Synthetic workloads for experiments and benchmarks: sustained dense FP32 on chosen cores."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

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

