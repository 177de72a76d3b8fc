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
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
