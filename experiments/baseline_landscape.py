"""PyTorch's default against the best pinned choice, on the Swan paper's five phones and three tasks.

Per phone and task, one landscape (`swansim.runs.landscape`, pinned choices only: the paper's
prefixes per core type, no mixed sets) and PyTorch's default row (as many threads as big cores, no
affinity, placed by the phone's kernel). Prints and plots the default's latency and energy per
batch over the best pinned choice's: the fastest choice for latency, the least-energy choice for
energy. Above 1: the default is that many times slower (or costlier). Writes ``baseline.csv``
and ``baseline.png`` under ``--out``.

The pytorch runtime runs its BLAS pool (OpenBLAS's pthreads server, `[blas]` in
dnn/runtimes/pytorch.toml); ``--no-blas`` takes it out (the runtime's other figures as fitted
with it), ``--blas-spin-s``, ``--blas-pool`` and ``--blas-per-call`` (each per-sample GEMM call
pays the pool's fork and join and the lock's turns: `[blas] per_call`, not refitted) vary its
assumptions, ``--group`` the training
process's Android group. ``--nnpack`` runs convolutions as PyTorch v1.8.1 does at a batch of 16
(`[nnpack]`: NNPACK's pool forward, the backward serial), with the other figures as fitted
without it.

    .venv/bin/python experiments/baseline_landscape.py [--jobs 2] [--out results/baseline]
        [--no-blas | [--blas-spin-s 0.109] [--blas-pool choice|process] [--blas-per-call]] [--nnpack]
        [--group top_app|foreground]
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.batchmodel import BatchKey, simulate_batch
from swansim.cli import Parser, guarded
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime, with_blas, with_nnpack
from swansim.dnn.tasks import SWAN_TASKS
from swansim.hw.profile import SWAN_PHONES, Catalogue
from swansim.pool import run_all
from swansim.runs.landscape import landscape_frame

MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")


def _cost(key: BatchKey, blas: dict | None, nnpack: bool = False) -> tuple[float, float]:
    """(latency, energy) of one landscape row, the runtime's BLAS pool changed by ``blas``,
    with NNPACK's convolutions if ``nnpack``."""
    rt = load_runtime(key.runtime)
    if blas:
        rt = with_blas(rt, **blas)
    if nnpack:
        rt = with_nnpack(rt, enabled=True)
    c = simulate_batch(key, runtime=rt if blas or nnpack else None, record_layers=False)
    return c.latency_s, c.net_energy_j


def landscape(device: str, model: str, jobs: int | None, blas: dict | None, group: str,
              nnpack: bool = False) -> pd.DataFrame:
    """The pinned choices and the default, as `landscape_frame` rows (a runtime variant needs
    its runtime passed on, which a named landscape does not)."""
    if not blas and not nnpack and group == "top_app":
        return landscape_frame(device, model, mixed=False, jobs=jobs)
    soc = Catalogue.load().device(device).soc
    choices = enumerate_choices(soc, mixed=False) + [pytorch_default(soc)]
    keys = [BatchKey(device, model, c, group=group) for c in choices]
    costs = run_all(_cost, [(k, blas, nnpack) for k in keys], jobs, desc=f"{device} {model}", progress=False)
    return pd.DataFrame({"choice": [c.label for c in choices], "kind": [c.kind for c in choices],
                         "latency_s": [c[0] for c in costs], "energy_j": [c[1] for c in costs]})


def gaps(device: str, model: str, jobs: int | None, blas: dict | None = None, group: str = "top_app",
         nnpack: bool = False) -> dict:
    """The default's latency and energy over the best pinned choice's, for one landscape."""
    df = landscape(device, model, jobs, blas, group, nnpack)
    default = df[df["kind"] == "default"].iloc[0]
    pinned = df[df["kind"] != "default"]
    fast = pinned.loc[pinned["latency_s"].idxmin()]
    thrifty = pinned.loc[pinned["energy_j"].idxmin()]
    return {"device": device, "model": model,
            "default_latency_s": default["latency_s"], "best_choice": fast["choice"], "best_latency_s": fast["latency_s"],
            "latency_gap": default["latency_s"] / fast["latency_s"],
            "default_energy_j": default["energy_j"], "least_energy_choice": thrifty["choice"],
            "least_energy_j": thrifty["energy_j"], "energy_gap": default["energy_j"] / thrifty["energy_j"]}


def plot(table: pd.DataFrame, path: Path, devices, models) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=False)
    width = 0.8 / len(models)
    for ax, col, label in zip(axes, ("latency_gap", "energy_gap"),
                              ("default latency / fastest pinned choice's (ratio)",
                               "default energy / least-energy pinned choice's (ratio)")):
        for j, model in enumerate(models):
            sub = table[table["model"] == model].set_index("device").reindex(devices)
            xs = [i + (j - (len(models) - 1) / 2) * width for i in range(len(devices))]
            bars = ax.bar(xs, sub[col], width, label=model)
            for b, v in zip(bars, sub[col]):
                ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                            va="bottom", fontsize=6)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(devices)), devices, fontsize=8)
        ax.set_xlabel("phone")
        ax.set_ylabel(label, fontsize=8)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("PyTorch's default (threads = big cores, unpinned) against the best pinned choice, per batch")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default="results/baseline")
    ap.add_argument("--no-blas", action="store_true", help="the pytorch runtime without its BLAS pool")
    ap.add_argument("--blas-spin-s", type=float, default=None, help="its workers' spin before they sleep")
    ap.add_argument("--blas-pool", choices=("choice", "process"), default=None, help="a pinned choice's pool")
    ap.add_argument("--blas-per-call", action="store_true",
                    help="each per-sample GEMM call pays the pool's fork and join and the lock's turns")
    ap.add_argument("--nnpack", action="store_true",
                    help="convolutions on NNPACK as PyTorch v1.8.1 runs a batch of 16 (the runtime not refitted)")
    ap.add_argument("--group", default="top_app", help="the training process's Android group")
    ap.add_argument("--devices", default=",".join(SWAN_PHONES))
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    devices = checks.names(checks.listed(args.devices), "--devices", Catalogue.load().devices, "profile")
    models = checks.names(checks.listed(args.models), "--models", SWAN_TASKS, "task")
    out = checks.out_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    blas = {"enabled": False} if args.no_blas else {}
    if args.blas_spin_s is not None:
        blas["spin_s"] = args.blas_spin_s
    if args.blas_pool is not None:
        blas["pinned_pool"] = args.blas_pool
    if args.blas_per_call:
        blas["per_call"] = True
    blas = blas or None
    table = pd.DataFrame([gaps(d, m, args.jobs, blas, args.group, args.nnpack) for d in devices for m in models])
    table.to_csv(out / "baseline.csv", index=False)
    plot(table, out / "baseline.png", devices, models)
    for col in ("latency_gap", "energy_gap"):
        print(f"\n{col} (default / best pinned):")
        print(table.pivot(index="device", columns="model", values=col).reindex(list(devices))[list(models)]
              .to_string(float_format=lambda x: f"{x:.2f}"))
    print(f"\nwrote {out}/baseline.csv and baseline.png")


if __name__ == "__main__":
    sys.exit(guarded(main, "baseline_landscape.py"))
