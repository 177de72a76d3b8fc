"""Landscapes: latency, energy and power of every execution choice for one model on one device.

One row per execution choice (the paper's prefix choices per cluster, then mixed big+little
sets flagged ``kind=mixed``, then PyTorch's default as the baseline). Each row is a full
Device simulation (fluid scheduler, the device's cpufreq governor - schedutil by default -
and thermal model) from a cool start: a warm-up batch, then the mean of the measured batches.

Energy is the training's share, like the paper's background-subtracted battery drain: the
platform's energy over a batch minus the idle floor (the device's power with no runnable
thread at the start of the run, screen off) times the batch latency.
"""
from __future__ import annotations

from swansim.device import Device, DeviceConfig
from swansim.dnn.calibrate import SWAN_BATCH, SWAN_WORKLOADS
from swansim.dnn.choices import Choice, enumerate_choices, pytorch_default
from swansim.dnn.models import build_model
from swansim.dnn.runtime import load_runtime
from swansim.dnn.training import TrainingJob
from swansim.errors import InputError
from swansim.hw.profile import Catalogue

COLUMNS = ["choice", "kind", "cores", "threads", "latency_s", "energy_j", "power_w", "speedup",
           "energy_vs_baseline"]


def parse_input(text: str) -> tuple[int, int, int]:
    try:
        shape = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise InputError("--input", "input", f"expected CxHxW with positive integers, got {text!r}")
    return shape


def workload(model: str, batch: int | None, classes: int | None, input_text: str | None, mode: str):
    """The model graph with the Swan workload's defaults (see swansim.dnn.calibrate)."""
    shape, k = SWAN_WORKLOADS.get(model, ((3, 224, 224), 1000))
    shape = parse_input(input_text) if input_text else shape
    batch = batch or (SWAN_BATCH if mode == "train" else 1)
    return build_model(model, batch=batch, input_shape=shape, num_classes=classes or k)


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


def landscape_frame(device: str = "pixel3", model: str = "resnet34", runtime: str = "pytorch",
                    mode: str = "train", batch: int | None = None, classes: int | None = None,
                    input_shape: str | None = None, batches: int = 2, warmup: int = 1,
                    mixed: bool = True):
    """The landscape as a tidy frame (one row per choice, cost order, baseline last)."""
    import pandas as pd

    cat = Catalogue.load()
    soc = cat.device(device).soc
    rt = load_runtime(runtime)
    graph = workload(model, batch, classes, input_shape, mode)
    choices = enumerate_choices(soc, mixed=mixed) + [pytorch_default(soc)]
    rows = []
    for c in choices:
        lat, energy, _ = measure(device, graph, rt, c, mode, batches, warmup, cat)
        rows.append({"choice": c.label, "kind": c.kind, "cores": len(c.cpus), "threads": c.threads,
                     "latency_s": lat, "energy_j": energy, "power_w": energy / lat})
    df = pd.DataFrame(rows)
    base = df[df["kind"] == "default"].iloc[0]
    df["speedup"] = base["latency_s"] / df["latency_s"]
    df["energy_vs_baseline"] = df["energy_j"] / base["energy_j"]
    return df[COLUMNS]
