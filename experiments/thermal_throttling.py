"""Thermal throttling under sustained dense load, every device profile but the generic chassis: CSV + PNG under results/thermal/.

Dense FP32 on all big cores, then on the little cores, 30 simulated minutes each, with the
profile's cpufreq (schedutil) and thermal governors. Writes per run a timeline (temperatures,
frequency caps, throughput vs time) and a summary table: time to first throttle, sustained
throughput over the last 10 minutes, peak skin and battery temperatures.

Run: .venv/bin/python experiments/thermal_throttling.py [minutes]
"""
from __future__ import annotations

import sys

from swansim.cli import guarded
from swansim.runs.thermal import ThermalConfig, format_summary, run_thermal


def _cli() -> None:
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    print(format_summary(run_thermal(ThermalConfig(minutes=minutes), "results/thermal")))


if __name__ == "__main__":
    sys.exit(guarded(_cli, "thermal_throttling.py"))
