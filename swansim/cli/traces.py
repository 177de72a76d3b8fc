"""`swansim traces synth|show`: foreground-usage and device-state traces."""
from __future__ import annotations

import argparse
import math

from swansim.cli.common import add_quiet


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("traces", help="generate and inspect usage traces")
    ps = p.add_subparsers(dest="action", required=True, metavar="action")
    s = ps.add_parser("synth", help="synthetic traces from published usage statistics")
    s.add_argument("--days", type=int, default=7)
    s.add_argument("--users", type=int, default=10)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="output directory (sessions.csv, states.csv, manifest.json)")
    add_quiet(s)
    s.set_defaults(func=_synth)
    v = ps.add_parser("show", help="summary statistics of a trace directory")
    v.add_argument("dir")
    v.set_defaults(func=_show)


def _synth(args) -> int:
    from swansim.apps.synth import synth_to_dir

    trace = synth_to_dir(args.out, users=args.users, days=args.days, seed=args.seed, progress=not args.quiet)
    print(f"wrote {args.out}")
    _summary(trace)
    return 0


def _show(args) -> int:
    from swansim.apps.traces import load_trace

    _summary(load_trace(args.dir))
    return 0


def _summary(trace) -> None:
    print(f"{len(trace.users)} users x {trace.days:g} days")
    median_s = trace.median_session_s()
    if math.isnan(median_s):
        print("no sessions")
    else:
        print(f"sessions/user/day {trace.sessions_per_day():.2f}; median session {median_s:.0f} s; "
              f"mean session {trace.mean_session_s():.0f} s")
