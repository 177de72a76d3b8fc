"""Does adapting protect the owner? The Work-like score change per policy (the paper's
Table 3 question), on the phones of the paper's Fig. 3, for the three tasks.

Per device, model and policy (`swansim.compare`): the policy first trains on an idle phone
(swan and swan-layer long enough to explore every choice, in requests of 3 batches), then,
as that left it, takes the task's federated requests on the idle phone, and 30 s later the
owner picks the phone up and runs the Work-like benchmark (Swan takes requests only on an
idle phone: the one under way runs on); the score is against the same phone running the
benchmark without training. pytorch-default's rows carry the paper's Fig. 3 drop.

    .venv/bin/python experiments/policy_ux.py [--jobs N]     # -> results/policies/ux/
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import swansim
from swansim.cli import Parser, guarded
from swansim.plots import policy_ux
from swansim.results import write_manifest
from swansim.runs.scenarios import PAPER_FIG3_DROP_PCT

DEVICES = ("pixel3", "galaxy-s10e")
MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")
ADAPTIVE = ("swan", "swan-layer")
STATIC = ("pytorch-default", "eas", "little-only")
# simulated seconds on the idle phone first: swan explores every choice (see policy_speedup.py)
EXPLORE_S = {"resnet34": 75.0, "shufflenet_v2_x2_0": 520.0, "mobilenet_v2": 620.0}
STATIC_S = 5.0
OUT = Path("results/policies/ux")


def main(jobs: int | None = None) -> pd.DataFrame:
    OUT.mkdir(parents=True, exist_ok=True)
    frames = []
    for model in MODELS:
        frames.append(swansim.compare(DEVICES, [model], ADAPTIVE, duration_s=EXPLORE_S[model], jobs=jobs,
                                      request_batches=3))
        frames.append(swansim.compare(DEVICES, [model], STATIC, duration_s=STATIC_S, jobs=jobs))
        pd.concat(frames).to_csv(OUT / "ux_runs.csv", index=False)   # kept if interrupted
    df = pd.concat(frames, ignore_index=True)
    order = {p: i for i, p in enumerate(STATIC[:1] + ADAPTIVE + STATIC[1:])}
    df = df.sort_values(["device", "model", "policy"], key=lambda s: s.map(order) if s.name == "policy" else s)
    df["paper_drop_pct"] = [PAPER_FIG3_DROP_PCT[(d, m)] if p == "pytorch-default" and (d, m) in PAPER_FIG3_DROP_PCT
                            else float("nan") for d, m, p in zip(df["device"], df["model"], df["policy"])]
    table = df[["device", "model", "policy", "ux_score_drop_pct", "paper_drop_pct", "final_plan",
                "steady_latency_s", "latency_s"]]
    table.to_csv(OUT / "ux.csv", index=False)
    policy_ux(table, OUT / "ux.png")
    write_manifest(OUT, {"devices": DEVICES, "models": MODELS, "adaptive": ADAPTIVE, "static": STATIC,
                         "explore_s": EXPLORE_S, "static_s": STATIC_S}, seed=0,
                   files=["ux.csv", "ux_runs.csv", "ux.png"])
    return table


def _cli() -> None:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=None, help="processes (default: every core)")
    print(main(p.parse_args().jobs).to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    sys.exit(guarded(_cli, "policy_ux.py"))
