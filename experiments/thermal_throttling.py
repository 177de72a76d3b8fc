"""Thermal throttling under sustained dense load, every phone profile: CSV + PNG under results/thermal/.

Dense FP32 on all big cores, then on the little cores, 30 simulated minutes each, with the
profile's cpufreq (schedutil) and thermal governors. Writes per run a timeline (temperatures,
frequency caps, throughput vs time) and a summary table: time to first throttle, sustained
throughput over the last 10 minutes, peak skin and battery temperatures.

Run: .venv/bin/python experiments/thermal_throttling.py [--devices pixel3,pixel6] [--minutes 30]
(the same as `swansim thermal --out results`; extra arguments are passed through).
"""
from __future__ import annotations

import sys

from swansim.cli import main

if __name__ == "__main__":
    sys.exit(main(["thermal", "--out", "results", *sys.argv[1:]]))
