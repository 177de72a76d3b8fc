"""Speedup and energy gain of swan and swan-layer over pytorch-default (the paper's main
question), for the paper's five phones x three tasks, on an idle phone at steady state.

Each policy trains on an idle, discharging phone (no owner). Swan explores one choice per
training request; requests of 3 batches here (2 to explore, 1 to train) let exploration
finish in a bounded run - the steady state does not depend on the request length. The
figures are the mean latency and energy per batch of the run's settled end (``steady_*``: the
trailing batches on the final plan, without the first of them). Energy is the training's share
(above the idle phone's power), as the paper's background-subtracted drain.

Also writes swan-layer's per-layer plans (plans.csv: per layer and pass, the chosen choice
and the latency the policy measured on every choice it explored) - the explanation of the
per-layer gains.

    .venv/bin/python experiments/policy_speedup.py [--jobs N] [--out DIR]   # default: results/policies/speedup/
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import swansim
from swansim.cli import Parser, guarded
from swansim.dnn.choices import enumerate_choices
from swansim.plots import policy_gains
from swansim.policy.swan_layer import step_latency_s
from swansim.results import write_manifest
from swansim.pool import run_all
from swansim.hw.profile import SWAN_PHONES

MODELS = ("resnet34", "shufflenet_v2_x2_0", "mobilenet_v2")
# Simulated seconds: long enough for swan to explore every choice (two batches each, the
# little-core ones take 40-90 s per batch on ShuffleNet and MobileNet) and then train ~10 batches;
# for the baseline, several batches (PyTorch's default, beside OpenBLAS's spinning pool, takes
# up to ~1 s a ResNet-34 batch and 25-65 s a ShuffleNet or MobileNet one). The table says
# whether every choice was explored (explored_all).
EXPLORE_S = {"resnet34": 75.0, "shufflenet_v2_x2_0": 600.0, "mobilenet_v2": 1000.0}
BASELINE_S = {"resnet34": 20.0, "shufflenet_v2_x2_0": 250.0, "mobilenet_v2": 330.0}
REQUEST_BATCHES = 3
OUT = Path("results/policies/speedup")


def plan_rows(policy, device: str, model: str, graph) -> list[dict]:
    """swan-layer's top-rung plan, per layer and pass, with the policy's measured step latencies."""
    plan = policy.rung_plan(len(policy.ladder) - 1)
    rows = []
    for i, layer in enumerate(graph.layers):
        for kind, choice in (("fwd", plan.fwd[i]), ("bwd", plan.bwd[i])):
            row = {"device": device, "model": model, "layer": i, "name": layer.name, "op": layer.op,
                   "groups": layer.groups, "pass": kind, "choice": choice.label}
            for c, prof in policy.profiles.items():
                row[f"{c.label}_ms"] = 1e3 * step_latency_s(prof.layer_s, (kind, i))
            rows.append(row)
    return rows


def one(device: str, model: str, policy: str) -> tuple[dict, list[dict]]:
    """A pool worker: one run's summary (and swan-layer's plan)."""
    from swansim.dnn.tasks import build_task

    duration = BASELINE_S[model] if policy == "pytorch-default" else EXPLORE_S[model]
    r = swansim.run(device, model, policy, duration_s=duration, request_batches=REQUEST_BATCHES)
    s = dict(r.summary)
    n_choices = len(enumerate_choices(r.spec.soc, mixed=False))
    s["explored_all"] = policy == "pytorch-default" or s["explore_batches"] >= 2 * n_choices
    plans = plan_rows(r.policy, device, model, build_task(model)) if policy == "swan-layer" else []
    return s, plans


def main(jobs: int | None = None, out: Path = OUT) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    # the longest runs first, so the pool stays busy to the end
    runs = [(d, m, p) for m in sorted(MODELS, key=lambda m: -EXPLORE_S[m]) for d in SWAN_PHONES
            for p in ("swan-layer", "swan", "pytorch-default")]
    results = run_all(one, runs, jobs, desc="policy speedup", labels=[" ".join(r) for r in runs])
    runs_df = pd.DataFrame([s for s, _ in results])
    runs_df.to_csv(out / "speedup_runs.csv", index=False)
    pd.DataFrame([row for _, rows in results for row in rows]).to_csv(out / "plans.csv", index=False)

    base = runs_df[runs_df["policy"] == "pytorch-default"].set_index(["device", "model"])
    rows = []
    for r in runs_df[runs_df["policy"] != "pytorch-default"].itertuples():
        b = base.loc[(r.device, r.model)]
        rows.append({"device": r.device, "model": r.model, "policy": r.policy, "final_plan": r.final_plan,
                     "latency_s": r.steady_latency_s, "energy_j": r.steady_energy_j,
                     "baseline_latency_s": b["steady_latency_s"], "baseline_energy_j": b["steady_energy_j"],
                     "speedup": b["steady_latency_s"] / r.steady_latency_s,
                     "energy_gain": b["steady_energy_j"] / r.steady_energy_j,
                     "run_latency_s": r.latency_s, "explored_all": r.explored_all,
                     "steady_batches": r.steady_batches})
    df = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(MODELS)}
    df = df.sort_values(["model", "device", "policy"], key=lambda s: s.map(order) if s.name == "model" else s)
    df.to_csv(out / "speedup.csv", index=False)
    policy_gains(df, out / "speedup.png")
    write_manifest(out, {"devices": SWAN_PHONES, "models": MODELS, "explore_s": EXPLORE_S, "baseline_s": BASELINE_S,
                         "request_batches": REQUEST_BATCHES}, seed=0,
                   files=["speedup.csv", "speedup_runs.csv", "plans.csv", "speedup.png"])
    return df


def _cli() -> None:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=None, help="processes (default: every core)")
    p.add_argument("--out", default=str(OUT), help="results directory (default: %(default)s)")
    args = p.parse_args()
    table = main(args.jobs, Path(args.out))
    print(table[["device", "model", "policy", "final_plan", "latency_s", "speedup", "energy_gain",
                 "explored_all"]].to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    sys.exit(guarded(_cli, "policy_speedup.py"))
