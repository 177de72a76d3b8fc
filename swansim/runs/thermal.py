"""Sustained dense load per phone: DVFS and thermal throttling over time.

For every device asked (default: every profile but the generic chassis) two runs: dense FP32
on the big cores (`SocSpec.big_cpus`), then on the little cores; each run samples throughput,
power, temperatures, frequencies, the cap in force and each party's limit (the kernel's thermal
zone on the junction, the vendor's thermal engine on skin and virtual sensors). `run_thermal`
runs them over a process pool and writes per run a timeline CSV (and PNG) and a summary table:
time to the first cap (by either party) and to the engine's first cap, the sustained fraction of
the peak throughput over the last 10 minutes (or the second half of a shorter run), skin
and battery temperatures at that steady state, their peaks, and when the engine would shut the
phone down. A time the run never reached (no cap, the battery never above 35 C, no shutdown) is
blank in the CSV and "never" in the printed table.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.device import Device, DeviceConfig
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.kernel.cpufreq import ENGINE, GOVERNORS, KERNEL
from swansim.kernel.thermal_gov import THERMAL_GOVERNORS
from swansim.options import option
from swansim.pool import check_jobs, run_all
from swansim.results import write_csv, write_manifest
from swansim.session.probes import Periodic
from swansim.session.workloads import SustainedGemm

LOADS = ("big", "little")
# One chunk ~0.1-0.5 s of a core: few events, and throughput is read exactly anyway.
CHUNK_FLOPS = 5e9
MIN_MINUTES, MAX_MINUTES = 0.5, 600.0
MIN_SAMPLE_S, MAX_SAMPLE_S = 0.01, 60.0


def phone_names(cat: Catalogue) -> list[str]:
    """Every device profile except the generic chassis."""
    return [n for n in cat.devices if n != "generic-phone"]


def load_cpus(spec: DeviceSpec, load: str) -> list[int]:
    """big: `SocSpec.big_cpus`; little: the little cluster."""
    return list(spec.soc.little.cpus if load == "little" else spec.soc.big_cpus)


class Sampler(Periodic):
    """A process sampling a device every ``every_s``: throughput, power, temperatures, freqs, caps."""

    def __init__(self, dev: Device, load: SustainedGemm, every_s: float):
        self.load = load
        self.rows: list[dict] = []
        self._last = (dev.env.now, 0.0, dev.platform.total_energy_j)
        super().__init__(dev, every_s)

    def sample(self) -> None:
        d = self.dev
        d.sched.sync()
        t, flops, e = d.env.now, self.load.flops_done(), d.platform.total_energy_j
        t0, f0, e0 = self._last
        if t <= t0:
            return
        row = {"time_s": t, "gflops": (flops - f0) / (t - t0) / 1e9, "power_w": (e - e0) / (t - t0)}
        for n in d.platform.thermal.nodes:
            row[f"temp_{n}_c"] = d.platform.temp_c(n)
        for p in d.cpufreq:
            row[f"freq_{p.name}_mhz"] = p.cur_mhz
            row[f"cap_{p.name}_mhz"] = p.cap_mhz
            for party in (KERNEL, ENGINE):
                row[f"limit_{party}_{p.name}_mhz"] = p.limit_mhz(party)
        row["status"] = d.thermal_status.name
        if d.battery is not None:
            row["battery_charge_pct"] = d.battery.soc_pct
        self.rows.append(row)
        self._last = (t, flops, e)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def run_one(spec: DeviceSpec, load: str, duration_s: float, sample_s: float = 1.0,
            **config) -> tuple[pd.DataFrame, dict]:
    """One sustained-load run of a ``spec`` phone (``config``: `DeviceConfig` fields); returns
    its timeline and its summary row."""
    dev = Device(spec, DeviceConfig(**config))
    cpus = load_cpus(dev.spec, load)
    work = SustainedGemm(dev, cpus, duration_s, CHUNK_FLOPS)
    sampler = Sampler(dev, work, sample_s)
    dev.run(duration_s)
    df = sampler.frame()
    return df, summarise(dev, df, load, cpus, duration_s)


def sustained_window_s(duration_s: float) -> float:
    """The tail a run's sustained figures average over: the last 10 minutes, or the second
    half of a shorter run (so a short run does not report its unthrottled start as sustained)."""
    return min(600.0, duration_s / 2.0)


def summarise(dev: Device, df: pd.DataFrame, load: str, cpus: list[int], duration_s: float) -> dict:
    last = df[df["time_s"] > duration_s - sustained_window_s(duration_s)]
    first = df[df["time_s"] <= min(10.0, duration_s)]
    sensor = dev.spec.thermal.sensor_node
    battery = dev.battery is not None
    engine = dev.thermal_engine
    row = {
        "device": dev.spec.name, "load": load, "cpus": " ".join(map(str, cpus)),
        "thermal_governor": dev.thermal.name,
        "thermal_engine": engine is not None,
        "first_throttle_s": first_throttle_s(dev, cpus),
        "first_engine_cap_s": first_throttle_s(dev, cpus, ENGINE),
        "initial_gflops": float(first["gflops"].mean()),
        "peak_gflops": float(df["gflops"].max()),
        "sustained_window_s": sustained_window_s(duration_s),
        "sustained_gflops": float(last["gflops"].mean()),
        "sustained_power_w": float(last["power_w"].mean()),
        "steady_skin_c": float(last["temp_skin_c"].mean()),
        "steady_battery_c": float(last["temp_battery_c"].mean()) if battery else None,
        "peak_sensor_c": float(df[f"temp_{sensor}_c"].max()),
        "peak_skin_c": float(df["temp_skin_c"].max()),
        "peak_battery_c": float(df["temp_battery_c"].max()) if battery else None,
        "battery_over_35c_s": _first_time(df, "temp_battery_c", 35.0) if battery else None,
        "engine_shutdown_s": engine.shutdown_s if engine is not None else None,
        "final_status": dev.thermal_status.name,
    }
    # of the peak (the highest sample): clocks may still be ramping in the first 10 s
    row["sustained_fraction"] = row["sustained_gflops"] / row["peak_gflops"] if row["peak_gflops"] else float("nan")
    return row


def first_throttle_s(dev: Device, cpus: list[int], party: str | None = None) -> float | None:
    """When a cap first fell below f_max on a domain that runs the load (idle domains' caps
    don't count); ``party``: only caps that party's limit set (`kernel.cpufreq.KERNEL`, `ENGINE`)."""
    loaded = {p.name: p.fmax_mhz for p in dev.cpufreq if set(p.cpus) & set(cpus)}
    times = [c.time_s for c in dev.thermal.cap_log if c.domain in loaded and c.new_mhz < loaded[c.domain]
             and (party is None or c.party == party)]
    return min(times) if times else None


def _first_time(df: pd.DataFrame, col: str, above: float) -> float | None:
    if col not in df:
        return None
    hot = df[df[col] > above]
    return float(hot["time_s"].iloc[0]) if len(hot) else None


def _one(spec: DeviceSpec, load: str, duration_s: float, sample_s: float, config: dict):
    """A pool worker: one run, its timeline keyed by device and load."""
    df, summary = run_one(spec, load, duration_s, sample_s, **config)
    df.insert(0, "load", load)
    df.insert(0, "device", spec.name)
    return df, summary


def check_minutes(minutes, where: str = "--minutes") -> float:
    """A run's length in minutes: at least half a minute (the first 10 s are the unthrottled
    reference, the second half the sustained window), at most ten hours."""
    return checks.number(minutes, where, MIN_MINUTES, MAX_MINUTES, "of minutes")


def check_devices(names, cat: Catalogue, where: str = "--devices") -> list[str]:
    """The devices asked for (None: every profile but the generic chassis); unknown names fail."""
    if names is None:
        return phone_names(cat)
    return list(checks.names(names, where, cat.names, "profile"))


@dataclass(frozen=True)
class ThermalConfig:
    """Sustained dense FP32 on the big and on the little cores of each phone; the `swansim
    thermal` options and `swansim.thermal`'s keywords are these fields."""

    devices: tuple[str, ...] | None = option(None, help="profiles (default: every profile but the generic "
                                                        "chassis)")
    minutes: float = option(30.0, help="simulated minutes per run")
    sample_s: float = option(1.0, help="the timeline's sample period (s)")
    governor: str = option("schedutil", help="cpufreq governor", known=lambda: tuple(GOVERNORS))
    thermal_governor: str | None = option(None, help="thermal governor (default: the profile's)",
                                          known=lambda: tuple(THERMAL_GOVERNORS))
    seed: int = option(0, help="the devices' seed")


