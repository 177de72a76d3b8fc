"""Thermal throttling under sustained dense load, every device profile but the generic chassis: CSV + PNG under results/thermal/.

Dense FP32 on all big cores, then on the little cores, 30 simulated minutes each, with the
profile's cpufreq (schedutil) and thermal governors. Writes per run a timeline (temperatures,
frequency caps, throughput vs time) and a summary table: time to first throttle, sustained
throughput over the last 10 minutes, peak skin and battery temperatures.

Run: .venv/bin/python experiments/thermal_throttling.py [minutes] [--jobs N]
"""
from __future__ import annotations

import sys

from swansim.cli import Parser, guarded
from swansim.runs.thermal import ThermalConfig, format_summary, run_thermal


def _cli(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("minutes", nargs="?", type=float, default=30.0, help="simulated minutes per load (default: 30)")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    print(format_summary(run_thermal(ThermalConfig(minutes=args.minutes), "results/thermal", jobs=args.jobs)))


if __name__ == "__main__":
    sys.exit(guarded(_cli, "thermal_throttling.py"))
