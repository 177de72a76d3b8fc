"""PyTorch's default against the best pinned choice, on the Swan paper's five phones and three tasks.

Per phone and task, one landscape (`swansim.runs.landscape`, pinned choices only: the paper's
prefixes per core type, no mixed sets) and PyTorch's default row (as many threads as big cores, no
affinity, placed by the phone's kernel). Prints and plots the default's latency and energy per
batch over the best pinned choice's: the fastest choice for latency, the least-energy choice for
energy. Above 1: the default is that many times slower (or costlier). Writes ``baseline.csv``
and ``baseline.png`` under ``--out``.

    .venv/bin/python experiments/baseline_landscape.py [--jobs 2] [--out results/baseline]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from swansim.runs.landscape import landscape_frame

DEVICES = ("pixel3", "galaxy-s10e", "galaxy-tab-s6", "oneplus8", "mi10")
MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")


def gaps(device: str, model: str, jobs: int | None) -> dict:
    """The default's latency and energy over the best pinned choice's, for one landscape."""
    df = landscape_frame(device, model, mixed=False, jobs=jobs)
    default = df[df["kind"] == "default"].iloc[0]
    pinned = df[df["kind"] != "default"]
    fast = pinned.loc[pinned["latency_s"].idxmin()]
    thrifty = pinned.loc[pinned["energy_j"].idxmin()]
    return {"device": device, "model": model,
            "default_latency_s": default["latency_s"], "best_choice": fast["choice"], "best_latency_s": fast["latency_s"],
            "latency_gap": default["latency_s"] / fast["latency_s"],
            "default_energy_j": default["energy_j"], "least_energy_choice": thrifty["choice"],
            "least_energy_j": thrifty["energy_j"], "energy_gap": default["energy_j"] / thrifty["energy_j"]}


def plot(table: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=False)
    devices = list(dict.fromkeys(table["device"]))
    width = 0.8 / len(MODELS)
    for ax, col, label in zip(axes, ("latency_gap", "energy_gap"),
                              ("default latency / fastest pinned choice's (ratio)",
                               "default energy / least-energy pinned choice's (ratio)")):
        for j, model in enumerate(MODELS):
            sub = table[table["model"] == model].set_index("device").reindex(devices)
            xs = [i + (j - (len(MODELS) - 1) / 2) * width for i in range(len(devices))]
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default="results/baseline")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame([gaps(d, m, args.jobs) for d in DEVICES for m in MODELS])
    table.to_csv(out / "baseline.csv", index=False)
    plot(table, out / "baseline.png")
    for col in ("latency_gap", "energy_gap"):
        print(f"\n{col} (default / best pinned):")
        print(table.pivot(index="device", columns="model", values=col).reindex(DEVICES)[list(MODELS)]
              .to_string(float_format=lambda x: f"{x:.2f}"))
    print(f"\nwrote {out}/baseline.csv and baseline.png")


if __name__ == "__main__":
    main()
