"""Swan Fig. 2 under two measurement protocols, at the committed runtime (nothing is fitted here).

    python experiments/fig2_protocol.py [--minutes 10] [--models resnet34,shufflenet_v2_x2_0]

The calibration measures each choice the way `swansim.runs.calibration.Fig2` does: one warm-up
batch, then the measured batches with every thermal node held at ambient (no heating, no
throttling). The paper measured energy "from battery drain, background subtracted", which
takes minutes of training per choice; over minutes a Pixel 3 heats and throttles, most for the
choices that draw the most. This prints each Fig. 2 point under both protocols - the second
over the last minute of ``--minutes`` of training from a phone at ambient, thermal zone and
engine on (`sustained_fig2_metrics`) - against the paper, and each protocol's median error.
How long the paper trained per choice is not stated: ``--minutes`` is an assumption.
"""
from __future__ import annotations

import sys
from dataclasses import replace

from swansim.batchmodel import BatchModel
from swansim.cli import Parser, guarded
from swansim.dnn import calibrate as cal
from swansim.dnn.runtime import load_runtime
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.runs.calibration import Fig2, fig2_points, sustained_fig2_metrics


def main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="sustained training per choice before the measured minute (default: %(default)s)")
    ap.add_argument("--models", default="resnet34,shufflenet_v2_x2_0", help="Fig. 2 tasks (default: both)")
    args = ap.parse_args(argv)
    figures = cal.read_fig2()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in figures:
            raise InputError("--models", m, f"not a Fig. 2 task (known: {', '.join(figures)})")
    if not 2.0 <= args.minutes <= 60.0:
        raise InputError("--minutes", str(args.minutes), "must be 2 to 60 (one measured minute after at least one)")
    cat = Catalogue.load()
    cold = Fig2(cat).metrics(load_runtime("pytorch"))
    memo = BatchModel()
    points: list[cal.Residual] = []   # both protocols' points, each under its protocol's name
    print(f"{'point':<34} {'paper':>6} {'calibration':>12} {'sustained':>10}")
    for m in models:
        labels = sorted({label for target in figures[m].values() for label in target})
        hot = sustained_fig2_metrics(cat, m, labels, args.minutes, memo)
        for a, b in zip(fig2_points(m, figures[m], cold[m]), fig2_points(m, figures[m], hot)):
            print(f"{a.point:<34} {a.target:>6.2f} {a.predicted:>7.3f} ({a.predicted / a.target - 1:+4.0%}) "
                  f"{b.predicted:>6.3f} ({b.predicted / b.target - 1:+4.0%})")
            points += [replace(a, figure="calibration"), replace(b, figure="sustained")]
    for name, n, median_pct, worst_pct, _ in cal.summarise(points):
        print(f"{name}: median |error| {median_pct / 100:.0%}, worst {worst_pct / 100:.0%} over {n} points")
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "fig2_protocol.py"))
