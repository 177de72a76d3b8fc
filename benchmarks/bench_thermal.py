"""A 30-simulated-minute phone with DVFS, thermal throttling and the battery, in bare events.

Sustained dense FP32 on the big cores and on the little cores, with the profile's thermal
governor and with power_allocator, in chunks of 5e9 and 1e9 FLOPs: printed per case, the CPU
cost of one simulated second in bare SimPy events (see _bare.py), replans, thermal polls and
cpufreq evaluations.

Run: .venv/bin/python benchmarks/bench_thermal.py [device]
"""
from __future__ import annotations

import sys
import time

from _bare import bare_event_s

from swansim.cli import Parser, guarded
from swansim.device import Device, DeviceConfig
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.runs.thermal import load_cpus
from swansim.session.workloads import SustainedGemm

SIM_S = 30 * 60.0


def one_run(spec: DeviceSpec, load: str, chunk_flops: float, thermal_governor: str | None = None) -> dict:
    dev = Device(spec, DeviceConfig(thermal_governor=thermal_governor))
    SustainedGemm(dev, load_cpus(dev.spec, load), SIM_S, chunk_flops)
    t0 = time.process_time()
    dev.run(SIM_S)
    return {"cpu_s": time.process_time() - t0, "replans": dev.sched.n_replans, "polls": dev.thermal.n_polls,
            "cpufreq_evals": sum(getattr(p.governor, "n_evaluations", 0) for p in dev.cpufreq)}


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("device", nargs="?", default="pixel3")
    device = ap.parse_args(argv).device
    spec = Catalogue.load().device(device, "device")
    print(f"{device}: {SIM_S / 60:.0f} simulated minutes per run")
    print(f"{'load':<7} {'thermal':<16} {'chunk':>6} {'bare events/sim s':>18} {'replans':>8} {'polls':>6} {'cpufreq':>8}")
    for load in ("big", "little"):
        for gov in (None, "power_allocator"):
            for chunk in (5e9, 1e9):
                bare = bare_event_s(100_000, 2)
                r = one_run(spec, load, chunk, gov)
                bare = (bare + bare_event_s(100_000, 2)) / 2
                print(f"{load:<7} {gov or 'profile':<16} {chunk:>6.0e} {r['cpu_s'] / SIM_S / bare:>18.1f} "
                      f"{r['replans']:>8} {r['polls']:>6} {r['cpufreq_evals']:>8}")


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_thermal.py"))
