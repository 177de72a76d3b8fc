"""Landscapes: latency, energy and power of every execution choice for one model on one device.

One row per execution choice (the paper's prefix choices per capacity tier, then mixed
big+little sets flagged ``kind=mixed``, then PyTorch's default, the baseline). ``kind`` says what
the cores are (`dnn.choices.enumerate_choices`: little, big, prime - a prime core is one whose
capacity stands above the rest, not merely a separate frequency domain - mixed, default);
``clusters`` names the profile's clusters the choice uses. Each row is the batch
model's `simulate_batch` - the full device simulation (fluid scheduler, the cpufreq governor,
schedutil by default) of a cool phone, warm-up batches, then the mean of the measured ones:
the very numbers the calibration fits. Choices are independent runs and go over a process
pool (``jobs``); the numbers do not depend on it.

Energy is the training's share, like the paper's background-subtracted battery drain: the
platform's energy over a batch minus the idle floor (the device's power with no runnable
thread, screen off) times the batch latency. ``speedup`` and ``energy_vs_baseline`` are
relative to the ``default`` row, PyTorch's default (as many threads as big cores, no
affinity, placed by the phone's kernel), named in every row's ``baseline`` column:
``speedup`` = default latency / the row's latency (above 1: faster than the default),
``energy_vs_baseline`` = the row's energy / the default's (below 1: less energy). The training
process sits in Android group ``group`` (default top-app, see runs.scenarios.TrainingBackground).
"""
from __future__ import annotations

from functools import lru_cache

from swansim.batchmodel import BatchKey, simulate_batch
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import build_task
from swansim.errors import InputError
from swansim.hw.profile import ANDROID_GROUPS, TOP_APP, Catalogue
from swansim.runs.pool import run_all

COLUMNS = ["choice", "kind", "cores", "threads", "clusters", "latency_s", "energy_j", "power_w", "speedup",
           "energy_vs_baseline", "baseline"]


def parse_input(text: str) -> tuple[int, int, int]:
    try:
        shape = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise InputError("--input", "input", f"expected CxHxW with positive integers, got {text!r}")
    return shape


def _row(key: BatchKey) -> dict:
    """One landscape row (a pool worker)."""
    cost = simulate_batch(key, record_layers=False)
    soc = _catalogue().device(key.device).soc
    c = key.plan
    names = [cl.name for cl in soc.clusters if set(cl.cpus) & set(c.cpus)]
    return {"choice": c.label, "kind": c.kind, "cores": len(c.cpus), "threads": c.threads,
            "clusters": "+".join(names), "latency_s": cost.latency_s, "energy_j": cost.net_energy_j,
            "power_w": cost.net_energy_j / cost.latency_s}


@lru_cache(maxsize=1)
def _catalogue() -> Catalogue:
    return Catalogue.load()


def landscape_frame(device: str = "pixel3", model: str = "resnet34", runtime: str = "pytorch",
                    mode: str = "train", batch: int | None = None, classes: int | None = None,
                    input_shape: str | None = None, batches: int = 2, warmup: int = 1,
                    mixed: bool = True, jobs: int | None = 1, progress: bool = False,
                    governor: str = "schedutil", group: str = TOP_APP):
    """The landscape as a tidy frame (one row per choice, cost order, baseline last)."""
    import pandas as pd

    soc = _catalogue().device(device).soc
    load_runtime(runtime)   # an unknown runtime fails here, before any work
    shape = parse_input(input_shape) if input_shape else None
    build_task(model, batch, shape, classes, mode)
    choices = enumerate_choices(soc, mixed=mixed) + [pytorch_default(soc)]
    if group not in ANDROID_GROUPS:
        raise InputError("--group", "group", f"{group!r} is not one of {', '.join(ANDROID_GROUPS)}")
    keys = [BatchKey(device, model, c, runtime=runtime, governor=governor, mode=mode, batch=batch,
                     input_shape=shape, num_classes=classes, batches=batches, warmup=warmup, group=group)
            for c in choices]
    rows = run_all(_row, [(k,) for k in keys], jobs, desc=f"landscape {device} {model}", progress=progress,
                   labels=[c.label for c in choices])
    df = pd.DataFrame(rows)
    base = df[df["kind"] == "default"].iloc[0]
    df["speedup"] = base["latency_s"] / df["latency_s"]
    df["energy_vs_baseline"] = df["energy_j"] / base["energy_j"]
    df["baseline"] = base["choice"]
    return df[COLUMNS]
