"""Figures from tidy frames. Matplotlib with the Agg backend: no display needed."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def timeline(df: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Power, temperatures and frequencies against time, from a `TimelineProbe` frame."""
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    t = df["time_s"]
    axes[0].plot(t, df["power_w"], lw=1)
    axes[0].set_ylabel("power (W)")
    for col in (c for c in df.columns if c.startswith("temp_")):
        axes[1].plot(t, df[col], lw=1, label=col[5:-2])
    axes[1].set_ylabel("temperature (C)")
    axes[1].legend(fontsize=7, ncol=3)
    for col in (c for c in df.columns if c.startswith("freq_")):
        axes[2].step(t, df[col], lw=1, where="post", label=col[5:-4])
    axes[2].set_ylabel("frequency (MHz)")
    axes[2].set_xlabel("time (s)")
    axes[2].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def landscape_bars(frames: dict[str, pd.DataFrame], path: Path, paper: pd.DataFrame | None = None,
                   title: str = "") -> Path:
    """Latency, energy and power per execution choice, each normalised to the worst choice.

    ``frames``: model -> landscape frame. ``paper``: optional tidy frame (model, metric, choice,
    value) of published normalised figures, drawn as black ticks over the bars.
    """
    metrics = ("latency_s", "energy_j", "power_w")
    fig, axes = plt.subplots(len(frames), 1, figsize=(10, 3.2 * len(frames)), squeeze=False)
    for ax, (model, df) in zip(axes[:, 0], frames.items()):
        df = df[df["kind"] != "default"].reset_index(drop=True)
        width = 0.8 / len(metrics)
        for i, m in enumerate(metrics):
            x = [j + (i - 1) * width for j in range(len(df))]
            ax.bar(x, df[m] / df[m].max(), width, label=m.rsplit("_", 1)[0])
            if paper is not None:
                ref = paper[(paper["model"] == model) & (paper["metric"] == m.rsplit("_", 1)[0])]
                for _, r in ref.iterrows():
                    hit = df.index[df["choice"] == str(r["choice"])]
                    if len(hit):
                        # the paper normalises to its worst plotted choice: rescale ours alike
                        plotted = df[df["choice"].isin(ref["choice"].astype(str))][m]
                        ax.plot(hit[0] + (i - 1) * width, r["value"] * plotted.max() / df[m].max(), "k_",
                                ms=12, mew=2)
        ax.set_xticks(range(len(df)))
        ax.set_xticklabels(df["choice"], rotation=0, fontsize=8)
        ax.set_ylabel(f"{model}\n(normalised)")
        ax.legend(fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("execution choice (cpu ids); black ticks: Swan paper Fig. 2")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
