"""The quick reproduction on one phone: landscapes, throttling and the owner's experience.

1. Landscapes (after the Swan paper's Fig. 2): latency, energy and power of every execution
   choice for ResNet-34 and ShuffleNetV2-x2 training, through the full device simulation.
2. Throttling: sustained dense work on the big cores, then on the little ones.
3. User experience (after Fig. 3): the Work-like score with no training, with PyTorch's default
   execution of ResNet-34 training in the background, and with training on one little core.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from swansim import checks
from swansim.device import DeviceConfig
from swansim.dnn.calibrate import FIG2_CSV
from swansim.dnn.tasks import FIG2_TASKS
from swansim.hw.profile import Catalogue
from swansim.results import write_manifest
from swansim.runs.landscape import landscape_frame
from swansim.runs.pool import check_jobs, run_all
from swansim.runs.scenarios import TrainingBackground, work_score
from swansim.runs.thermal import LOADS, check_minutes, run_one, sensor_for


@dataclass(frozen=True)
class DemoConfig:
    device: str = "pixel3"
    seed: int = 0
    thermal_minutes: float = 10.0

    def check(self, cat: Catalogue) -> None:
        cat.device(self.device, "--device")
        checks.seed(self.seed)
        check_minutes(self.thermal_minutes, "--thermal-minutes")


UX_BACKGROUNDS = (("none", None), ("resnet34 pytorch-default", TrainingBackground("resnet34")),
                  ("resnet34 one little core", TrainingBackground("resnet34", "little1")))


def _ux(cfg: DemoConfig, bg) -> float:
    score, _ = work_score(DeviceConfig(device=cfg.device, seed=cfg.seed), bg, seed=cfg.seed, reference=None)
    return score


def _thermal(cfg: DemoConfig, load: str):
    return run_one(cfg.device, load, cfg.thermal_minutes * 60.0, seed=cfg.seed)


def run_demo(cfg: DemoConfig, out: Path | str, jobs: int | None = None, progress: bool = True) -> dict[str, pd.DataFrame]:
    """Everything above; CSV and PNG files and a manifest under ``out``; the tables by name."""
    from swansim import plots as P

    started = time.perf_counter()
    cat = Catalogue.load()
    cfg.check(cat)
    jobs = check_jobs(jobs)
    out = checks.out_dir(out)
    files = []
    landscapes = {}
    for model in FIG2_TASKS:
        df = landscape_frame(cfg.device, model, jobs=jobs, progress=progress)
        df.to_csv(out / f"landscape-{model}.csv", index=False)
        files.append(f"landscape-{model}.csv")
        landscapes[model] = df
    P.landscape_bars(landscapes, out / "landscapes.png", P.read_paper_fig2(FIG2_CSV),
                     f"{cfg.device}: training, batch 16, pytorch runtime")
    files.append("landscapes.png")

    spec = cat.device(cfg.device)
    thermal_rows = []
    for load, (df, summary) in zip(LOADS, run_all(_thermal, [(cfg, load) for load in LOADS], jobs,
                                                   desc="thermal runs", progress=progress)):
        df.to_csv(out / f"thermal-{load}.csv", index=False)
        P.thermal_run(df, out / f"thermal-{load}.png", f"{cfg.device}: sustained dense FP32 on the {load} cores",
                      sensor_for(spec, load))
        files += [f"thermal-{load}.csv", f"thermal-{load}.png"]
        thermal_rows.append(summary)
    thermal = pd.DataFrame(thermal_rows)
    thermal.to_csv(out / "thermal-summary.csv", index=False)
    files.append("thermal-summary.csv")

    scores = run_all(_ux, [(cfg, bg) for _, bg in UX_BACKGROUNDS], jobs, desc="Work-like runs", progress=progress)
    ux = pd.DataFrame({"background": [label for label, _ in UX_BACKGROUNDS], "score": scores})
    ux["drop_pct"] = 100.0 * (1.0 - ux["score"] / ux["score"].iloc[0])
    ux.to_csv(out / "ux.csv", index=False)
    files.append("ux.csv")
    write_manifest(out, asdict(cfg), seed=cfg.seed, files=files, wall_s=round(time.perf_counter() - started, 1))
    return {**{f"landscape-{m}": df for m, df in landscapes.items()}, "thermal": thermal, "ux": ux}
