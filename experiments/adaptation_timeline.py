"""Swan adapting to its owner: it explores while the phone is idle, steps down when an app
competes for its cores, takes no new request while the owner uses the phone, and steps back
up two minutes after its last step down.

A Pixel 3 trains ResNet-34 (requests of 20 batches, FedScale's local round); after about two
minutes the owner runs the Work-like benchmark (a foreground app whose photo and video
editing use a pool of one thread per core); then the phone is idle again. The same owner
with pytorch-default training is shown for comparison. Writes per policy the batches and the
decisions, and the timeline plot.

    .venv/bin/python experiments/adaptation_timeline.py      # -> results/policies/timeline/
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import swansim
from swansim.cli import Parser, guarded
from swansim.plots import adaptation_timeline
from swansim.results import write_manifest
from swansim.pool import run_all

DEVICE, MODEL = "pixel3", "resnet34"
BENCH_AT_S = 120.0      # after swan has explored every choice once (about 115 s on a Pixel 3)
# One pass of the benchmark's script (~40 s with training behind it), not the ten-minute run of
# the owner's experiments: the timeline shows the adaptation around a short spell of use.
BENCH_PASSES = 1
DURATION_S = 420.0      # the bench, then two step-up periods
OUT = Path("results/policies/timeline")


def one(policy: str):
    r = swansim.run(DEVICE, MODEL, policy, duration_s=DURATION_S, bench_at_s=BENCH_AT_S, bench_passes=BENCH_PASSES)
    return r.batches, r.decisions, r.frames, r.summary


def main() -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    policies = ("swan", "pytorch-default")
    results = run_all(one, [(p,) for p in policies], desc="timeline", labels=policies)
    files, summaries = [], {}
    for policy, (batches, decisions, frames, summary) in zip(policies, results):
        batches.to_csv(OUT / f"{policy}_batches.csv", index=False)
        decisions.to_csv(OUT / f"{policy}_decisions.csv", index=False)
        bench = frames[frames["app"] == "workbench"]
        session = [(float(bench["vsync_s"].min()), float(bench["done_s"].max()), "Work-like benchmark")] \
            if len(bench) else []
        drop = summary["ux_score_drop_pct"]
        adaptation_timeline(batches, decisions, OUT / f"{policy}.png", session,
                            title=f"{DEVICE} {MODEL} {policy}: Work-like score drop {drop:.1f} %")
        files += [f"{policy}_batches.csv", f"{policy}_decisions.csv", f"{policy}.png"]
        summaries[policy] = summary
    pd.DataFrame(summaries.values()).to_csv(OUT / "summary.csv", index=False)
    write_manifest(OUT, {"device": DEVICE, "model": MODEL, "bench_at_s": BENCH_AT_S, "duration_s": DURATION_S},
                   seed=0, files=files + ["summary.csv"])
    return summaries


def _cli(argv=None) -> None:
    Parser(description=__doc__.splitlines()[0]).parse_args(argv)   # no options: anything else is a mistake
    for policy, s in main().items():
        print(f"{policy}: {s['batches']} batches, {s['latency_s']:.3f} s/batch, Work-like score drop "
              f"{s['ux_score_drop_pct']:.1f} %")
    print((OUT / "swan_decisions.csv").read_text())


if __name__ == "__main__":
    sys.exit(guarded(_cli, "adaptation_timeline.py"))
