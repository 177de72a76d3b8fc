"""The fleet's clients: a phone, a base user's trace seen through a time shift, a data size, a seed.

The paper's recipe (Swan, after FedScale): B base users, each copied ``shifts`` times shifted by
one hour. Client ``i`` is base user ``i // shifts`` shifted by ``i % shifts`` hours, so ``N``
clients need ``B = ceil(N / shifts)`` base users (24 x 100 = 2,400 in the paper).

Each client's own randomness (its phone, its data size, its network rate factor) comes from its own
``SeedSequence(seed, spawn_key=(STREAM_CLIENT, i))``: client ``i`` is the same whether the
fleet has 10 or 10,000 clients and whichever process draws it. The other streams of a run
(task data, selection, cost) use the same scheme with their own first key.

Memory: base-user traces are stored once (:class:`~swansim.federated.availability.UserTraces`);
a client is a row of five small arrays (phone, base user, shift, data size, network rate factor) and
:meth:`Population.client` builds its record on demand. :attr:`Population.nbytes` reports both
parts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from swansim.apps.importers import load_fedscale, load_flash
from swansim.apps.synth import synthesize
from swansim.apps.traces import Trace, load_trace
from swansim.errors import InputError
from swansim.federated.availability import Snapshot, Timeline, UserTraces, snapshot
from swansim.federated.network import BANDWIDTH_SIGMA, rate_factor
from swansim.hw.profile import SWAN_PHONES, Catalogue

STREAM_CLIENT, STREAM_TASK, STREAM_SELECT, STREAM_COST = 0, 1, 2, 3
HOUR_S = 3600.0
SHIFTS = 24  # the paper's recipe: one copy per hour of the day
# FedProx's Synthetic data sizes (Li et al., MLSys'20, generate_niid.py): lognormal(4, 2) + 50 samples.
SIZE_LOG_MEAN, SIZE_LOG_SD, SIZE_MIN = 4.0, 2.0, 50


def stream(seed: int, *key: int) -> np.random.Generator:
    """An independent random stream of a run, named by ``key`` (see the module docstring)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in key)))


def default_devices() -> tuple[tuple[str, float], ...]:
    """The Swan paper's five phones, equal weights: the profiles its fleet ran on (`SWAN_PHONES`)."""
    return tuple((name, 1.0) for name in SWAN_PHONES)


def base_users_needed(clients: int, shifts: int = SHIFTS) -> int:
    return math.ceil(clients / shifts)


def base_trace(source: str, users: int, days: int, seed: int) -> Trace:
    """The base users' trace: ``"synthetic"`` (:func:`~swansim.apps.synth.synthesize`), or a path:
    a trace-set directory, a FLASH ``*.json`` or a FedScale pickle (any other file)."""
    if source == "synthetic":
        return synthesize(users, days, seed)
    path = Path(source)
    if path.is_dir():
        return load_trace(path)
    if path.suffix.lower() == ".json":
        return load_flash(path)
    return load_fedscale(path)


@dataclass(frozen=True, slots=True)
class Client:
    """One client, as the local-cost callable and the policies see it."""

    index: int
    device: str          # phone profile name (swansim.hw.profile.Catalogue)
    user: int            # base-user index into the population's traces
    user_id: str
    shift_s: float
    n_samples: int       # local data size
    seed: int            # the run's seed; the client's streams are keyed by its index

    def seed_sequence(self, *key: int) -> np.random.SeedSequence:
        """This client's own stream ``key`` (independent of every other client and stream)."""
        return np.random.SeedSequence(self.seed, spawn_key=(STREAM_CLIENT, self.index, *key))


