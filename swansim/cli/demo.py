"""`swansim demo`: the quick reproduction - a short simulation, a summary and plots."""
from __future__ import annotations

import argparse
from pathlib import Path

from swansim.device import Device, DeviceConfig
from swansim.plots import timeline
from swansim.results import TimelineProbe, energy_frame, write_manifest
from swansim.workloads import sustained_gemm


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="quick reproduction: simulations, summary tables and plots")
    p.add_argument("--out", default="results", help="output directory (default: %(default)s)")
    p.add_argument("--device", default="pixel3")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args) -> int:
    out = Path(args.out) / "demo"
    out.mkdir(parents=True, exist_ok=True)
    cfg = DeviceConfig(device=args.device, seed=args.seed)
    rows = []
    for label, cpus in (("all big cores", None), ("one little core", [0])):
        dev = Device(cfg)
        big = max(dev.platform.clusters, key=lambda c: c.capacity_dmips_mhz)
        cpus = cpus or list(big.cpus)
        probe = TimelineProbe(dev.platform, every_s=0.5)
        procs, done = sustained_gemm(dev, cpus, 60.0)
        dev.run(60.0)
        e = dev.platform.total_energy_j
        rows.append((label, done["flops"] / 60.0 / 1e9, e / 60.0, done["flops"] / e / 1e9))
        slug = label.replace(" ", "-")
        probe.frame().to_csv(out / f"timeline-{slug}.csv", index=False)
        energy_frame(dev.platform).to_csv(out / f"energy-{slug}.csv", index=False)
        timeline(probe.frame(), out / f"timeline-{slug}.png", f"{dev.spec.title}: dense FP32 on {label}")
    write_manifest(out, cfg, seed=args.seed)
    print(f"{'load':<18} {'GFLOP/s':>8} {'power W':>8} {'GFLOP/J':>8}")
    for r in rows:
        print(f"{r[0]:<18} {r[1]:>8.2f} {r[2]:>8.2f} {r[3]:>8.2f}")
    print(f"wrote {out}/")
    return 0
