"""The quick reproduction of the whole story, on one phone and then a small fleet.

1. Landscapes (the Swan paper's Fig. 2): latency, energy and power of every execution choice
   for ResNet-34 and ShuffleNetV2-x2 training, with the paper's figures as ticks.
2. Throttling: sustained dense work on the big cores, then on the little ones.
3. User experience (Fig. 3): the Work-like score with no training, with PyTorch's default
   execution of ResNet-34 training in the background, and with training on one little core.
4. Who decides (the policies): Swan and PyTorch's default training ShuffleNetV2 on the phone,
   idle, for ten simulated minutes in requests of 3 batches (Swan explores one choice per
   request, so it has tried all eight by then): per-batch latency and energy at steady state.
5. At scale (the paper's headline): a reduced fleet (480 clients, 20 per round) trains
   ResNet-34 with FedAvg under Swan and under PyTorch's default: accuracy over time, clients
   online, time and energy to the target accuracy.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.device import DeviceConfig
from swansim.dnn.calibrate import FIG2_CSV
from swansim.dnn.tasks import FIG2_TASKS
from swansim.federated.fleet import FleetConfig
from swansim.hw.profile import DEFAULT_DEVICE, Catalogue, DeviceSpec
from swansim.options import option
from swansim.results import write_csv, write_manifest
from swansim.runs.landscape import landscape_frame
from swansim.pool import check_jobs, run_all
from swansim.runs.scenarios import TrainingBackground, work_score
from swansim.runs.thermal import LOADS, check_minutes, run_one, sensor_for


@dataclass(frozen=True)
class DemoConfig:
    """The quick reproduction's chapters and their sizes; the `swansim demo` options."""

    device: str = option(DEFAULT_DEVICE, help="phone profile")
    seed: int = option(0, help="seed of every chapter")
    thermal_minutes: float = option(5.0, help="simulated minutes of sustained load per cluster")
    policy_s: float = option(600.0, help="simulated seconds of each policy on the phone")
    policy_request_batches: int = option(3, help="batches per training request (one exploration each)")
    fleet_clients: int = option(480, help="clients of the small fleet")
    fleet_per_round: int = option(20, help="participants per round in the small fleet")
    fleet_rounds: int = option(40, help="FedAvg rounds per policy in the small fleet")

    def check(self, cat: Catalogue) -> DeviceSpec:
        """Every field, before any work; returns the device's profile."""
        spec = cat.device(self.device, "--device")
        checks.seed(self.seed)
        check_minutes(self.thermal_minutes, "--thermal-minutes")
        checks.number(self.policy_s, "--policy-s", 10.0, 3600.0, "of seconds")
        checks.integer(self.fleet_clients, "config", 24, 100_000)
        checks.integer(self.fleet_rounds, "--fleet-rounds", 1, 10_000)
        return spec


UX_BACKGROUNDS = (("none", None), ("resnet34 pytorch-default", TrainingBackground("resnet34")),
                  ("resnet34 little1", TrainingBackground("resnet34", "little1")))


def _ux(spec: DeviceSpec, cfg: DemoConfig, bg) -> float:
    score, _ = work_score(spec, DeviceConfig(seed=cfg.seed), bg, seed=cfg.seed, reference=None)
    return score


def _thermal(spec: DeviceSpec, cfg: DemoConfig, load: str):
    return run_one(spec, load, cfg.thermal_minutes * 60.0, seed=cfg.seed)


