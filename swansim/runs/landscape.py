"""Landscapes: latency, energy and power of every execution choice for one model on one device.

One row per execution choice (the paper's prefix choices per cluster, then mixed big+little
sets flagged ``kind=mixed``, then PyTorch's default, the baseline). Each row is a full Device
simulation (fluid scheduler, the device's cpufreq governor - schedutil by default - and
thermal model) from a cool start: warm-up batches, then the mean of the measured batches.
Choices are independent runs and go over a process pool (``jobs``); the numbers do not
depend on it.

Energy is the training's share, like the paper's background-subtracted battery drain: the
platform's energy over a batch minus the idle floor (the device's power with no runnable
thread at the start of the run, screen off) times the batch latency. ``speedup`` and
``energy_vs_baseline`` are relative to the ``default`` row (PyTorch's default).
"""
from __future__ import annotations

from functools import lru_cache

from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import Choice, enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import TrainingJob
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.runs.pool import run_all

COLUMNS = ["choice", "kind", "cores", "threads", "clusters", "latency_s", "energy_j", "power_w", "speedup",
           "energy_vs_baseline"]


def parse_input(text: str) -> tuple[int, int, int]:
    try:
        shape = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise InputError("--input", "input", f"expected CxHxW with positive integers, got {text!r}")
    return shape


def measure(device: str, model, runtime, choice: Choice, mode: str = "train", batches: int = 2,
            warmup: int = 1, catalogue: Catalogue | None = None, config: DeviceConfig | None = None,
            record_layers: bool = False):
    """One choice on a fresh (cool) device: (mean latency s, mean net energy J, the job)."""
    cfg = config or DeviceConfig(device=device)
    dev = Device(cfg, catalogue=catalogue)
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc, model, runtime, choice, mode=mode,
                      n_batches=warmup + batches, record_layers=record_layers)
    dev.env.run(until=job.process)
    dev.sched.sync()
    rows = job.batch_rows[warmup:]
    lat = sum(r[3] for r in rows) / len(rows)
    energy = sum(r[5] for r in rows) / len(rows)
    return lat, energy, job


@lru_cache(maxsize=8)
def _graph(model: str, batch, input_shape, classes, mode: str):
    return build_task(model, batch, input_shape, classes, mode)


def _row(device: str, model: str, runtime: str, mode: str, batch, input_shape, classes, choice: Choice,
         batches: int, warmup: int) -> dict:
    """One landscape row (a pool worker: everything it needs comes by value)."""
    graph = _graph(model, batch, input_shape, classes, mode)
    lat, energy, _ = measure(device, graph, load_runtime(runtime), choice, mode, batches, warmup,
                             _catalogue())
    soc = _catalogue().device(device).soc
    names = sorted({soc.cluster_of(c).name for c in choice.cpus},
                   key=lambda n: [c.name for c in soc.clusters].index(n))
    return {"choice": choice.label, "kind": choice.kind, "cores": len(choice.cpus), "threads": choice.threads,
            "clusters": "+".join(names), "latency_s": lat, "energy_j": energy, "power_w": energy / lat}


@lru_cache(maxsize=1)
def _catalogue() -> Catalogue:
    return Catalogue.load()


def landscape_frame(device: str = "pixel3", model: str = "resnet34", runtime: str = "pytorch",
                    mode: str = "train", batch: int | None = None, classes: int | None = None,
                    input_shape: str | None = None, batches: int = 2, warmup: int = 1,
                    mixed: bool = True, jobs: int | None = 1, progress: bool = False):
    """The landscape as a tidy frame (one row per choice, cost order, baseline last)."""
    import pandas as pd

    soc = _catalogue().device(device).soc
    load_runtime(runtime)   # an unknown runtime fails here, before any work
    shape = parse_input(input_shape) if input_shape else None
    _graph(model, batch, shape, classes, mode)
    choices = enumerate_choices(soc, mixed=mixed) + [pytorch_default(soc)]
    args = [(device, model, runtime, mode, batch, shape, classes, c, batches, warmup) for c in choices]
    rows = run_all(_row, args, jobs, desc=f"landscape {device} {model}", progress=progress,
                   labels=[c.label for c in choices])
    df = pd.DataFrame(rows)
    base = df[df["kind"] == "default"].iloc[0]
    df["speedup"] = base["latency_s"] / df["latency_s"]
    df["energy_vs_baseline"] = df["energy_j"] / base["energy_j"]
    return df[COLUMNS]
