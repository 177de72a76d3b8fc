"""User experience with DNN training in the background: the Swan paper's Fig. 3, simulated.

Per phone: the Work-like score with no training, with pytorch-default training of ResNet-34,
ShuffleNetV2-x2 and MobileNetV2, and with training confined to one little core; the score
drop; the jank of light apps. Writes CSV + PNG under results/ux/.

    .venv/bin/python experiments/ux_interference.py            # Pixel 3 and Galaxy S10e
    .venv/bin/python experiments/ux_interference.py --all      # every phone and tablet profile
"""
from __future__ import annotations

import sys

from swansim.cli import Parser, guarded
from swansim.hw.profile import Catalogue
from swansim.runs.ux import UxConfig, phones_and_tablets, print_summary, run_ux


def _cli() -> None:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="every phone and tablet profile, not the default set")
    cfg = UxConfig(devices=phones_and_tablets(Catalogue.load())) if p.parse_args().all else UxConfig()
    print_summary(*run_ux(cfg, "results/ux"))


if __name__ == "__main__":
    sys.exit(guarded(_cli, "ux_interference.py"))