def run_thermal(cfg: ThermalConfig, out: Path | str, plots: bool = True, jobs: int | None = None,
                progress: bool = True) -> pd.DataFrame:
    """Every device x load over a process pool; writes timelines, summary and plots under
    ``out``; returns the summary table. Every field and ``out`` are checked first."""
    started = time.perf_counter()
    duration_s = check_minutes(cfg.minutes) * 60.0
    sample_s, governor, thermal_governor = cfg.sample_s, cfg.governor, cfg.thermal_governor
    checks.number(sample_s, "--sample-s", MIN_SAMPLE_S, min(MAX_SAMPLE_S, duration_s / 2.0), "of seconds")
    cat = Catalogue.load()
    names = check_devices(cfg.devices, cat)
    specs = {n: cat.device(n, "--devices") for n in names}
    checks.one_of(governor, "--governor", GOVERNORS, "cpufreq governor")
    if thermal_governor is not None:
        checks.one_of(thermal_governor, "--thermal-governor", THERMAL_GOVERNORS, "thermal governor")
    config = {"governor": governor, "thermal_governor": thermal_governor, "seed": checks.seed(cfg.seed)}
    jobs = check_jobs(jobs)
    out = checks.out_dir(out)
    runs = [(n, load) for n in names for load in LOADS]
    written: list[str] = []

    def keep(i: int, result) -> None:
        df, _ = result
        name, load = runs[i]
        path = out / f"timeline-{name}-{load}.csv"
        write_csv(df, path)
        written.append(path.name)

    results = run_all(_one, [(specs[n], load, duration_s, sample_s, config) for n, load in runs], jobs,
                      desc="thermal runs", on_result=keep, progress=progress,
                      labels=[f"{n} {load}" for n, load in runs])
    table = pd.DataFrame([s for _, s in results])
    write_csv(table, out / "summary.csv")
    written.append("summary.csv")
    if plots:
        from swansim import plots as P
        timelines = {}
        for (name, load), (df, summary) in zip(runs, results):
            spec = specs[name]
            P.thermal_run(df, out / f"timeline-{name}-{load}.png",
                          f"{spec.title}: dense FP32 on the {load} cores ({summary['cpus']})",
                          sensor_for(spec, load), engine_thresholds_c(spec))
            written.append(f"timeline-{name}-{load}.png")
            timelines[(name, load)] = df
        P.thermal_summary(timelines, LOADS, out / "summary.png")
        written.append("summary.png")
    write_manifest(out, {"devices": names, "loads": list(LOADS), "duration_s": duration_s,
                         "sample_s": sample_s, **config}, seed=config["seed"], files=written,
                   wall_s=round(time.perf_counter() - started, 1))
    return table