class Population:
    """N clients over shared base-user traces."""

    def __init__(self, traces: UserTraces, devices: Sequence[str], capacity_j: Sequence[float],
                 device_idx: np.ndarray, user_idx: np.ndarray, shift_s: np.ndarray, n_samples: np.ndarray,
                 seed: int, rate_factors: np.ndarray | None = None):
        self.traces = traces
        self.devices = tuple(devices)
        self.device_capacity_j = np.asarray(capacity_j, dtype=np.float64)
        self.device_idx, self.user_idx = device_idx, user_idx
        self.shift_s, self.n_samples = shift_s, n_samples
        self.seed = int(seed)
        # each client's network rates over the traced network's average (swansim.federated.network)
        self.rate_factor = np.ones(len(user_idx), dtype=np.float32) if rate_factors is None else rate_factors

    @classmethod
    def build(cls, clients: int, seed: int, trace: Trace, devices: Sequence[tuple[str, float]] | None = None,
              shifts: int = SHIFTS, catalogue: Catalogue | None = None,
              bandwidth_sigma: float = BANDWIDTH_SIGMA) -> Population:
        """``clients`` clients from the first ``ceil(clients / shifts)`` users of ``trace`` (sorted ids).

        ``devices`` is a mix ``((profile, weight), ...)``; default :func:`default_devices`.
        ``bandwidth_sigma``: the spread of the clients' network rates (`network.rate_factor`).
        """
        catalogue = catalogue or Catalogue.load()
        mix = tuple(devices) if devices else default_devices()
        names = [n for n, _ in mix]
        weights = np.array([w for _, w in mix], dtype=np.float64)
        capacity = []
        for name in names:
            spec = catalogue.device(name)
            if not spec.battery_capacity_j:
                raise InputError("fleet population", "devices", f"{name!r} has no battery (kind {spec.kind!r})")
            capacity.append(spec.battery_capacity_j)
        b = base_users_needed(clients, shifts)
        users = trace.users
        if b > len(users):
            raise InputError("fleet population", "clients",
                             f"{clients} clients need {b} base users at {shifts} shifts each; the trace has {len(users)}")
        index = np.arange(clients)
        device_idx = np.empty(clients, dtype=np.int16)
        n_samples = np.empty(clients, dtype=np.int32)
        rates = np.empty(clients, dtype=np.float32)
        p = weights / weights.sum()
        for i in range(clients):
            rng = stream(seed, STREAM_CLIENT, i)
            device_idx[i] = rng.choice(len(names), p=p)
            n_samples[i] = int(rng.lognormal(SIZE_LOG_MEAN, SIZE_LOG_SD)) + SIZE_MIN
            rates[i] = rate_factor(rng, bandwidth_sigma)   # drawn last: the draws above are as before
        return cls(UserTraces(trace, users[:b]), names, capacity, device_idx,
                   (index // shifts).astype(np.int32), ((index % shifts) * HOUR_S).astype(np.float32),
                   n_samples, seed, rates)

    def __len__(self) -> int:
        return int(self.user_idx.size)

    def client(self, i: int) -> Client:
        u = int(self.user_idx[i])
        return Client(int(i), self.devices[self.device_idx[i]], u, self.traces.user_ids[u],
                      float(self.shift_s[i]), int(self.n_samples[i]), self.seed)

    @property
    def capacity_j(self) -> np.ndarray:
        """Battery capacity of every client's phone (computed, not stored per client)."""
        return self.device_capacity_j[self.device_idx]

    @property
    def nbytes(self) -> dict[str, int]:
        """Bytes held per client (arrays) and shared (base-user traces, device table)."""
        per_client = sum(a.nbytes for a in (self.device_idx, self.user_idx, self.shift_s, self.n_samples,
                                            self.rate_factor))
        return {"per_client": per_client, "shared": self.traces.nbytes + self.device_capacity_j.nbytes}

    @property
    def bytes_per_client(self) -> float:
        nb = self.nbytes
        return (nb["per_client"] + nb["shared"]) / len(self)

    def snapshot(self, t_s: float) -> Snapshot:
        return snapshot(self.traces, self.user_idx, self.shift_s.astype(np.float64), t_s)

    def timeline(self, i: int, loan_j: float) -> Timeline:
        return Timeline(self.traces, int(self.user_idx[i]), float(self.shift_s[i]), loan_j,
                        float(self.device_capacity_j[self.device_idx[i]]))
