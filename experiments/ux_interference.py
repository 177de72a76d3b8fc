"""User experience with DNN training in the background: the Swan paper's Fig. 3, simulated.

Per phone: the Work-like score with no training, with pytorch-default training of ResNet-34,
ShuffleNetV2-x2 and MobileNetV2, and with training confined to one little core; the score
drop; the jank of light apps. Writes CSV + PNG under results/ux/ (see `swansim ux --help`).

    .venv/bin/python experiments/ux_interference.py            # Pixel 3 and Galaxy S10e
    .venv/bin/python experiments/ux_interference.py --all      # every phone and tablet profile
"""
from __future__ import annotations

import sys

from swansim.cli import main

if __name__ == "__main__":
    sys.exit(main(["ux", *sys.argv[1:]]))
