"""The `swansim` command. Each subcommand lives in its own module with a `register(sub)`.

One error path: anything the user can cause - a malformed option, a bad value, a bad file - is
an `InputError`, printed as one line ``swansim: error: where: field: reason`` with exit code 2
before any simulation starts. Only a bug prints a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import re
import signal
import sys
import threading
from typing import Callable

from swansim import __version__
from swansim.errors import InputError
from swansim.registry import Registry

# The subcommands: each a function adding its parser to argparse's subparsers (a module under
# swansim.cli, imported when the parser is built; other packages may add theirs through the
# entry-point group ``swansim.commands``). Registration order is the order of --help.
COMMANDS: Registry[Callable[[argparse._SubParsersAction], None]] = Registry("command", entry_points="swansim.commands")
for _name in ("demo", "profiles", "thermal", "traces", "landscape", "ux", "run", "compare", "fleet"):
    COMMANDS.register(_name, lambda sub, module=f"swansim.cli.{_name}": importlib.import_module(module).register(sub))


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors raised as InputError instead of printed with a usage block."""

    def error(self, message: str):
        m = re.match(r"argument ([^:]+): (.*)", message)
        if not m:  # e.g. "the following arguments are required: --out", "unrecognized arguments: x"
            # a subcommand's name (the experiment scripts print their own name as the prefix)
            where = self.prog.removeprefix("swansim").strip() if self.prog.startswith("swansim") else ""
            where = where or "command line"
            raise InputError(where, "arguments", message)
        where, reason = m.group(1).split("/")[0], m.group(2)
        value = re.match(r"invalid (\w+) value: (.*)", reason)
        if value:
            kind = {"int": "an integer", "float": "a number"}.get(value.group(1), value.group(1))
            raise InputError(where, value.group(2), f"not {kind}")
        choice = re.match(r"invalid choice: (.*?) \(choose from (.*)\)$", reason)
        if choice:
            raise InputError(where, choice.group(1), f"not one of {choice.group(2)}")
        raise InputError(where, "value", reason)


DESCRIPTION = """\
Simulate smartphones that train neural networks in the background while their owners use them:
where training should run (which cores, per layer), what it costs in time and energy, and what
it does to the owner - on one phone or on a federated fleet of thousands."""

EPILOG = """\
examples:
  swansim profiles list                                    the phones, boards and SoCs
  swansim landscape --device pixel3 --model shufflenet_v2_x2_0
  swansim run --device pixel3 --model resnet34 --policy swan --duration 240
  swansim compare --devices pixel3,oneplus8 --policies swan,pytorch-default
  swansim fleet --clients 240 --per-round 20 --rounds 20 --out results/fleet
  swansim demo --out results                               the quick reproduction

'swansim COMMAND --help' lists a command's options with their defaults. Bad input is one line
'swansim: error: where: field: reason' and exit code 2, before any simulation starts."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="swansim", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"swansim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for add in COMMANDS.values():
        add(sub)
    return parser


def guarded(fn: Callable[[], int | None], prog: str) -> int:
    """Run ``fn`` as a command: bad input is one line ``prog: error: where: field: reason`` and
    exit code 2, Ctrl-C one line and 130 (the experiment scripts run their ``main`` this way too)."""
    try:
        return fn() or 0
    except InputError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if threading.current_thread() is threading.main_thread():
            # an impatient second Ctrl-C must not cut the exit short (Python would die of it: -2)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(f"{prog}: interrupted; files already complete are kept, none is half written", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    def command() -> int | None:
        args = build_parser().parse_args(argv)
        return args.func(args)
    return guarded(command, "swansim")


if __name__ == "__main__":
    sys.exit(main())
