"""Landscapes: latency, energy and power of every execution choice for one model on one device.

One row per execution choice (the paper's prefix choices per capacity tier, then mixed
big+little sets flagged ``kind=mixed``, then PyTorch's default, the baseline). ``kind`` says what
the cores are (`dnn.choices.enumerate_choices`: little, big, prime - a prime core is one whose
capacity stands above the rest, not merely a separate frequency domain - mixed, default);
``clusters`` names the profile's clusters the choice uses. Each row is the batch
model's `simulate_batch` - the full device simulation (the scheduler, the cpufreq governor,
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

from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from swansim import checks
from swansim.batchmodel import BatchKey, simulate_batch
from swansim.device import DeviceConfig
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.models import MODELS
from swansim.dnn.runtime import checked_runtime
from swansim.dnn.tasks import build_task
from swansim.errors import InputError
from swansim.hw.profile import ANDROID_GROUPS, DEFAULT_DEVICE, TOP_APP, Catalogue, DeviceSpec
from swansim.kernel.cpufreq import GOVERNORS
from swansim.options import option
from swansim.results import write_csv, write_manifest
from swansim.pool import check_jobs, run_all

COLUMNS = ["choice", "kind", "cores", "threads", "clusters", "latency_s", "energy_j", "power_w", "speedup",
           "energy_vs_baseline", "baseline"]
# Bounds on what one landscape may ask for, so a typo cannot start a run of hours. The last
# one bounds every combination: one batch on one little core (a choice every landscape has)
# at that core's peak dense rate - a lower bound on its latency - must take at most a minute.
MAX_BATCH, MAX_CLASSES, MAX_CHANNELS, MAX_SIDE, MAX_BATCHES = 4096, 100_000, 64, 4096, 100
MAX_LITTLE_PEAK_S = 60.0


def parse_input(text: str, where: str = "--input") -> tuple[int, int, int]:
    """"CxHxW" as (C, H, W), each in range."""
    parts = str(text).lower().split("x")
    try:
        if len(parts) != 3 or not all(p.strip().isdecimal() for p in parts):
            raise ValueError
        c, h, w = (int(p) for p in parts)
    except ValueError:   # also: more digits than int() takes
        raise InputError(where, repr(text), "expected CxHxW with positive integers, e.g. 3x224x224") from None
    for name, v, hi in (("channels", c, MAX_CHANNELS), ("height", h, MAX_SIDE), ("width", w, MAX_SIDE)):
        if not 1 <= v <= hi:
            raise InputError(where, repr(text), f"{name} must be from 1 to {hi}, got {v}")
    return c, h, w


@dataclass(frozen=True)
class LandscapeConfig:
    """One landscape: a model's every execution choice on a device. None: the Swan task's
    value (`swansim.dnn.tasks`), else torchvision's."""

    device: str = option(DEFAULT_DEVICE, help="phone, board or SoC profile")
    model: str = option("resnet34", help="a zoo model", known=lambda: tuple(MODELS))
    runtime: str = option("pytorch", help="runtime profile: a shipped one's name (swansim/dnn/runtimes: pytorch, "
                                          "ncnn) or a .toml file, e.g. a copy with figures changed")
    mode: str = option("train", help="train or infer")
    batch: int | None = option(None, help="mini-batch size (default: 16 to train, 1 to infer)")
    classes: int | None = option(None, help="classes (default: the Swan task's, else 1000)")
    input_shape: str | None = option(None, flag="--input", help="CxHxW (default: the Swan task's, else 3x224x224)")
    batches: int = option(2, help="measured batches per choice")
    warmup: int = option(1, help="warm-up batches per choice")
    mixed: bool = option(True, flag="--no-mixed", help="include the mixed big+little choices (--no-mixed: leave them out)")
    governor: str = option("schedutil", help="every cluster's cpufreq governor", known=lambda: tuple(GOVERNORS))
    group: str = option(TOP_APP, help="the training process's Android group", known=lambda: ANDROID_GROUPS)

    def check(self, cat: Catalogue) -> tuple[DeviceSpec, tuple]:
        """Every field, before any work; returns the device's profile and the graph's key
        (model, batch, shape, classes, mode)."""
        spec = cat.device(self.device, "--device")
        soc = spec.soc
        checks.one_of(self.model, "--model", sorted(MODELS), "model")
        rt = checked_runtime(self.runtime, "--runtime")
        checks.one_of(self.mode, "--mode", ("train", "infer"), "mode")
        if self.mode == "train" and not rt.trains:
            raise InputError("--runtime", self.runtime, "an inference-only runtime (no backward phases): "
                                                        "use --mode infer")
        checks.one_of(self.governor, "--governor", sorted(GOVERNORS), "governor")
        checks.one_of(self.group, "--group", ANDROID_GROUPS, "Android group")
        batch = None if self.batch is None else checks.integer(self.batch, "--batch", 1, MAX_BATCH)
        classes = None if self.classes is None else checks.integer(self.classes, "--classes", 1, MAX_CLASSES)
        shape = None if self.input_shape is None else parse_input(self.input_shape)
        checks.integer(self.batches, "--batches", 1, MAX_BATCHES)
        checks.integer(self.warmup, "--warmup", 0, MAX_BATCHES)
        key = (self.model, batch, shape, classes, self.mode)
        graph = _graph(*key)
        flops = graph.train_flops if self.mode == "train" else graph.fwd_flops
        little = soc.little
        peak_s = flops / (little.gemm_flop_per_cycle * little.fmax_mhz * 1e6)
        if peak_s > MAX_LITTLE_PEAK_S:
            raise InputError("--batch", f"{graph.batch} x {'x'.join(map(str, graph.input_shape))}",
                             f"one batch of {flops / 1e9:.3g} GFLOP takes at least {peak_s:.0f} s on one little "
                             f"core, above the bound of {MAX_LITTLE_PEAK_S:.0f} s (use a smaller --batch or --input)")
        return spec, key