def engine_thresholds_c(spec: DeviceSpec) -> list[float]:
    """The thresholds of the engine's monitors that read the skin node (none without an engine)."""
    engine = spec.thermal_engine
    return [] if engine is None else [t for r in engine.rules if r.sensor == "skin" for t in r.thresholds_c]


def sensor_for(spec: DeviceSpec, load: str) -> str:
    """The thermal node of the cluster a load runs on (the big load: the zone's sensor)."""
    if load == "little" and spec.soc.little.name in spec.rc.capacity_j_per_k:
        return spec.soc.little.name
    return spec.thermal.sensor_node


def format_summary(table: pd.DataFrame) -> str:
    """The summary as a text table; the sustained and steady columns average its last window."""
    window = table["sustained_window_s"].iloc[0] / 60.0 if len(table) else 10.0

    def t(v, fmt="{:.0f}"):
        return "never" if v is None or pd.isna(v) else fmt.format(v)

    head = (f"sustained dense FP32; 'steady' = mean over the last {window:g} min, 'sustained/peak' = its "
            f"throughput over the highest sampled\n"
            f"{'device':<14} {'load':<6} {'1st cap s':>9} {'engine cap s':>12} {'GFLOP/s 0-10 s':>14} "
            f"{'steady GFLOP/s':>14} {'sustained/peak':>14} {'steady W':>8} {'peak sensor C':>13} "
            f"{'steady skin C':>13} {'steady batt C':>13} {'batt >35 C at s':>15}")
    lines = [head]
    for r in table.itertuples():
        lines.append(f"{r.device:<14} {r.load:<6} {t(r.first_throttle_s):>9} {t(r.first_engine_cap_s):>12} "
                     f"{r.initial_gflops:>14.1f} {r.sustained_gflops:>14.1f} {r.sustained_fraction:>14.2f} "
                     f"{r.sustained_power_w:>8.2f} {r.peak_sensor_c:>13.1f} {r.steady_skin_c:>13.1f} "
                     f"{t(r.steady_battery_c, '{:.1f}'):>13} {t(r.battery_over_35c_s):>15}")
    return "\n".join(lines)
