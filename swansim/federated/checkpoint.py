"""A policy's fleet run on disk, append-only: what changed each round, never the whole state again.

``checkpoints/<policy>.log`` is a sequence of records, each framed as an 8-byte little-endian
length, the sha256 of the body, and the body (a pickle):

1. a header: the format and the run's identity (the policy, every config field, the trace's
   content digest, the code and profiles' fingerprint; `swansim.federated.fleet`);
2. the first round's whole `FleetState`;
3. one record per later round: what that round changed - the round, the clock and the model;
   the loan's and the data cursors' entries that moved; the carries of the clients that trained
   (a trained client's carry is its pickled phone); the coordinator's new pool entries; the
   round's row.

A round appends one record (its size grows with the clients that trained, not with all of
them). Once the rounds' records outweigh the whole state, the log is written afresh as header and
whole state (atomically: a new file renamed into place), so it stays under about twice the state
and a round costs about twice its own record in writes. Reading replays the records in order. An append cut short (a process killed while writing) leaves a last record
that runs past the end of the file: it is dropped, and the file cut back to the round before,
so a resume continues from there. Any other damage - a record whose bytes do not match its
digest, a header of another run - is one `InputError` naming the file.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import struct
from pathlib import Path

import numpy as np

from swansim.errors import InputError
from swansim.federated.rounds import FleetState
from swansim.results import write_bytes

FORMAT = 5
_FRAME = struct.Struct("<Q32s")   # body length, sha256 of the body


def _frame(body: bytes) -> bytes:
    return _FRAME.pack(len(body), hashlib.sha256(body).digest()) + body


def _moved(new: np.ndarray, old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of ``new`` that differ from ``old``: (indices, values). A NaN counts as moved:
    logged again, which replays to the same array."""
    idx = np.flatnonzero(new != old)
    return idx, new[idx]


class Checkpoint:
    """One policy's log (module doc). ``identity`` is what a record of this run must carry."""

    def __init__(self, path: Path, identity: dict):
        self.path, self.identity = Path(path), identity
        self._end = 0                 # bytes of the file that hold whole, valid records
        self._rounds_bytes = 0        # of them, the rounds' records after the whole state
        self._state_bytes = 0         # the whole state's record
        self._seen: FleetState | None = None   # the state as the log has it, to diff the next round against

    # -- reading ------------------------------------------------------------------------------

    def load(self, check=None, header_only: bool = False) -> FleetState | None:
        """The state of the last whole round in the log (None: no log yet, or ``header_only``).
        ``check(header)`` raises an `InputError` if the header is not of this run."""
        if not self.path.exists():
            return None
        data = self.path.read_bytes()
        records, end = self._records(data, 1 if header_only else None)
        if not header_only:
            self._end = end
        if not records:
            raise InputError(str(self.path), "checkpoint", "no header (not a checkpoint log); delete it to start "
                                                           "this policy afresh")
        try:
            header = pickle.loads(records[0])
            fmt = header.get("format")
        except Exception as e:
            raise InputError(str(self.path), "checkpoint", f"unreadable header ({type(e).__name__}); delete it to "
                                                           "start this policy afresh") from None
        if fmt != FORMAT:
            raise InputError(str(self.path), "format", f"checkpoint format {fmt!r}, expected {FORMAT}")
        if check is not None:
            check(header.get("identity", {}))
        if len(records) == 1 or header_only:
            return None
        state: FleetState = pickle.loads(records[1])
        for body in records[2:]:
            _apply(state, pickle.loads(body))
        self._state_bytes = _FRAME.size + len(records[1])
        self._rounds_bytes = sum(_FRAME.size + len(b) for b in records[2:])
        self._seen = _copy(state)
        return state

    def _records(self, data: bytes, limit: int | None = None) -> tuple[list[bytes], int]:
        """The bodies of the whole records in ``data`` (the first ``limit`` of them) and where
        they end; a record whose digest does not match is damage (an InputError), one cut short
        at the end is an unfinished append."""
        out, at = [], 0
        while at + _FRAME.size <= len(data) and (limit is None or len(out) < limit):
            n, digest = _FRAME.unpack_from(data, at)
            start = at + _FRAME.size
            if start + n > len(data):
                break   # an append cut short
            body = data[start:start + n]
            if hashlib.sha256(body).digest() != digest:
                raise InputError(str(self.path), "sha256", f"record {len(out)} does not match its digest (damaged or "
                                                           "edited); delete the file to start this policy afresh")
            out.append(body)
            at = start + n
        return out, at

    # -- writing ------------------------------------------------------------------------------

    def append(self, state: FleetState) -> None:
        """Log what ``state`` (one round on from the last) changed; the header and the whole
        state first, if the log is new."""
        record = None if self._seen is None else \
            _frame(pickle.dumps(_delta(self._seen, state), protocol=pickle.HIGHEST_PROTOCOL))
        if record is None or self._rounds_bytes + len(record) > self._state_bytes:
            self._write_afresh(state)
        else:
            self._append(record)
        self._seen = _copy(state)

    def _write_afresh(self, state: FleetState) -> None:
        """Header and whole state, replacing the file whole or not at all."""
        whole = _frame(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        body = _frame(pickle.dumps({"format": FORMAT, "identity": self.identity})) + whole
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(self.path, body)
        self._end, self._state_bytes, self._rounds_bytes = len(body), len(whole), 0

    def _append(self, record: bytes) -> None:
        try:
            with open(self.path, "r+b") as f:
                f.truncate(self._end)   # drop an unfinished append
                f.seek(self._end)
                f.write(record)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise InputError(str(self.path), "write", f"cannot write ({e.strerror or e}); files written before it "
                                                      "are kept") from None
        self._end += len(record)
        self._rounds_bytes += len(record)


def _copy(state: FleetState) -> FleetState:
    """What the next round's record is diffed against: arrays copied, carries by reference
    (a client's carry is replaced, never changed in place), pools as the keys they had."""
    return FleetState(state.round, state.time_s, state.weights, {k: v.copy() for k, v in state.loan.items()},
                      state.cursor.copy(), dict(state.carry), list(state.rows),
                      {m: dict(pool) for m, pool in state.shared.items()})


def _delta(old: FleetState, new: FleetState) -> dict:
    carry = {c: b for c, b in new.carry.items() if old.carry.get(c) is not b}
    carry.update({c: None for c in old.carry if c not in new.carry})
    return {"round": new.round, "time_s": new.time_s, "weights": new.weights,
            "loan": {k: _moved(v, old.loan[k]) for k, v in new.loan.items()},
            "cursor": _moved(new.cursor, old.cursor), "carry": carry,
            "shared": {m: {k: v for k, v in pool.items() if k not in old.shared.get(m, {})}
                       for m, pool in new.shared.items()},
            "rows": new.rows[len(old.rows):]}


def _apply(state: FleetState, d: dict) -> None:
    state.round, state.time_s, state.weights = d["round"], d["time_s"], d["weights"]
    for k, (idx, vals) in d["loan"].items():
        state.loan[k][idx] = vals
    idx, vals = d["cursor"]
    state.cursor[idx] = vals
    for c, blob in d["carry"].items():
        if blob is None:
            state.carry.pop(c, None)
        else:
            state.carry[c] = blob
    for m, entries in d["shared"].items():
        state.shared.setdefault(m, {}).update(entries)
    state.rows.extend(d["rows"])
