"""How far PyTorch's default trails the fastest pinned choice on the paper's five phones, and what
each kernel mechanism and assumed figure moves it (issue 10).

    python experiments/fidelity_sensitivity.py [--out results/fidelity_sensitivity] [--jobs 2]
        [--devices pixel3,...] [--models resnet34,...] [--variants reference,...]

Per phone x Swan task x variant: the batch latency of PyTorch's default (its threads placed by
the phone's kernel), the fastest pinned prefix choice (what Swan picks), their ratio and energy.
Every number is `swansim.batchmodel.simulate_batch` - a landscape row as users see it (batch 16,
one warm-up and two measured batches, schedutil). Variants:

  reference         as profiled: top-app group, the runtime's waiting policy and pools, the
                    phone's WALT tunables and core_ctl
  group=foreground  the training process in the foreground group (a Termux session started
                    while Termux was not on top) - its cpuset and schedtune attributes
  wait=libomp       waiting threads poll for LLVM libomp's KMP_BLOCKTIME (200 ms) before they
                    sleep, instead of the runtime's budget (set so the spin lasts >= 200 ms on
                    every core at its top clock)
  wait=throttled    libgomp's throttled spin count (100 polls, GOMP_SPINCOUNT in the libgomp
                    manual): what a team gets when libgomp manages more threads than the CPUs
                    it found at start (a process pinned before the library loaded)
  wait=libgomp      libgomp's documented spin count with OMP_WAIT_POLICY unset (300,000 polls,
                    GOMP_SPINCOUNT in the libgomp manual) in place of the runtime's fitted count
  wake=wfi          the in-order cores' (A55) wake-up latency at their WFI exit, 43 us (the
                    Pixel 3's cpuidle table: kdrag0n/proton_bluecross sdm845-pm.dtsi, little
                    CPUs' qcom,pm-cpu-level@0 "wfi" latency-us), in place of the fitted 0.7 ms
                    (at its bound, above even their power-collapse exit, 461 us)
  blas=off          no OpenBLAS pool: every GEMM on the calling thread (the runtime's other
                    figures as fitted with the pool)
  blas-threads=4    OpenBLAS's pool capped at 4 threads (OPENBLAS_NUM_THREADS=4, or a build
                    with NUM_THREADS=4) instead of one per CPU of the process
  blas=per-call     each per-sample GEMM call forks and joins the pool, and an OpenMP team's
                    concurrent callers take turns on OpenBLAS's lock (`[blas] per_call`; the
                    runtime's other figures as fitted without it)
  upmigrate=71/65   sched_upmigrate/downmigrate as CAF's sm6150 post_boot writes them
  upmigrate=80/80   mainline's fits_capacity margin (1280/1024) in place of WALT's
  core_ctl=off      every CPU online
  fallback=previous a waking task that fits no CPU keeps its previous one (Android 4.9), or on
                    msm takes the CPU with the most spare capacity only if some is positive: the
                    kernels' own find_best_target fallback (placement walt-prevcpu), not the
                    reference's most spare of any sign, with the periodic balance of busy CPUs
                    that then alone moves a queued task, and idle CPUs balancing in the kernels'
                    order (kernel.walt.WaltPlacement.idle_balance); every row from an idle
                    phone, and on the Pixel 3 that start decides ResNet-34's default (0.50 s a
                    batch, 0.83 s if the big cores are busy as the job starts:
                    experiments/batchmodel_check.py --placement walt-prevcpu)
  kernel=wakeup     the simulator's placement before the phone kernels were modelled
  app=messaging     a light app (messaging) on the screen throughout, every row: the owner's
                    threads waking now and then on any CPU (under the kernels' rules that, not
                    the start, decides where ResNet-34's default settles on the Pixel 3)
  fallback=previous+app=messaging  both

Pinned rows change with the group (its cpuset), the waiting policy and the pools, and may with
the fallback (a pinned choice's BLAS workers are placed within its cores); the other variants
re-run the default row alone (a pinned thread ignores placement and core_ctl).
Writes ``rows.csv`` (every simulated row, appended as runs finish: an interrupted run resumes;
``rows.fingerprint`` names the code and profiles that computed them, and rows from others are
refused, not mixed in),
``sensitivity.csv`` (one row per phone, task, variant) and ``sensitivity.png``.
"""
from __future__ import annotations

import csv
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from swansim.batchmodel import BatchKey, code_fingerprint, simulate_batch
from swansim.cli import Parser, guarded
from swansim.errors import InputError
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime, with_blas, with_paths
from swansim.dnn.tasks import SWAN_TASKS
from swansim.hw.profile import SWAN_PHONES, Catalogue, DeviceSpec
from swansim.pool import run_all

