"""`swansim run`: one phone, one model, one policy and the phone's owner for a while
(`swansim.session.phone`: what is recorded, how energy is counted)."""
from __future__ import annotations

import argparse

from swansim.cli.common import add_options, add_quiet, config_from


def register(sub: argparse._SubParsersAction) -> None:
    from swansim.session.phone import RunConfig

    p = sub.add_parser("run", help="one phone, one model, one policy, a usage trace: tables and a trace file")
    add_options(p, RunConfig)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="set a profile figure by its key in the profile files (soc. for the SoC's), as if the file said so, e.g. soc.clusters.big.l2_kib_per_core=512")
    p.add_argument("--out", default="results/run", help="output directory (default: %(default)s)")
    p.add_argument("--perfetto", default=None, metavar="FILE",
                   help="also write a trace for ui.perfetto.dev (gzip-compressed when FILE ends in .gz)")
    add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from swansim.errors import InputError
    from swansim.session.overrides import parse_set
    from pathlib import Path

    from swansim.session.phone import RunConfig, RunResult, run_policy

    overrides = []
    for text in args.set:
        field, values = parse_set(text)
        if len(values) != 1:
            raise InputError("--set", field, "a run takes one value per field (compare sweeps several)")
        overrides.append((field, values[0]))
    cfg = config_from(args, RunConfig, overrides=tuple(overrides))
    from swansim import checks
    from swansim.hw.profile import Catalogue

    cfg.check(Catalogue.load())
    # both outputs can be written, before the run (the trace first: a refused trace creates no --out)
    if args.perfetto is not None:
        if not args.perfetto:
            raise InputError("--perfetto", "''", "empty path (leave the option out for no trace)")
        trace = Path(args.perfetto).resolve()
        if args.out and trace.parent == Path(args.out).resolve() and trace.name in RunResult.file_names():
            raise InputError("--perfetto", args.perfetto, f"is a file the run writes in --out ({trace.name})")
        checks.out_file(args.perfetto, "--perfetto")
    checks.out_dir(args.out)
    result = run_policy(cfg, trace_detail=args.perfetto is not None, progress=not args.quiet)
    if args.perfetto is not None:
        from swansim.session.perfetto import write_perfetto
        write_perfetto(result, args.perfetto)
    out = result.write(args.out, also=(args.perfetto,) if args.perfetto else (), perfetto=args.perfetto)
    s = result.summary
    owner = f"jank {s['jank_pct']:.2f} % of {s['frames']} frames" if s["frames"] else "no app ran"
    declined = ", ".join(f"{k[9:]} {v}" for k, v in s.items() if k.startswith("declined_") and v)
    print(f"{s['device']} {s['model']} {s['policy']}: {s['batches']} batches, {s['latency_s']:.3f} s and "
          f"{s['energy_j']:.2f} J per batch; final plan {s['final_plan']}; {owner}"
          + (f"; declined to train: {declined}" if declined else ""))
    if len(result.decisions):
        print(result.decisions.to_string(index=False, max_rows=40))
    print(f"wrote {out}/" + (f" and {args.perfetto}" if args.perfetto else ""))
    return 0
