"""User-experience metrics: frames against their deadlines, and task times against running alone.

A frame starts at a vsync (its intended start) and is done when the RenderThread finishes it;
its deadline is one display period after that vsync (16.67 / 11.1 / 8.33 ms at 60 / 90 /
120 Hz). Jank is the share of frames that miss their deadline. Android vitals also counts
*slow* frames (rendering over 16 ms) and *frozen* frames (over 700 ms) whatever the refresh
rate; both are reported. App slowdown is a task's completion time over its time alone.

Everything comes out as tidy pandas frames: one row per frame, per task, per summary group.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

# Android vitals: "slow rendering" is a frame over 16 ms, a "frozen frame" over 700 ms.
SLOW_FRAME_MS = 16.0
FROZEN_FRAME_MS = 700.0
# A frame done within this of its deadline made it (float error of vsync arithmetic).
_DEADLINE_EPS_S = 1e-9

FRAME_COLUMNS = ("app", "vsync_s", "deadline_s", "ui_start_s", "ui_done_s", "render_start_s", "done_s")
TASK_COLUMNS = ("app", "task", "start_s", "end_s", "time_s")


class UxRecorder:
    """Collects frames and task completions as they happen; turns them into frames (pandas)."""

    def __init__(self):
        self.frame_rows: list[tuple] = []
        self.task_rows: list[tuple] = []

    def add_frame(self, app: str, vsync_s: float, period_s: float, ui_start_s: float, ui_done_s: float,
                  render_start_s: float, done_s: float) -> None:
        self.frame_rows.append((app, vsync_s, vsync_s + period_s, ui_start_s, ui_done_s, render_start_s, done_s))

    def add_task(self, app: str, task: str, start_s: float, end_s: float, time_s: float | None = None) -> None:
        """A task ran from ``start_s`` to ``end_s``; ``time_s`` is what it is scored by
        (default: the whole span)."""
        self.task_rows.append((app, task, start_s, end_s, end_s - start_s if time_s is None else time_s))

    def frames(self) -> pd.DataFrame:
        return frame_table(self.frame_rows)

    def tasks(self) -> pd.DataFrame:
        return pd.DataFrame(self.task_rows, columns=list(TASK_COLUMNS))


def frame_table(rows: Sequence[tuple]) -> pd.DataFrame:
    """One row per frame: timings, duration, and whether it was janky, slow or frozen."""
    df = pd.DataFrame(list(rows), columns=list(FRAME_COLUMNS))
    df["duration_ms"] = (df["done_s"] - df["vsync_s"]) * 1e3
    df["janky"] = df["done_s"] > df["deadline_s"] + _DEADLINE_EPS_S
    df["slow"] = df["duration_ms"] > SLOW_FRAME_MS
    df["frozen"] = df["duration_ms"] > FROZEN_FRAME_MS
    return df


def jank_summary(frames: pd.DataFrame, by: str | Sequence[str] | None = "app") -> pd.DataFrame:
    """Per group: frames, jank / slow / frozen shares (%), and duration percentiles (ms)."""
    def one(g: pd.DataFrame) -> pd.Series:
        n = len(g)
        d = g["duration_ms"].to_numpy()
        pct = (lambda col: 100.0 * float(g[col].sum()) / n) if n else (lambda col: np.nan)
        return pd.Series({
            "frames": n, "janky": int(g["janky"].sum()), "jank_pct": pct("janky"), "slow_pct": pct("slow"),
            "frozen_pct": pct("frozen"),
            "p50_ms": float(np.percentile(d, 50)) if n else np.nan,
            "p95_ms": float(np.percentile(d, 95)) if n else np.nan,
            "p99_ms": float(np.percentile(d, 99)) if n else np.nan,
        })

    if by is None:
        return one(frames).to_frame().T.reset_index(drop=True)
    keys = [by] if isinstance(by, str) else list(by)
    rows = [{**dict(zip(keys, k if isinstance(k, tuple) else (k,))), **one(g).to_dict()}
            for k, g in frames.groupby(keys, sort=True)]
    return pd.DataFrame(rows, columns=keys + ["frames", "janky", "jank_pct", "slow_pct", "frozen_pct",
                                              "p50_ms", "p95_ms", "p99_ms"])


def jank_pct(frames: pd.DataFrame) -> float:
    """Share of frames that missed their deadline, in percent (nan without frames)."""
    return 100.0 * float(frames["janky"].mean()) if len(frames) else float("nan")


def slowdown(tasks: pd.DataFrame, alone: pd.DataFrame, on: str | Sequence[str] = "task") -> pd.DataFrame:
    """Completion time of each task group over its time alone (1.0 = unaffected).

    ``tasks`` and ``alone`` are task frames (`UxRecorder.tasks`); times are summed per group.
    """
    keys = [on] if isinstance(on, str) else list(on)
    t = tasks.groupby(keys)["time_s"].sum().rename("time_s")
    a = alone.groupby(keys)["time_s"].sum().rename("alone_s")
    df = pd.concat([t, a], axis=1, join="inner").reset_index()
    df["slowdown"] = df["time_s"] / df["alone_s"]
    return df
