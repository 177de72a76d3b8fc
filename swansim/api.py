"""The Python API beyond a run, a landscape and a comparison: the fleet, throttling, the owner's
experience, and what the catalogues hold. Each function checks its arguments before any work
(an unknown keyword is one `InputError` naming the valid ones), shows a progress bar on stderr
unless ``progress=False``, and returns tidy pandas frames.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.federated.fleet import FleetConfig
from swansim.options import takes
from swansim.runs.thermal import ThermalConfig
from swansim.runs.ux import UxConfig


@takes(FleetConfig)
def fleet(model: str = "resnet34", policies=("swan", "pytorch-default"), out: str | Path = "results/fleet",
          jobs: int | None = None, progress: bool = True, no_limit: bool = False, **config):
    """FedAvg over a population of phones, each client's local training under its policy on its
    own phone (`swansim.federated`); returns the run's `FleetResult` (``.rounds``, ``.summary``
    frames) and writes them, with checkpoints and the batch memo, under ``out`` (resumable: call
    again to continue).

    ``model`` the Swan task whose training cost the phones pay; ``policies`` the policies compared
    (a list or a comma-separated string); ``out`` the output directory; ``jobs`` processes
    (default every core; results do not depend on it); ``progress`` a bar on stderr;
    ``no_limit`` lifts the bound of 5 million client-batches; ``devices`` the phones' mix, as
    ``"pixel3,galaxy-s10e:2"``, ``{"pixel3": 1, "galaxy-s10e": 2}`` or (name, weight) pairs."""
    from swansim.federated.local import run_policy_fleet

    where = "swansim.fleet"
    if "devices" in config:   # as the command line takes them, or a mapping, or pairs
        config["devices"] = checks.weighted(config["devices"], f"{where}(devices=...)")
    cfg = FleetConfig(**checks.keywords({"model": model, "policies": checks.listed(policies, f"{where}(policies=...)"),
                                         **config}, FleetConfig, where))
    result, _ = run_policy_fleet(cfg, out, jobs, progress=progress, no_limit=no_limit)
    return result


@takes(ThermalConfig)
def thermal(devices=None, out: str | Path = "results/thermal", plots: bool = True, jobs: int | None = None,
            progress: bool = True, **config) -> pd.DataFrame:
    """Sustained dense FP32 on the big and on the little cores of each phone: DVFS, the kernel
    zone's and the thermal engine's caps, skin and battery temperatures (`swansim.runs.thermal`).
    Returns the summary (one row per phone and load) and writes timelines, and plots unless
    ``plots=False``, under ``out``; ``devices`` a list or a comma-separated string (default:
    every profile but the generic chassis); ``jobs`` processes; ``progress`` a bar on stderr."""
    from swansim.runs.thermal import run_thermal

    if devices is not None:
        devices = checks.listed(devices, "swansim.thermal(devices=...)")
    cfg = ThermalConfig(devices=devices, **checks.keywords(config, ThermalConfig, "swansim.thermal"))
    with checks.as_keywords("swansim.thermal", ThermalConfig):
        return run_thermal(cfg, out, plots, jobs, progress)


@takes(UxConfig)
def ux(out: str | Path = "results/ux", plots: bool = True, jobs: int | None = None, progress: bool = True,
       **config) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The owner's experience with training in the background (`swansim.runs.ux`): the Work-like
    score drop per phone and background (positive: the owner loses) and the jank of light apps.
    Returns ``(drops, janks)`` and writes them, with plots unless ``plots=False``, under ``out``;
    ``jobs`` processes; ``progress`` a bar on stderr."""
    from swansim.runs.ux import run_ux

    for key in ("devices", "models"):
        if key in config:
            config[key] = checks.listed(config[key], f"swansim.ux({key}=...)")
    cfg = replace(UxConfig(), **checks.keywords(config, UxConfig, "swansim.ux"))
    with checks.as_keywords("swansim.ux", UxConfig):
        return run_ux(cfg, out, plots, jobs, progress)


def profiles() -> pd.DataFrame:
    """Every profile: name, kind (phone, tablet, board, soc), title, SoC, CPUs, clusters, and
    whether it has a vendor kernel table and a thermal engine."""
    from swansim.hw.profile import Catalogue

    cat = Catalogue.load()
    rows = [{"name": d.name, "kind": d.kind, "title": d.title, "soc": d.soc.name, "cpus": d.soc.n_cpus,
             "clusters": "+".join(c.name for c in d.soc.clusters), "vendor_kernel": d.kernel is not None,
             "thermal_engine": d.thermal_engine is not None} for d in cat.devices.values()]
    rows += [{"name": s.name, "kind": "soc", "title": s.title, "soc": s.name, "cpus": s.n_cpus,
              "clusters": "+".join(c.name for c in s.clusters), "vendor_kernel": False, "thermal_engine": False}
             for s in cat.socs.values()]
    return pd.DataFrame(rows)


def policies() -> pd.DataFrame:
    """Every policy by name (the built-in ones and those other packages add through the
    ``swansim.policies`` entry points), with the first line of its description."""
    from swansim.policy.base import POLICIES

    return pd.DataFrame([{"name": n, "description": ((cls.__doc__ or "").strip().splitlines() or [""])[0]}
                         for n, cls in POLICIES.items()])


def models() -> pd.DataFrame:
    """Every model of the zoo: parameters and forward MACs at 1000 classes and 224x224, and
    whether it is one of the Swan paper's tasks."""
    from swansim.dnn.models import MODELS, build_model
    from swansim.dnn.tasks import SWAN_TASKS

    rows = []
    for name in MODELS:
        m = build_model(name)
        rows.append({"name": name, "params": m.params, "macs": sum(layer.macs for layer in m.layers),
                     "swan_task": name in SWAN_TASKS})
    return pd.DataFrame(rows)