VARIANTS = ("reference", "group=foreground", "wait=libomp", "wait=throttled", "wait=libgomp", "wake=wfi",
            "blas-threads=4", "blas=off", "blas=per-call", "upmigrate=71/65", "upmigrate=80/80", "core_ctl=off",
            "fallback=previous", "kernel=wakeup", "app=messaging", "fallback=previous+app=messaging")
# which variants change the pinned rows (the others re-run the default row only)
REDO_PINNED = ("group=foreground", "wait=libomp", "wait=throttled", "wait=libgomp", "wake=wfi", "blas-threads=4",
               "blas=off", "blas=per-call", "fallback=previous", "app=messaging", "fallback=previous+app=messaging")
KMP_BLOCKTIME_S = 0.2     # LLVM libomp's default KMP_BLOCKTIME (openmp.llvm.org runtime docs)
GOMP_THROTTLED_SPINS = 100   # libgomp manual, GOMP_SPINCOUNT: OMP_WAIT_POLICY unset, threads > CPUs
GOMP_DEFAULT_SPINS = 300_000  # libgomp manual, GOMP_SPINCOUNT: OMP_WAIT_POLICY unset
A55_WFI_EXIT_S = 43e-6    # sdm845-pm.dtsi (kdrag0n/proton_bluecross): little CPUs' "wfi" level, latency-us 43
ROW_FIELDS = ["device", "model", "variant", "choice", "kind", "latency_s", "energy_j"]


@lru_cache(maxsize=1)
def _catalogue() -> Catalogue:
    return Catalogue.load()


def _runtime(variant: str, cat: Catalogue):
    rt = load_runtime("pytorch")
    if variant == "wait=throttled":
        return replace(rt, spin_iterations=GOMP_THROTTLED_SPINS)
    if variant == "wait=libgomp":
        return replace(rt, spin_iterations=GOMP_DEFAULT_SPINS)
    if variant == "wake=wfi":
        return with_paths(rt, {"family.inorder.wake_latency_s": A55_WFI_EXIT_S})
    if variant == "blas-threads=4":
        return with_blas(rt, max_threads=4)
    if variant == "blas=off":
        return with_blas(rt, enabled=False)
    if variant == "blas=per-call":
        return with_blas(rt, per_call=True)
    if variant != "wait=libomp":
        return rt
    f_hz = max(c.fmax_mhz for s in cat.socs.values() for c in s.clusters) * 1e6
    cycles = min(f.spin_iteration_cycles for f in rt.family.values())
    return replace(rt, spin_iterations=KMP_BLOCKTIME_S * f_hz / cycles)


def _spec(variant: str, spec: DeviceSpec) -> DeviceSpec:
    k = spec.kernel
    if variant.startswith("upmigrate=") and k is not None:
        up, down = (float(x) for x in variant.split("=")[1].split("/"))
        n = len(k.upmigrate_pct)
        spec = replace(spec, kernel=replace(k, upmigrate_pct=(up,) * n, downmigrate_pct=(down,) * n))
    return spec


def _key(spec: DeviceSpec, model: str, variant: str, choice) -> BatchKey:
    settings = variant.split("+")   # a variant of several settings joins them with "+"
    placement = next((p for s, p in (("core_ctl=off", "walt-nocorectl"), ("fallback=previous", "walt-prevcpu"),
                                     ("kernel=wakeup", "wakeup")) if s in settings), "auto")
    if placement.startswith("walt-") and spec.kernel is None:
        placement = "auto"
    group = "foreground" if "group=foreground" in settings else "top_app"
    app = "messaging" if "app=messaging" in settings else None
    return BatchKey(spec.name, model, choice, placement=placement, group=group, foreground=app, batches=2,
                    warmup=1)


def simulate_row(device: str, model: str, variant: str, label: str) -> dict:
    """One row (a pool worker): the batch of ``label`` ("default" or a pinned choice)."""
    cat = _catalogue()
    spec = cat.device(device)
    soc = spec.soc
    choice = pytorch_default(soc) if label == "default" else next(
        c for c in enumerate_choices(soc, mixed=False) if c.label == label)
    cost = simulate_batch(_key(spec, model, variant, choice), runtime=_runtime(variant, cat),
                          spec=_spec(variant, spec), record_layers=False)
    return {"device": device, "model": model, "variant": variant, "choice": label, "kind": choice.kind,
            "latency_s": cost.latency_s, "energy_j": cost.net_energy_j}


