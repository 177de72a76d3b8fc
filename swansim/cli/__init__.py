"""The `swansim` command. Each subcommand lives in its own module with a `register(sub)`."""
from __future__ import annotations

import argparse
import importlib
import sys

from swansim import __version__
from swansim.errors import InputError

# Modules under swansim.cli, each adding its subcommands; order is the order of --help.
COMMANDS = ["demo", "profiles", "thermal", "traces", "landscape", "ux", "run", "compare"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swansim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"swansim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"swansim.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except InputError as e:
        print(f"swansim: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("swansim: interrupted; results written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
