"""`swansim profiles list|show|validate`: the device catalogue."""
from __future__ import annotations

import argparse

from swansim.hw.profile import PROFILE_DIR, Catalogue, validate_paths


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list, show and validate device profiles")
    p.add_argument("--root", default=str(PROFILE_DIR), help="profile directory (default: %(default)s)")
    ps = p.add_subparsers(dest="action", required=True, metavar="action")
    ps.add_parser("list", help="one line per SoC and device").set_defaults(func=_list)
    s = ps.add_parser("show", help="a profile's figures")
    s.add_argument("name")
    s.set_defaults(func=_show)
    v = ps.add_parser("validate", help="validate profile files (default: all)")
    v.add_argument("paths", nargs="*")
    v.set_defaults(func=_validate)


def _list(args) -> int:
    cat = Catalogue.load(args.root)
    print(f"{'name':<16} {'kind':<7} {'cpus':>4}  title")
    for s in cat.socs.values():
        clusters = " + ".join(f"{len(c.cpus)}x{c.uarch}" for c in s.clusters)
        print(f"{s.name:<16} {'soc':<7} {s.n_cpus:>4}  {s.title}: {clusters}")
    for d in cat.devices.values():
        print(f"{d.name:<16} {d.kind:<7} {d.soc.n_cpus:>4}  {d.title} ({d.soc.name})")
    return 0


def _show(args) -> int:
    cat = Catalogue.load(args.root)
    d = cat.device(args.name, "profiles show")
    s = d.soc
    print(f"{d.name}: {d.title} [{d.kind}] - {d.path}")
    print(f"  SoC {s.name}: {s.title}; DRAM {s.dram_bandwidth_gbps} GB/s; L3 {s.l3_kib:.0f} KiB")
    for c in s.clusters:
        derived = " (voltages derived)" if c.voltage_derived else ""
        print(f"  cluster {c.name}: {len(c.cpus)}x {c.uarch} cpus {list(c.cpus)}; "
              f"{c.fmin_mhz:.0f}-{c.fmax_mhz:.0f} MHz in {len(c.opp_freq_mhz)} OPPs{derived}; "
              f"C={c.dyn_power_coeff_uw_mhz_v2:g} uW/MHz/V^2; capacity {c.capacity_dmips_mhz:g}; "
              f"{c.gemm_flop_per_cycle:g} FLOP/cycle")
    t = d.thermal
    trips = ", ".join(f"{tp.temp_c:g} C {tp.kind}" for tp in t.trips)
    print(f"  thermal: {t.governor} on {t.sensor_node}; trips {trips}; polling {t.polling_passive_ms:g}/"
          f"{t.polling_idle_ms:g} ms")
    if d.battery_capacity_mah:
        print(f"  battery: {d.battery_capacity_mah:g} mAh at {d.battery_voltage_v:g} V "
              f"({d.battery_capacity_j / 3600:.2f} Wh)")
    print(f"  display {d.display_refresh_hz:g} Hz; cpusets " + "; ".join(f"{k}={list(v)}" for k, v in d.cpusets.items()))
    return 0


def _validate(args) -> int:
    if args.paths:
        names = validate_paths(args.paths, args.root)
    else:
        cat = Catalogue.load(args.root)
        names = list(cat.socs) + list(cat.devices)
    print(f"ok: {len(names)} profile(s) valid: {', '.join(names)}")
    return 0
