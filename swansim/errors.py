"""Errors for bad input: every one names the file, the field and the reason.

This module is a leaf: every layer may import it, it imports nothing of swansim.
"""
from __future__ import annotations


class InputError(ValueError):
    """Bad user input (profile, trace, CLI argument).

    The CLI prints ``str(err)`` as one line and exits with code 2, without a traceback.
    """

    def __init__(self, file: str, field: str, reason: str, line: int | None = None):
        self.file, self.field, self.reason, self.line = str(file), field, reason, line
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {field}: {reason}")
