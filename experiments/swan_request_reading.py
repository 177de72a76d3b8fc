"""How much the owner's Table 3 drop depends on how Swan's monitoring rule is read.

The paper (sec. 4.1, "Monitoring") has Swan decide on a training request on "whether it has
completed its execution choice exploration and the device being idle". swansim reads it as:
a request is taken on only on an idle phone and runs to its end when the owner comes back
(`SwanParams.idle_requests_only`, true); the other reading (false) needs idleness only to
explore. Per phone and task, both readings in owner_table3.py's protocol: Swan explores on the
idle phone in requests of 3 batches, then takes the task's federated requests on the idle
phone, and 30 s later the owner runs the Work-like benchmark.

    .venv/bin/python experiments/swan_request_reading.py [--devices a,b] [--models a,b] [--jobs N]
"""
from __future__ import annotations

import sys

import pandas as pd

from owner_table3 import EXPLORE_S   # the same exploration span as the table itself
from swansim import checks
from swansim.cli import Parser, guarded
from swansim.dnn.tasks import SWAN_TASKS
from swansim.hw.profile import Catalogue
from swansim.pool import run_all
from swansim.runs.compare import benchmark_config
from swansim.session.phone import RunConfig, run_policy

DEVICES = ("pixel3", "galaxy-s10e", "oneplus8")


def drop(device: str, model: str, idle_requests_only: bool) -> dict:
    """Swan's Work-like score drop (%) under one reading, and the requests it declined."""
    rc = RunConfig(device=device, model=model, policy="swan", duration_s=EXPLORE_S[model], request_batches=3,
                   policy_args=(("idle_requests_only", idle_requests_only),))
    explored = run_policy(rc).policy
    s = run_policy(benchmark_config(rc), policy=explored).summary
    return {"device": device, "model": model, "idle_requests_only": idle_requests_only,
            "ux_score_drop_pct": s["ux_score_drop_pct"], "declined_owner_active": s["declined_owner_active"]}


def main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--models", default="resnet34")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    devices = checks.listed(args.devices, "--devices")
    models = checks.names(checks.listed(args.models, "--models"), "--models", SWAN_TASKS, "Swan task")
    tasks = [(d, m, flag) for d in devices for m in models for flag in (True, False)]
    cat = Catalogue.load()
    for d, m, _ in tasks[::2]:
        RunConfig(device=d, model=m, policy="swan").check(cat)      # one line for a bad name, before any run
    rows = run_all(drop, tasks, args.jobs, desc="runs", labels=[f"{d} {m} {f}" for d, m, f in tasks])
    df = pd.DataFrame(rows)
    df["reading"] = df["idle_requests_only"].map({True: "idle phone only", False: "whenever the battery allows"})
    t = df.pivot_table(index=["device", "model"], columns="reading", values="ux_score_drop_pct", sort=False)
    print("Swan's Work-like score drop (%) by reading of its monitoring rule (SwanParams.idle_requests_only)")
    print(t[["idle phone only", "whenever the battery allows"]].to_string(float_format=lambda x: f"{x:.1f}"))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "swan_request_reading.py"))
