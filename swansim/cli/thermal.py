"""`swansim thermal`: sustained dense load per phone, DVFS and thermal throttling over time.

For every device profile (generic-phone excepted) two runs: dense FP32 on all big cores (every
cluster but the lowest-capacity one), then on the little cores; 30 simulated minutes each by
default. Writes per run a timeline CSV and PNG (temperatures, frequency caps, throughput),
and a summary table: time to first throttle, sustained throughput over the last 10 minutes,
peak skin and battery temperatures.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from tqdm import tqdm  # noqa: E402

from swansim.device import Device, DeviceConfig  # noqa: E402
from swansim.errors import InputError  # noqa: E402
from swansim.hw.profile import Catalogue, DeviceSpec  # noqa: E402
from swansim.results import write_manifest  # noqa: E402
from swansim.workloads import SustainedGemm  # noqa: E402

LOADS = ("big", "little")
# One chunk ~0.1-0.5 s of a core: few events, and throughput is read exactly anyway.
CHUNK_FLOPS = 5e9


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("thermal", help="sustained dense load per phone: DVFS, throttling, temperatures")
    p.add_argument("--out", default="results", help="output directory (default: %(default)s)")
    p.add_argument("--devices", default="", help="comma-separated profiles (default: every phone profile)")
    p.add_argument("--minutes", type=float, default=30.0, help="simulated minutes per run (default: %(default)s)")
    p.add_argument("--sample-s", type=float, default=1.0, help="timeline sample period (default: %(default)s)")
    p.add_argument("--governor", default="schedutil", help="cpufreq governor (default: %(default)s)")
    p.add_argument("--thermal-governor", default=None, help="thermal governor (default: the profile's)")
    p.add_argument("--no-plots", action="store_true", help="CSV only")
    p.set_defaults(func=run)


def phone_names(cat: Catalogue) -> list[str]:
    """Every device profile except the generic chassis."""
    return [n for n in cat.devices if n != "generic-phone"]


def load_cpus(spec: DeviceSpec, load: str) -> list[int]:
    """big: every cluster but the lowest-capacity one (all cores if there is one); little: that one."""
    clusters = spec.soc.clusters
    little = min(clusters, key=lambda c: c.capacity_dmips_mhz)
    if load == "little" or len(clusters) == 1:
        return list(little.cpus)
    return sorted(cpu for c in clusters if c is not little for cpu in c.cpus)


class Sampler:
    """A process sampling a device every ``every_s``: throughput, power, temperatures, freqs, caps."""

    def __init__(self, dev: Device, load: SustainedGemm, every_s: float):
        self.dev, self.load, self.every_s = dev, load, every_s
        self.rows: list[dict] = []
        self._last = (dev.env.now, 0.0, dev.platform.total_energy_j)
        dev.env.process(self._run())

    def _run(self):
        while True:
            yield self.dev.env.timeout(self.every_s)
            self.sample()

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
        row["status"] = d.thermal_status.name
        if d.battery is not None:
            row["soc_pct"] = d.battery.soc_pct
        self.rows.append(row)
        self._last = (t, flops, e)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def run_one(name: str, load: str, duration_s: float, sample_s: float = 1.0, catalogue: Catalogue | None = None,
            **config) -> tuple[pd.DataFrame, dict]:
    """One sustained-load run; returns its timeline and its summary row."""
    dev = Device(DeviceConfig(device=name, **config), catalogue=catalogue)
    cpus = load_cpus(dev.spec, load)
    work = SustainedGemm(dev, cpus, duration_s, CHUNK_FLOPS)
    sampler = Sampler(dev, work, sample_s)
    t0 = time.perf_counter()
    dev.run(duration_s)
    wall_s = time.perf_counter() - t0
    df = sampler.frame()
    return df, summarise(dev, df, load, cpus, duration_s, wall_s)


def summarise(dev: Device, df: pd.DataFrame, load: str, cpus: list[int], duration_s: float, wall_s: float) -> dict:
    last = df[df["time_s"] > duration_s - 600.0]
    first = df[df["time_s"] <= min(10.0, duration_s)]
    sensor = dev.spec.thermal.sensor_node
    row = {
        "device": dev.spec.name, "load": load, "cpus": " ".join(map(str, cpus)),
        "thermal_governor": dev.thermal.name,
        "first_throttle_s": first_throttle_s(dev, cpus),
        "initial_gflops": float(first["gflops"].mean()),
        "sustained_gflops": float(last["gflops"].mean()),
        "sustained_power_w": float(last["power_w"].mean()),
        "peak_sensor_c": float(df[f"temp_{sensor}_c"].max()),
        "peak_skin_c": float(df["temp_skin_c"].max()),
        "peak_battery_c": float(df["temp_battery_c"].max()) if "temp_battery_c" in df else float("nan"),
        "battery_over_35c_s": _first_time(df, "temp_battery_c", 35.0),
        "final_status": dev.thermal_status.name,
        "sim_s_per_wall_s": duration_s / wall_s if wall_s > 0 else float("inf"),
    }
    row["sustained_fraction"] = row["sustained_gflops"] / row["initial_gflops"] if row["initial_gflops"] else float("nan")
    return row


def first_throttle_s(dev: Device, cpus: list[int]) -> float | None:
    """When a cap first fell below f_max on a domain that runs the load (idle domains' caps don't count)."""
    loaded = {p.name: p.fmax_mhz for p in dev.cpufreq if set(p.cpus) & set(cpus)}
    times = [c.time_s for c in dev.thermal.cap_log if c.domain in loaded and c.new_mhz < loaded[c.domain]]
    return min(times) if times else None


def _first_time(df: pd.DataFrame, col: str, above: float) -> float | None:
    if col not in df:
        return None
    hot = df[df[col] > above]
    return float(hot["time_s"].iloc[0]) if len(hot) else None


def plot_run(df: pd.DataFrame, path: Path, title: str, sensor: str) -> Path:
    """Temperatures, frequency caps (and frequencies), throughput against time."""
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    t = df["time_s"] / 60.0
    for node in (sensor, "soc", "board", "battery", "skin"):
        col = f"temp_{node}_c"
        if col in df:
            axes[0].plot(t, df[col], lw=1, label=node)
    axes[0].axhline(35.0, color="grey", ls=":", lw=0.8)
    axes[0].set_ylabel("temperature (C)")
    axes[0].legend(fontsize=7, ncol=5)
    for col in (c for c in df.columns if c.startswith("cap_")):
        line, = axes[1].step(t, df[col], where="post", lw=1, label=f"cap {col[4:-4]}")
        axes[1].step(t, df[f"freq_{col[4:-4]}_mhz"], where="post", lw=0.6, ls="--", color=line.get_color())
    axes[1].set_ylabel("MHz (cap solid, freq dashed)")
    axes[1].legend(fontsize=7, ncol=3)
    axes[2].plot(t, df["gflops"], lw=1)
    axes[2].set_ylabel("throughput (GFLOP/s)")
    axes[2].set_xlabel("time (min)")
    axes[2].set_ylim(bottom=0)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_summary(timelines: dict[tuple[str, str], pd.DataFrame], path: Path) -> Path:
    """Throughput relative to the first 10 s, every device, one panel per load."""
    fig, axes = plt.subplots(1, len(LOADS), figsize=(11, 4), sharey=True)
    for ax, load in zip(axes, LOADS):
        for (name, ld), df in timelines.items():
            if ld != load:
                continue
            start = df.loc[df["time_s"] <= 10.0, "gflops"].mean()
            ax.plot(df["time_s"] / 60.0, df["gflops"] / start, lw=1, label=name)
        ax.set_title(f"dense FP32 on the {load} cores")
        ax.set_xlabel("time (min)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("throughput / first 10 s")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(args) -> int:
    if args.minutes <= 0:
        raise InputError("command line", "--minutes", f"must be positive, got {args.minutes}")
    if args.sample_s <= 0:
        raise InputError("command line", "--sample-s", f"must be positive, got {args.sample_s}")
    cat = Catalogue.load()
    names = [n.strip() for n in args.devices.split(",") if n.strip()] or phone_names(cat)
    for n in names:
        cat.device(n)  # fails early on an unknown name
    out = Path(args.out) / "thermal"
    out.mkdir(parents=True, exist_ok=True)
    duration_s = args.minutes * 60.0
    config = {"governor": args.governor, "thermal_governor": args.thermal_governor}
    rows, timelines = [], {}
    runs = [(n, load) for n in names for load in LOADS]
    for name, load in tqdm(runs, desc="thermal runs", unit="run"):
        df, summary = run_one(name, load, duration_s, args.sample_s, catalogue=cat, **config)
        rows.append(summary)
        df.insert(0, "load", load)
        df.insert(0, "device", name)
        df.to_csv(out / f"timeline-{name}-{load}.csv", index=False)
        timelines[(name, load)] = df
        if not args.no_plots:
            spec = cat.device(name)
            plot_run(df, out / f"timeline-{name}-{load}.png",
                     f"{spec.title}: dense FP32 on the {load} cores ({summary['cpus']})", spec.thermal.sensor_node)
    table = pd.DataFrame(rows)
    table.to_csv(out / "summary.csv", index=False)
    if not args.no_plots:
        plot_summary(timelines, out / "summary.png")
    write_manifest(out, {"devices": names, "loads": list(LOADS), "duration_s": duration_s,
                         "sample_s": args.sample_s, **config})
    print(format_summary(table))
    print(f"wrote {out}/")
    return 0


def format_summary(table: pd.DataFrame) -> str:
    head = (f"{'device':<14} {'load':<6} {'throttle s':>10} {'GFLOP/s 0-10s':>13} {'last 10min':>10} "
            f"{'frac':>5} {'W':>5} {'sensor C':>8} {'skin C':>6} {'batt C':>6} {'batt>35C s':>10}")
    lines = [head]
    for r in table.itertuples():
        thr = "never" if pd.isna(r.first_throttle_s) else f"{r.first_throttle_s:.1f}"
        b35 = "-" if pd.isna(r.battery_over_35c_s) else f"{r.battery_over_35c_s:.0f}"
        lines.append(f"{r.device:<14} {r.load:<6} {thr:>10} {r.initial_gflops:>13.1f} {r.sustained_gflops:>10.1f} "
                     f"{r.sustained_fraction:>5.2f} {r.sustained_power_w:>5.2f} {r.peak_sensor_c:>8.1f} "
                     f"{r.peak_skin_c:>6.1f} {r.peak_battery_c:>6.1f} {b35:>10}")
    return "\n".join(lines)
