"""A run as a Chrome/Perfetto JSON trace (Trace Event Format), for ui.perfetto.dev.

Tracks:
- one process per CPU ("cpu4 (big)"), with a thread track per software thread that ran there:
  the training team's threads (slices named by the layer phase the job was in, or "spin" while
  a thread busy-waits at an OpenMP barrier) and the owner's app threads (slices = when they had
  work on that cpu);
- "training": the batches (named by plan), the layer phases as the master ran them, and the
  policy's decisions as instant events;
- "frames": per app, the UI-thread and RenderThread part of every frame (janky ones say so);
- "counters": each cluster's frequency (every change), temperatures, power and battery level
  (sampled).
Within a track slices never overlap (the format wants them nested), so threads sharing a cpu
get a track each under that cpu.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd

from swansim.results import write_bytes

_US = 1e6
PID_TRAINING, PID_FRAMES, PID_COUNTERS, PID_CPU0 = 1, 2, 3, 100


def _meta(pid: int, name: str, tid: int | None = None, sort: int | None = None) -> list[dict]:
    out = [{"ph": "M", "pid": pid, "name": "process_name" if tid is None else "thread_name",
            "args": {"name": name}, **({} if tid is None else {"tid": tid})}]
    if sort is not None and tid is None:
        out.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": sort}})
    return out


def _slice(pid: int, tid: int, name: str, start_s: float, end_s: float, **args) -> dict:
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": start_s * _US,
            "dur": max(0.0, end_s - start_s) * _US, "args": args}


def _counter(name: str, t_s: float, value: float) -> dict:
    return {"ph": "C", "pid": PID_COUNTERS, "name": name, "ts": t_s * _US, "args": {"value": float(value)}}


def trace_events(result) -> list[dict]:
    """The events of a `swansim.session.phone.RunResult` recorded with ``trace_detail``."""
    spec = result.spec
    ev: list[dict] = []
    ev += _meta(PID_TRAINING, "training", sort=0) + _meta(PID_FRAMES, "frames", sort=1)
    ev += _meta(PID_COUNTERS, "counters", sort=2)
    ev += _meta(PID_TRAINING, "batches", 1) + _meta(PID_TRAINING, "layers (master thread)", 2)
    ev += _meta(PID_TRAINING, "policy decisions", 3)
    for k, c in enumerate(spec.soc.clusters):
        for cpu in c.cpus:
            ev += _meta(PID_CPU0 + cpu, f"cpu{cpu} ({c.name})", sort=10 + cpu)

    b = result.batches
    for r in b.itertuples():
        ev.append(_slice(PID_TRAINING, 1, r.plan, r.start_s, r.start_s + r.latency_s, batch=int(r.batch),
                         purpose=r.purpose, latency_s=r.latency_s, energy_j=r.energy_j))
    for r in result.layers.itertuples():
        ev.append(_slice(PID_TRAINING, 2, f"{r.name} {r.phase}", r.start_s, r.end_s, choice=r.choice,
                         batch=int(r.batch)))
    for r in result.decisions.itertuples():
        ev.append({"ph": "i", "s": "t", "pid": PID_TRAINING, "tid": 3, "name": f"{r.kind} {r.plan}",
                   "ts": r.time_s * _US, "args": {"detail": r.detail}})

    tids: dict[tuple[int, str], int] = {}

    def tid_of(cpu: int, thread: str) -> int:
        key = (cpu, thread)
        if key not in tids:
            tids[key] = len(tids) + 1
            ev.extend(_meta(PID_CPU0 + cpu, thread, tids[key]))
        return tids[key]

    cs = result.cpu_slices
    if cs is not None and len(cs):
        cs = cs.sort_values("start_s")
        lay = result.layers.sort_values("start_s")
        starts = lay["start_s"].to_numpy()
        phase = (lay["name"] + " " + lay["phase"]).to_numpy()
        at = np.clip(np.searchsorted(starts, cs["start_s"].to_numpy(), side="right") - 1, 0, None)
        for k, r in enumerate(cs.itertuples()):
            if r.group == "train":
                name = "spin" if r.spinning else (phase[at[k]] if len(phase) else r.thread)
            else:
                name = r.thread
            ev.append(_slice(PID_CPU0 + int(r.cpu), tid_of(int(r.cpu), r.thread), name, r.start_s, r.end_s,
                             group=r.group))

    apps = {a: i for i, a in enumerate(dict.fromkeys(result.frames["app"]))} if len(result.frames) else {}
    for app, i in apps.items():
        ev += _meta(PID_FRAMES, f"{app} UI thread", 2 * i + 1) + _meta(PID_FRAMES, f"{app} RenderThread", 2 * i + 2)
    for r in result.frames.itertuples():
        i, name = apps[r.app], "janky frame" if r.janky else "frame"
        ev.append(_slice(PID_FRAMES, 2 * i + 1, name, r.ui_start_s, r.ui_done_s, vsync_s=r.vsync_s))
        ev.append(_slice(PID_FRAMES, 2 * i + 2, name, r.render_start_s, r.done_s, duration_ms=r.duration_ms))

    for r in result.frequency.itertuples():
        ev.append(_counter(f"freq {r.cluster} (MHz)", r.time_s, r.freq_mhz))
    th_tab = result.thermal
    for col in (c for c in th_tab.columns if c.startswith("temp_")):
        node = col[len("temp_"):-len("_c")]
        ev += [_counter(f"temp {node} (C)", t, v) for t, v in zip(th_tab["time_s"], th_tab[col])]
    pw = result.power
    if len(pw):
        ev += [_counter("power (W)", t, v) for t, v in zip(pw["time_s"], pw["power_w"])]
        if "battery_pct" in pw:
            ev += [_counter("battery (%)", t, v) for t, v in zip(pw["time_s"], pw["battery_pct"])]
    return ev


def write_perfetto(result, path: Path | str) -> Path:
    """Write the trace JSON of ``result`` (a run recorded with ``trace_detail=True``), gzip-
    compressed when ``path`` ends in ``.gz`` (the Perfetto UI opens ``.json.gz`` as it is; the
    JSON of five simulated minutes of a Pixel 3 training ResNet-34 is 129 MB, 11 MB compressed)."""
    if result.cpu_slices is None:
        raise ValueError("the run was recorded without trace_detail")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"traceEvents": trace_events(result), "displayTimeUnit": "ms",
           "metadata": {"swansim": {k: (v if isinstance(v, (int, float, str)) else str(v))
                                    for k, v in result.summary.items()}}}
    text = json.dumps(doc, separators=(",", ":"), default=float).encode()
    if path.suffix == ".gz":
        # mtime 0: the same run gives the same bytes
        write_bytes(path, gzip.compress(text, compresslevel=6, mtime=0))
    else:
        write_bytes(path, text)
    return path


def load_events(path: Path | str) -> pd.DataFrame:
    """A trace file's events as a frame (for tests and quick looks); ``.gz`` is decompressed."""
    data = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        data = gzip.decompress(data)
    return pd.DataFrame(json.loads(data)["traceEvents"])