def run_demo(cfg: DemoConfig, out: Path | str, jobs: int | None = None, progress: bool = True) -> dict[str, pd.DataFrame]:
    """Everything above; CSV and PNG files and a manifest under ``out``; the tables by name."""
    from swansim import plots as P

    started = time.perf_counter()
    spec = cfg.check(Catalogue.load())
    jobs = check_jobs(jobs)
    out = checks.out_dir(out)
    if cfg.fleet_rounds > 0:   # before any work: a fleet it cannot resume is old output
        from swansim.federated.fleet import discard_stale_checkpoints

        for path in discard_stale_checkpoints(_fleet_config(cfg), out / "fleet"):
            if progress:
                print(f"{path}: written by another run or other code; the demo's fleet starts afresh",
                      file=sys.stderr)
    files = []
    landscapes = {}
    for model in FIG2_TASKS:
        df = landscape_frame(cfg.device, model, jobs=jobs, progress=progress)
        write_csv(df, out / f"landscape-{model}.csv")
        files.append(f"landscape-{model}.csv")
        landscapes[model] = df
    P.landscape_bars(landscapes, out / "landscapes.png", P.read_paper_fig2(FIG2_CSV),
                     f"{cfg.device}: training, batch 16, pytorch runtime")
    files.append("landscapes.png")

    thermal_rows = []
    for load, (df, summary) in zip(LOADS, run_all(_thermal, [(spec, cfg, load) for load in LOADS], jobs,
                                                   desc="thermal runs", progress=progress)):
        write_csv(df, out / f"thermal-{load}.csv")
        P.thermal_run(df, out / f"thermal-{load}.png", f"{cfg.device}: sustained dense FP32 on the {load} cores",
                      sensor_for(spec, load))
        files += [f"thermal-{load}.csv", f"thermal-{load}.png"]
        thermal_rows.append(summary)
    thermal = pd.DataFrame(thermal_rows)
    write_csv(thermal, out / "thermal-summary.csv")
    files.append("thermal-summary.csv")

    scores = run_all(_ux, [(spec, cfg, bg) for _, bg in UX_BACKGROUNDS], jobs, desc="Work-like runs", progress=progress)
    ux = pd.DataFrame({"background": [label for label, _ in UX_BACKGROUNDS], "score": scores})
    ux["drop_pct"] = 100.0 * (1.0 - ux["score"] / ux["score"].iloc[0])
    write_csv(ux, out / "ux.csv")
    files.append("ux.csv")
    tables = {**{f"landscape-{m}": df for m, df in landscapes.items()}, "thermal": thermal, "ux": ux}

    if cfg.policy_s > 0:
        tables["policies"] = policies = _policies(cfg, jobs, progress)
        write_csv(policies, out / "policies.csv")
        files.append("policies.csv")
    if cfg.fleet_rounds > 0:
        fleet = _fleet(cfg, out / "fleet", jobs, progress)   # its rounds, summary, manifest and checkpoints
        tables["fleet"] = fleet.summary
        P.fleet_curves({"resnet34": fleet.rounds}, {"resnet34": fleet.summary}, out / "fleet.png",
                       FleetConfig().target_accuracy)
        fleet_files = json.loads((out / "fleet" / "manifest.json").read_text())["files"]
        files += [f"fleet/{f}" for f in fleet_files] + ["fleet/manifest.json", "fleet.png"]
    write_manifest(out, asdict(cfg), seed=cfg.seed, files=files, wall_s=round(time.perf_counter() - started, 1))
    return tables


def _policies(cfg: DemoConfig, jobs, progress) -> pd.DataFrame:
    from swansim.runs.compare import CompareConfig, compare_frame

    df = compare_frame(CompareConfig(devices=(cfg.device,), models=("shufflenet_v2_x2_0",),
                                     policies=("swan", "pytorch-default"), duration_s=cfg.policy_s, seed=cfg.seed,
                                     ux=False, request_batches=cfg.policy_request_batches),
                       jobs=jobs, progress=progress)
    return df


def _fleet(cfg: DemoConfig, out: Path, jobs, progress):
    from swansim.federated.local import run_policy_fleet

    result, _ = run_policy_fleet(_fleet_config(cfg), out, jobs, progress=progress)
    return result


def _fleet_config(cfg: DemoConfig) -> FleetConfig:
    return FleetConfig(model="resnet34", policies=("swan", "pytorch-default"), clients=cfg.fleet_clients,
                       per_round=cfg.fleet_per_round, rounds=cfg.fleet_rounds, seed=cfg.seed)