def plan(devices, models, variants, cat: Catalogue) -> list[tuple[str, str, str, str]]:
    out = []
    for d in devices:
        pinned = [c.label for c in enumerate_choices(cat.device(d).soc, mixed=False)]
        for m in models:
            for v in variants:
                labels = ["default"] + (pinned if v in ("reference",) + REDO_PINNED else [])
                out += [(d, m, v, label) for label in labels]
    return out


def summarise(rows: list[dict], variants) -> list[dict]:
    """Per phone, task and variant: the default against the fastest pinned choice."""
    by = {}
    for r in rows:
        by.setdefault((r["device"], r["model"]), {}).setdefault(r["variant"], {})[r["choice"]] = r
    out = []
    for (d, m), vs in by.items():
        ref = vs.get("reference", {})
        for v in variants:
            if v not in vs or "default" not in vs[v]:
                continue
            pinned = {k: r for k, r in (vs[v] if v in ("reference",) + REDO_PINNED else ref).items() if k != "default"}
            if not pinned:
                continue
            best = min(pinned.values(), key=lambda r: float(r["latency_s"]))
            dflt = vs[v]["default"]
            out.append({"device": d, "model": m, "variant": v,
                        "default_s": float(dflt["latency_s"]), "best_choice": best["choice"],
                        "best_s": float(best["latency_s"]),
                        "default_over_best": float(dflt["latency_s"]) / float(best["latency_s"]),
                        "best_energy_vs_default": float(best["energy_j"]) / float(dflt["energy_j"])})
    return out


def plot(summary: list[dict], path: Path, variants) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cases = list(dict.fromkeys((r["device"], r["model"]) for r in summary))
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(cases)), 4.5))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        vals = {(r["device"], r["model"]): r["default_over_best"] for r in summary if r["variant"] == v}
        ax.bar(np.arange(len(cases)) + (i - len(variants) / 2 + 0.5) * width,
               [vals.get(c, np.nan) for c in cases], width, label=v)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("default latency / fastest pinned choice")
    ax.set_xticks(np.arange(len(cases)))
    ax.set_xticklabels([f"{d}\n{m.split('_')[0]}" for d, m in cases], fontsize=7)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("PyTorch's default vs Swan's fastest pinned choice (batch 16), per kernel mechanism")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/fidelity_sensitivity")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--devices", default=",".join(SWAN_PHONES))
    p.add_argument("--models", default=",".join(SWAN_TASKS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args(argv)
    cat = _catalogue()
    devices, models, variants = (args.devices.split(","), args.models.split(","), args.variants.split(","))
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    for d in devices:
        cat.device(d)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "rows.csv"
    stamp, fingerprint = out / "rows.fingerprint", code_fingerprint()
    if rows_path.exists() and (not stamp.exists() or stamp.read_text().strip() != fingerprint):
        raise InputError(str(rows_path), "fingerprint", "computed by other code or profiles than these; "
                         "remove it (or pass another --out) to start again")
    stamp.write_text(fingerprint + "\n")
    rows = list(csv.DictReader(open(rows_path))) if rows_path.exists() else []
    done = {(r["device"], r["model"], r["variant"], r["choice"]) for r in rows}
    todo = [a for a in plan(devices, models, variants, cat) if a not in done]
    new_file = not rows_path.exists()
    with open(rows_path, "a", newline="") as fh:
        w = csv.DictWriter(fh, ROW_FIELDS)
        if new_file:
            w.writeheader()

        def keep(_i, row):
            w.writerow(row)
            fh.flush()
            rows.append(row)

        run_all(simulate_row, todo, args.jobs, desc="fidelity sensitivity", on_result=keep)
    summary = summarise(rows, [v for v in VARIANTS if v in variants])
    with open(out / "sensitivity.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    plot(summary, out / "sensitivity.png", [v for v in VARIANTS if v in variants])
    vw = max(len("variant"), *(len(v) for v in variants))
    print(f"{'device':<14} {'model':<19} {'variant':<{vw}} {'default s':>9} {'best':>6} {'best s':>7} "
          f"{'default/best':>12} {'E best/dflt':>11}")
    for r in summary:
        print(f"{r['device']:<14} {r['model']:<19} {r['variant']:<{vw}} {r['default_s']:>9.3f} {r['best_choice']:>6} "
              f"{r['best_s']:>7.3f} {r['default_over_best']:>12.2f} {r['best_energy_vs_default']:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "fidelity_sensitivity.py"))
