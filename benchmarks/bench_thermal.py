"""A 30-simulated-minute single-phone run with DVFS, thermal throttling and the battery.

Run: .venv/bin/python benchmarks/bench_thermal.py [device]
Prints wall time and simulated seconds per wall second, with the governors' and scheduler's
event counts, for sustained dense FP32 on the big cores and on the little cores.
"""
from __future__ import annotations

import sys
import time

from swansim.runs.thermal import load_cpus
from swansim.device import Device, DeviceConfig
from swansim.runs.workloads import SustainedGemm

SIM_S = 30 * 60.0


def one_run(device: str, load: str, chunk_flops: float, thermal_governor: str | None = None) -> dict:
    dev = Device(DeviceConfig(device=device, thermal_governor=thermal_governor))
    SustainedGemm(dev, load_cpus(dev.spec, load), SIM_S, chunk_flops)
    t0 = time.perf_counter()
    dev.run(SIM_S)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "ratio": SIM_S / wall, "replans": dev.sched.n_replans,
            "polls": dev.thermal.n_polls, "cpufreq_evals": sum(p.governor.n_evaluations for p in dev.cpufreq
                                                               if hasattr(p.governor, "n_evaluations"))}


if __name__ == "__main__":
    device = sys.argv[1] if len(sys.argv) > 1 else "pixel3"
    print(f"{device}: {SIM_S / 60:.0f} simulated minutes per run")
    print(f"{'load':<7} {'thermal':<16} {'chunk':>6} {'wall s':>7} {'sim/wall':>9} {'replans':>8} {'polls':>6} {'cpufreq':>8}")
    for load in ("big", "little"):
        for gov in (None, "power_allocator"):
            for chunk in (5e9, 1e9):
                r = one_run(device, load, chunk, gov)
                print(f"{load:<7} {gov or 'profile':<16} {chunk:>6.0e} {r['wall_s']:>7.2f} {r['ratio']:>9.0f} "
                      f"{r['replans']:>8} {r['polls']:>6} {r['cpufreq_evals']:>8}")
