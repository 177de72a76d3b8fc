"""Fast-forward against full simulation: the same batches, CPU per batch in bare events.

A Pixel 3 at 25 C trains ``--batches`` batches of ResNet-34 with PyTorch's default, then the
same number of ShuffleNetV2-x2 on one big core and a tenth as many of MobileNetV2 with the
default (25 s batches), once fully simulated and once fast-forwarded
with the batch model (the memo starts empty: its misses are simulated and counted in). Printed:
CPU per batch of each in bare SimPy events (see _bare.py), the speed-up, the memo's hit rate,
and the differences in simulated time, energy and final temperatures. Then the same batches
fast-forwarded on a fresh phone with the warm memo (every batch a hit): as stretches where the
phone is quiet (`FastForward.run_stretch`), batch by batch, and batch by batch with every
thermal poll run, against the limit of a hit: one memo lookup and one exact RC step of the
phone's thermal network. Each warm figure is the best of REPEATS interleaved runs, per job
(ResNet-34 under the default throttles: about four thermal polls a batch that may each move a
cap; ShuffleNetV2 on one core stays quiet; MobileNetV2's 25 s batches hold a hundred polls).

Run: .venv/bin/python benchmarks/bench_fastforward.py [--batches 100]
"""
from __future__ import annotations

import gc
import math
import sys
import time

from _bare import bare_event_s

from swansim.batchmodel import BatchKey, FastForward, check_fast_forward
from swansim.cli import Parser, guarded
from swansim.device import Device
from swansim.dnn.choices import parse_choice, pytorch_default
from swansim.hw.profile import Catalogue

REPEATS = 3


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=100)
    n = ap.parse_args(argv).batches
    spec = Catalogue.load().device("pixel3")
    soc = spec.soc
    # MobileNetV2 under PyTorch's default: 25 s batches, long enough for quiet thermal polls
    jobs = [("resnet34", pytorch_default(soc), n), ("shufflenet_v2_x2_0", parse_choice("4", soc), n),
            ("mobilenet_v2", pytorch_default(soc), max(2, n // 10))]
    bare = bare_event_s(100_000, 2)
    c = check_fast_forward(lambda: Device(spec), jobs)
    full, ff, full_cpu, ff_cpu = c.full, c.ff, c.full_cpu_s, c.ff_cpu_s
    bare = (bare + bare_event_s(100_000, 2)) / 2
    total = sum(k for _, _, k in jobs)
    print(f"{total} batches: full {full_cpu / total / bare:,.0f} bare events/batch, fast-forward "
          f"{ff_cpu / total / bare:,.0f} (x{full_cpu / ff_cpu:.1f}); memo hit rate {c.memo.hit_rate:.1%}")
    print(f"time {ff.env.now / full.env.now - 1:+.3%}, energy "
          f"{ff.platform.total_energy_j / full.platform.total_energy_j - 1:+.3%}, final temperatures (C): "
          + ", ".join(f"{n} {a:.2f}/{b:.2f}" for n, a, b in zip(full.platform.thermal.nodes,
                                                             full.platform.thermal.temp_c, ff.platform.thermal.temp_c)))
    del full, ff   # the two phones are not needed again: their garbage is collected now, not timed below
    c.full = c.ff = None
    gc.collect()
    modes = (("as stretches where quiet", True, True), ("quiet polls skipped", True, False),
             ("every poll run", False, False))
    key = BatchKey("pixel3", *jobs[0][:2])
    per_job, counts, limit = {}, {}, math.inf
    for _ in range(REPEATS):   # the best of a few interleaved runs: this machine is shared
        for mode, skip, stretch in modes:
            dev = Device(spec)
            for model, choice, k in jobs:
                t0 = time.process_time()
                FastForward(dev, c.memo, BatchKey("pixel3", model, choice), skip_quiet=skip).run_process(k, stretch=stretch)
                s = (time.process_time() - t0) / k
                per_job[mode, model] = min(per_job.get((mode, model), math.inf), s)
            counts[mode] = f"{dev.n_skipped_polls} polls skipped, {dev.env.n_events} events"   # the same each run
        net, power = dev.platform.thermal, dev.platform.node_power_w.tolist()
        t0 = time.process_time()
        for _ in range(10_000):
            c.memo.cost(key)
            net.step(1.0, power)
        limit = min(limit, (time.process_time() - t0) / 10_000)
    hit = {mode: sum(per_job[mode, m] * k for m, _, k in jobs) / total for mode, _, _ in modes}
    for mode, _, _ in modes:
        jobs_s = ", ".join(f"{m} {per_job[mode, m] / bare:,.0f}" for m, _, _ in jobs)
        print(f"warm memo, {mode}: {hit[mode] / bare:,.0f} bare events per batch ({jobs_s}; {counts[mode]})")
    print(f"the limit, a lookup and an RC step: {limit / bare:,.1f} bare events; a warm batch costs "
          f"{hit['as stretches where quiet'] / limit:,.0f}x that ({hit['quiet polls skipped'] / limit:,.0f}x batch by "
          f"batch, {hit['every poll run'] / limit:,.0f}x with every poll run); by job, as stretches: "
          + ", ".join(f"{m} {per_job['as stretches where quiet', m] / limit:,.0f}x" for m, _, _ in jobs))


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_fastforward.py"))
