"""The batch model against the full simulation, on every calibration point and over 200 batches.

1. Every calibration point - Swan Fig. 2a/2b (Pixel 3, every choice, schedutil), the ncnn
   benchmark rows (performance governor) - and the Fig. 2 choices under a thermal cap: the
   memoised batch (`simulate_batch`: temperatures held at ambient, no thermal governor) against
   the same batch fully simulated on a phone whose temperatures move (a fresh phone, a warm-up
   batch, then the measured one). Prints the largest latency and energy disagreement.
2. Fast-forward: a warm Pixel 3 after dense load, then 100 batches of ResNet-34 with PyTorch's
   default and 100 of ShuffleNetV2-x2 on one big core, fully simulated and fast-forwarded: total
   time, energy and final temperatures, the cap changes on the way (by whom), the CPU speed-up
   and the memo's hit rate. Three rooms: 35 C after two minutes of load (the kernel zone's caps
   move on the hot junction), 33 C after five (the thermal engine's caps move on the skin), and
   25 C from cold (the phone heats to the kernel zone's trip point while it trains). Not checked
   here: a job without a steady batch, whose power swings within a batch and whose latency
   varies between them (MobileNetV2's default on a warm Pixel 3: tests/test_batchmodel.py,
   within 2% in time).
3. Start states: each Swan task's PyTorch default on the Pixel 3, its steady batch from a job
   started on an idle phone against one started while, or just after, dense work held the big
   cores (`swansim.runs.placement.start_state_latency_s`), with the screen off and with a
   light app on it (messaging) from the start. Fast-forward costs every job's batches from an
   idle phone's; the spread says how far a batch's cost depends on what the phone was doing
   when its job began, and the app whether the owner's own activity decides it instead.

``--placement NAME`` runs every check under another placement (e.g. walt-prevcpu, the kernels'
own rules; the ncnn rows keep the phones' own).

Run: python experiments/batchmodel_check.py [--jobs 2] [--batches 100] [--placement auto] [--out results/batchmodel]
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.batchmodel import BatchKey, check_fast_forward, simulate_batch
from swansim.cli import Parser, guarded
from swansim.device import Device, DeviceConfig
from swansim.dnn import calibrate as cal
from swansim.dnn.choices import parse_choice, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import SWAN_TASKS, build_task
from swansim.dnn.training import TrainingJob
from swansim.hw.profile import Catalogue
from swansim.kernel.placement import AUTO, PLACEMENTS
from swansim.runs.calibration import Fig2, Ncnn
from swansim.runs.placement import start_state_latency_s
from swansim.pool import run_all
from swansim.session.workloads import SustainedGemm


def full_batch(key: BatchKey) -> tuple[float, float]:
    """The batch of ``key`` on a phone as users run it: thermal zone on, temperatures moving,
    the key's caps imposed as the only cap (no thermal governor changes them)."""
    dev = Device(Catalogue.load().device(key.device),
                 DeviceConfig(governor=key.governor, placement=key.placement,
                              thermal_governor="off" if key.caps_mhz else None))
    if key.caps_mhz:
        dev.set_caps(key.caps_mhz)
    floor = dev.platform.total_power_w
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc,
                      build_task(key.model, key.batch, key.input_shape, key.num_classes, key.mode),
                      load_runtime(key.runtime), key.plan, mode=key.mode, n_batches=key.warmup + key.batches,
                      idle_floor_w=floor, record_layers=False, cpuset=dev.spec.cpuset(key.group), cgroup=key.group)
    dev.env.run(until=job.process)
    rows = job.batch_rows[key.warmup:]
    return sum(r[3] for r in rows) / len(rows), sum(r[5] for r in rows) / len(rows)


def memo_batch(key: BatchKey) -> tuple[float, float]:
    c = simulate_batch(key, record_layers=False)
    return c.latency_s, c.net_energy_j


