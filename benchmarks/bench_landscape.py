"""Landscape wall time over a process pool: ``--jobs 1`` against ``--jobs 2`` (and more).

Every choice of a landscape is an independent simulation; printed per job count: the wall
time in bare SimPy events (see _bare.py) and the speed-up over one process, and whether the
tables are identical (they must be).

Run: .venv/bin/python benchmarks/bench_landscape.py [--model shufflenet_v2_x2_0] [--jobs 1,2]
"""
from __future__ import annotations

import sys
import time

from _bare import bare_event_s

from swansim.cli import Parser, guarded
from swansim.runs.landscape import landscape_frame


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="pixel3")
    ap.add_argument("--model", default="shufflenet_v2_x2_0")
    ap.add_argument("--jobs", default="1,2")
    args = ap.parse_args(argv)
    first, base = None, None
    for jobs in (int(j) for j in args.jobs.split(",")):
        bare = bare_event_s(100_000, 2)
        t0 = time.perf_counter()
        df = landscape_frame(args.device, args.model, jobs=jobs)
        wall = time.perf_counter() - t0
        bare = (bare + bare_event_s(100_000, 2)) / 2
        base = base or wall
        same = "-" if first is None else ("identical" if df.equals(first) else "DIFFERENT")
        first = df if first is None else first
        print(f"--jobs {jobs}: {wall / bare:,.0f} bare events of wall time ({wall:.1f} s here), "
              f"x{base / wall:.2f}; table {same}")


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_landscape.py"))
