"""The vendor thermal engine under sustained big-core load, on the Swan paper's five phones.

Per phone: 30 simulated minutes of dense FP32 on the big cores (`swansim.runs.thermal`), with and
without the profile's `[thermal_engine]`. Prints every cap the engine set (time, cluster, skin
temperature, MHz), then per phone and run: when the first cap came (either party) and the
engine's first, the sustained fraction of the peak throughput, and skin and battery temperatures
at the steady state (the last 10 minutes), with where the engine's configuration comes from. Writes the table and the timelines under ``--out``.

    .venv/bin/python experiments/thermal_engine.py [--minutes 30] [--out results/thermal_engine]
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pandas as pd

from swansim.cli import Parser, guarded
from swansim.device import Device, DeviceConfig
from swansim.hw.profile import SWAN_PHONES, Catalogue, DeviceSpec
from swansim.kernel.cpufreq import ENGINE
from swansim.runs.thermal import CHUNK_FLOPS, Sampler, load_cpus, summarise
from swansim.session.workloads import SustainedGemm



def provenance(spec) -> str:
    """Where a phone's engine configuration comes from: its own, or another vendor's (assumed)."""
    if spec.thermal_engine is None:
        return "none"
    with open(spec.path, "rb") as fh:
        rules = tomllib.load(fh)["thermal_engine"]["rules"]
    assumed = any(r["sources"]["thresholds_c"].startswith("assumption") for r in rules)
    return "assumed: another vendor's, same SoC" if assumed else "sourced: its own"


def run(spec: DeviceSpec, duration_s: float, engine: bool):
    dev = Device(spec, DeviceConfig(thermal_engine=engine))
    cpus = load_cpus(dev.spec, "big")
    work = SustainedGemm(dev, cpus, duration_s, CHUNK_FLOPS)
    sampler = Sampler(dev, work, 1.0)
    dev.run(duration_s)
    df = sampler.frame()
    return dev, df, summarise(dev, df, "big", cpus, duration_s)


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--out", default="results/thermal_engine")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cat = Catalogue.load()
    rows, steps = [], []
    for name in SWAN_PHONES:
        spec = cat.device(name)
        for engine in (False, True):
            dev, df, row = run(spec, args.minutes * 60.0, engine)
            df.to_csv(out / f"timeline-{name}-{'engine' if engine else 'kernel-only'}.csv", index=False)
            rows.append({**row, "engine_config": provenance(spec) if engine else "off"})
            for c in dev.thermal.cap_log:
                if engine and c.party == ENGINE:
                    steps.append({"device": name, "time_s": c.time_s, "cluster": c.domain, "skin_c": c.temp_c,
                                  "from_mhz": c.old_mhz, "to_mhz": c.new_mhz})
    table = pd.DataFrame(rows)
    table.to_csv(out / "summary.csv", index=False)
    pd.DataFrame(steps).to_csv(out / "engine_caps.csv", index=False)
    print("caps the engine set (cap in force before -> after; skin temperature that moved it):")
    print(pd.DataFrame(steps).to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    cols = ["device", "engine_config", "first_throttle_s", "first_engine_cap_s", "sustained_fraction",
            "steady_skin_c", "steady_battery_c", "battery_over_35c_s", "engine_shutdown_s"]
    print(f"\nsustained dense FP32 on the big cores, {args.minutes:g} min; steady = the last "
          f"{table['sustained_window_s'].iloc[0] / 60:g} min")
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    sys.exit(guarded(main, "thermal_engine.py"))
