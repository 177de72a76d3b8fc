"""How much the simulated Fig. 3 drop depends on the app models' L3 figures (assumptions chosen
with the Pixel 3 ResNet-34 point in view: that point is calibration, the other four validate).

    python experiments/ux_l3_sensitivity.py [--device pixel3] [--model resnet34]

The app threads' stake in the shared L3 (swansim/apps/appmodels.toml, table ``memory``) has
two assumed figures: L2 misses per kilo-instruction (how often app code goes to the L3) and
the L3 working set (what it keeps there). This sweeps each over its plausible range with the
other as written and prints the Work-score drop with pytorch-default training, with training
on one little core and with training on one core of the top cluster (where Swan settles for
the depthwise models), next to the Swan paper's Fig. 3 figure. A drop that hardly moves
across the ranges is decided by the training's traffic (how long it streams), not by the
assumed app figures. Each row is four benchmark runs.
"""
from __future__ import annotations

import sys
from dataclasses import replace

from swansim.apps.appmodels import load_app_table
from swansim.apps.workbench import SCORE_SCALE, task_times
from swansim.cli import Parser, guarded
from swansim.device import DeviceConfig
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.runs.scenarios import PAPER_FIG3_DROP_PCT, WARMUP_S, TrainingBackground, run_workbench

MPKI = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0)
WORKING_SET_KIB = (128.0, 256.0, 512.0, 1024.0, 2048.0)


PLACEMENTS = ("pytorch-default", "little1", "top1")


def drops(spec: DeviceSpec, model: str, table) -> list[float]:
    """Work-score drop (%) per training placement (`PLACEMENTS`)."""
    cfg = DeviceConfig()
    ref = task_times(run_workbench(spec, cfg, None, table=table).tasks)   # scores 1000 by definition
    out = []
    for placement in PLACEMENTS:
        r = run_workbench(spec, cfg, TrainingBackground(model, placement), WARMUP_S, table=table, reference=ref)
        out.append(100.0 * (1.0 - r.score / SCORE_SCALE))
    return out


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="pixel3")
    p.add_argument("--model", default="resnet34")
    args = p.parse_args(argv)
    spec = Catalogue.load().device(args.device, "--device")
    table = load_app_table()
    mem = table.memory
    paper = PAPER_FIG3_DROP_PCT.get((args.device, args.model))
    print(f"{args.device} {args.model}: Swan Fig. 3 drop {paper if paper is not None else '-'} %; "
          f"as written: {mem.l2_misses_per_kinstr:g} L2 MPKI, {mem.l3_working_set_kib:g} KiB")
    print(f"{'L2 MPKI':>8} {'L3 set KiB':>11} {'pytorch-default %':>18} {'little1 %':>10} {'top1 %':>8}")
    rows = [(x, mem.l3_working_set_kib) for x in MPKI] + [(mem.l2_misses_per_kinstr, w) for w in WORKING_SET_KIB]
    for mpki, ws in rows:
        t = replace(table, memory=replace(mem, l2_misses_per_kinstr=mpki, l3_working_set_kib=ws))
        d, little, top = drops(spec, args.model, t)
        print(f"{mpki:>8g} {ws:>11g} {d:>18.1f} {little:>10.1f} {top:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "ux_l3_sensitivity.py"))