@lru_cache(maxsize=8)
def _graph(model: str, batch, input_shape, classes, mode: str):
    return build_task(model, batch, input_shape, classes, mode)


def describe(cfg: LandscapeConfig) -> str:
    """What a landscape is for, in one line: device, model, input, classes, batch, runtime, mode."""
    _, key = cfg.check(Catalogue.load())
    graph = _graph(*key)
    shape = "x".join(map(str, graph.input_shape))
    return (f"landscape: {cfg.device}, {cfg.model} ({shape} input, {graph.num_classes} classes), batch "
            f"{graph.batch}, {cfg.runtime} {'training' if cfg.mode == 'train' else 'inference'}, "
            f"{cfg.governor}, Android group {cfg.group}; latency and energy per batch, power above idle")


def _row(key: BatchKey, spec: DeviceSpec) -> dict:
    """One landscape row (a pool worker): ``key``'s batch on ``spec``, its profile."""
    cost = simulate_batch(key, spec=spec, record_layers=False)
    soc = spec.soc
    c = key.plan
    names = [cl.name for cl in soc.clusters if set(cl.cpus) & set(c.cpus)]
    return {"choice": c.label, "kind": c.kind, "cores": len(c.cpus), "threads": c.threads,
            "clusters": "+".join(names), "latency_s": cost.latency_s, "energy_j": cost.net_energy_j,
            "power_w": cost.net_energy_j / cost.latency_s}


def landscape_frame(device: str = DEFAULT_DEVICE, model: str = "resnet34", runtime: str = "pytorch",
                    mode: str = "train", batch: int | None = None, classes: int | None = None,
                    input_shape: str | None = None, batches: int = 2, warmup: int = 1,
                    mixed: bool = True, jobs: int | None = 1, progress: bool = True,
                    governor: str = "schedutil", group: str = TOP_APP, **unknown):
    """Every execution choice of ``model`` on ``device`` as a tidy frame: latency, energy and
    power per choice (one row each, cost order, PyTorch's default last). ``runtime`` a runtime
    profile (pytorch, ncnn); ``mode`` train or infer; ``batch``, ``classes``, ``input_shape``
    ("CxHxW") default to the Swan task's (else torchvision's); ``batches`` measured and
    ``warmup`` warm-up batches per choice; ``mixed`` also the big+little choices; ``governor``
    the cpufreq governor; ``group`` the Android group the training runs in; ``jobs`` processes;
    ``progress`` a bar on stderr. An unknown keyword is one InputError naming the valid ones."""
    import inspect

    checks.keywords(unknown, [n for n in inspect.signature(landscape_frame).parameters if n != "unknown"],
                    "swansim.landscape")
    cfg = LandscapeConfig(device, model, runtime, mode, batch, classes, input_shape, batches, warmup, mixed,
                          governor, group)
    with checks.as_keywords("swansim.landscape", LandscapeConfig):
        return run_landscape(cfg, None, jobs, progress)


def run_landscape(cfg: LandscapeConfig, out: Path | str | None = None, jobs: int | None = None,
                  progress: bool = True):
    """`landscape_frame` for ``cfg``; with ``out``, also the CSV there and its manifest next to
    it (``NAME.manifest.json``). Every argument and the output path are checked first."""
    import pandas as pd

    spec, (model, batch, shape, classes, mode) = cfg.check(Catalogue.load())
    jobs = check_jobs(jobs)
    path = checks.out_file(out) if out is not None else None
    soc = spec.soc
    choices = enumerate_choices(soc, mixed=cfg.mixed) + [pytorch_default(soc)]
    args = [(BatchKey(cfg.device, model, c, runtime=cfg.runtime, governor=cfg.governor, mode=mode, batch=batch,
                      input_shape=shape, num_classes=classes, batches=cfg.batches, warmup=cfg.warmup,
                      group=cfg.group), spec)
            for c in choices]
    rows = run_all(_row, args, jobs, desc=f"landscape {cfg.device} {model}", progress=progress,
                   labels=[c.label for c in choices])
    df = pd.DataFrame(rows)
    base = df[df["kind"] == "default"].iloc[0]
    df["speedup"] = base["latency_s"] / df["latency_s"]
    df["energy_vs_baseline"] = df["energy_j"] / base["energy_j"]
    df["baseline"] = base["choice"]
    df = df[COLUMNS]
    if path is not None:
        write_csv(df, path)
        write_manifest(path.parent, asdict(cfg), seed=DeviceConfig().seed, files=[path.name],
                       name=f"{path.stem}.manifest.json")
    return df
