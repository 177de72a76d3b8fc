"""Errors for bad input: every one names where the bad value came from, what in it, and why.

This module is a leaf: every layer may import it, it imports nothing of swansim.
"""
from __future__ import annotations


class InputError(ValueError):
    """Bad user input (profile, trace, command-line option, configuration in code).

    ``where`` is where the value came from: a file (with ``line`` where it has lines), a
    command-line option such as ``--batch``, or ``config`` for a value given in code;
    ``field`` is what inside it is wrong (a dotted key, a column, the value as given);
    ``reason`` says why. The CLI prints ``str(err)`` - ``where: field: reason`` - as one
    line and exits with code 2, without a traceback.
    """

    def __init__(self, where: str | None = None, field: str = "", reason: str = "", line: int | None = None,
                 *, file: str | None = None):
        # ``file=`` is the older keyword for ``where`` (still used in swansim.dnn).
        where = file if where is None else where
        self.where, self.field, self.reason, self.line = str(where), str(field), reason, line
        at = _printable(self.where) + (f":{line}" if line is not None else "")
        # one line whatever the parts hold (a TOML message may carry a line break)
        super().__init__(" ".join(f"{at}: {_printable(self.field)}: {reason}".splitlines()))


def _printable(text: str) -> str:
    """User-given text as it can be shown on one line: quoted with escapes if it holds control characters."""
    return text if text.isprintable() else repr(text)