def agreement(jobs, placement: str = AUTO) -> pd.DataFrame:
    cat = Catalogue.load()
    fig2 = Fig2(cat, placement=placement)
    ncnn = Ncnn(cat, cal.read_ncnn(cat))
    mid = tuple(c.opp_freq_mhz[len(c.opp_freq_mhz) // 2] for c in cat.device("pixel3").soc.clusters)
    points = ([("Fig. 2 (schedutil)", k) for k in fig2.keys] + [("ncnn rows (performance)", k) for k in ncnn.keys]
              + [("Fig. 2, capped at mid OPPs", replace(k, caps_mhz=mid)) for k in fig2.keys])
    keys = [(k,) for _, k in points]
    memo = run_all(memo_batch, keys, jobs, desc="batch model")
    full = run_all(full_batch, keys, jobs, desc="full simulation")
    rows = []
    for (where, k), (ml, me), (fl, fe) in zip(points, memo, full):
        rows.append({"set": where, "device": k.device, "model": k.model, "choice": k.plan.label,
                     "latency_error_pct": 100 * (ml / fl - 1), "energy_error_pct": 100 * (me / fe - 1)})
    return pd.DataFrame(rows)


# (room C, seconds of dense load before the batches): who throttles during them
ROOMS = {"kernel zone": (35.0, 120.0), "thermal engine": (33.0, 300.0), "kernel zone, from cold": (25.0, 0.0)}


def fast_forward(n: int, ambient_c: float, preheat_s: float, placement: str = AUTO) -> dict:
    cfg = DeviceConfig(ambient_c=ambient_c, placement=placement)
    spec = Catalogue.load().device("pixel3")
    soc = spec.soc
    jobs = [("resnet34", pytorch_default(soc), n), ("shufflenet_v2_x2_0", parse_choice("4", soc), n)]

    def preheated():
        d = Device(spec, cfg)
        if preheat_s > 0:
            SustainedGemm(d, list(d.spec.soc.big_cpus), preheat_s, 5e9)
            d.run(preheat_s)
        return d

    c = check_fast_forward(preheated, jobs, placement=placement)
    full, ff, (t0, e0, c0), (u0, f0, d0) = c.full, c.ff, c.full_start, c.ff_start
    out = {"batches": 2 * n, "full_time_s": full.env.now - t0, "ff_time_s": ff.env.now - u0,
           "full_energy_j": full.platform.total_energy_j - e0, "ff_energy_j": ff.platform.total_energy_j - f0,
           "full_cap_changes": len(full.thermal.cap_log) - c0, "ff_cap_changes": len(ff.thermal.cap_log) - d0,
           "full_engine_cap_changes": sum(x.party == "engine" for x in full.thermal.cap_log[c0:]),
           "ff_engine_cap_changes": sum(x.party == "engine" for x in ff.thermal.cap_log[d0:]),
           "cpu_speedup": c.full_cpu_s / c.ff_cpu_s, "memo_hit_rate": c.memo.hit_rate, "memo_misses": c.memo.misses}
    for node, a, b in zip(full.platform.thermal.nodes, full.platform.thermal.temp_c, ff.platform.thermal.temp_c):
        out[f"full_{node}_c"], out[f"ff_{node}_c"] = float(a), float(b)
    return out


# (seconds the big cores run dense work from the start, when the job starts): the job starts
# while the work holds them, just as it ends, and with the work
START_STATES = ((2.2, 2.0), (2.0, 2.0), (1.0, 0.0))


# the owner's app on the screen throughout (None: screen off): a light one, whose threads wake
# now and then on any CPU
START_APPS = (None, "messaging")


def start_states(model: str, placement: str, app: str | None) -> dict:
    spec = Catalogue.load().device("pixel3")
    key = BatchKey(spec.name, model, pytorch_default(spec.soc), placement=placement, foreground=app, warmup=2,
                   batches=3)
    lat = {"idle phone": start_state_latency_s(key)}
    for loaded_s, start_s in START_STATES:
        lat[f"busy 0-{loaded_s:g} s, job at {start_s:g} s"] = start_state_latency_s(key, loaded_s, start_s)
    spread_pct = 100 * (max(lat.values()) - min(lat.values())) / lat["idle phone"]
    return {"model": model, "app": app or "none", **lat, "spread_pct": spread_pct}


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--placement", default=AUTO, help="the phones' thread placement (default: %(default)s)")
    ap.add_argument("--out", default="results/batchmodel")
    args = ap.parse_args(argv)
    checks.one_of(args.placement, "--placement", (AUTO, *PLACEMENTS), "placement")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = agreement(args.jobs, args.placement)
    df.to_csv(out / "agreement.csv", index=False)
    worst = df.assign(lat=df["latency_error_pct"].abs(), en=df["energy_error_pct"].abs()).groupby("set").agg(
        points=("lat", "size"), worst_latency_pct=("lat", "max"), worst_energy_pct=("en", "max"))
    print(worst.to_string(float_format=lambda x: f"{x:.2f}"))
    rows = [{"throttled_by": who, "ambient_c": room, "preheat_s": pre,
             **fast_forward(args.batches, room, pre, args.placement)} for who, (room, pre) in ROOMS.items()]
    pd.DataFrame(rows).to_csv(out / "fastforward.csv", index=False)
    print(pd.DataFrame(rows).set_index("throttled_by").T.to_string(float_format=lambda x: f"{x:.4g}"))
    starts = pd.DataFrame(run_all(start_states, [(m, args.placement, a) for a in START_APPS for m in SWAN_TASKS],
                                  args.jobs, desc="start states"))
    starts.to_csv(out / "start_states.csv", index=False)
    print("\nsteady batch (s) of PyTorch's default on the Pixel 3 by the phone's state when its job began")
    print(starts.set_index(["model", "app"]).to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    sys.exit(guarded(main, "batchmodel_check.py"))
