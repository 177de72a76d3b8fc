"""FedAvg rounds over a fleet: check-in, over-commit, model transfers, drop-outs, the energy loan.

What a client's local training costs is not computed here: a :class:`LocalCost` (one per model
and policy, built by a :data:`CostFactory`) says whether the policy admits training in a state
and what ``n_batches`` mini-batches cost from a start time. Round ``r``, starting at server
time ``T``:

1. **Online**: repayment is settled up to ``T``; a client is online when its base user has a
   trace and its real battery level (traced minus loan) is above the critical level
   (:mod:`swansim.federated.energy`). **Eligible**: online, with a network, and
   ``cost.admit(client, state)``: the clients that check in.
2. **Selection**: ``ceil(overcommit x K)`` eligible clients, those with the smallest random
   priority of the round. Priorities come from the stream ``(STREAM_SELECT, r)`` and are the
   same for every policy (common random numbers: two policies with the same eligible clients
   select the same ones).
3. **Local work**: each selected client downloads the model (:mod:`swansim.federated.network`: its
   size at its network's rate at ``T``), then ``cost.train(request)`` from ``T + download``.
   Declined (``admitted=False``): no time, no energy. Otherwise the client trains for
   ``duration_s`` at constant power ``energy_j / duration_s``; if it did every batch it uploads
   its update at its network's rate when training ends and has *finished* when the upload
   does; else its policy stopped it (a drop-out), as does losing its network before the
   upload. It also drops out earlier, at the exact time, if its energy loan would take its
   battery to the critical level.
4. **Close**: the round closes at the earliest of the K-th finish, the deadline
   ``T + deadline_s`` (none by default: FedScale, which the paper's fleet ran on, closes a round
   at the K-th completion), and the time the last admitted client stops (``T + EMPTY_ROUND_S``
   if none was admitted, or the deadline if earlier). Finishers up to the close, in (time,
   client) order, at most K, are **completed** and aggregated. **Stragglers**: clients still
   working at the close (cancelled), finishers beyond the first K, and clients the callable
   stopped at the deadline: their work is discarded. The other admitted clients **dropped** out.
5. **Energy**: every admitted client pays power x its training time up to its stop, its end,
   its drop-out or the close, whichever is first; the energy loan borrows it.
6. **FedAvg** of the completed clients' local models (``local_steps`` mini-batches each,
   :mod:`swansim.federated.fedavg`), weighted by their data sizes; then the test accuracy. The next
   round starts at the close.

The server's aggregation takes no time (assumption).
"""
from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import pandas as pd

from swansim.federated import fedavg
from swansim.federated.availability import ClientState, Timeline
from swansim.federated.energy import CHARGER_BUDGET, EnergyLoan
from swansim.federated.network import download_s, upload_s
from swansim.federated.population import STREAM_COST, STREAM_SELECT, Client, Population, stream
from swansim.policy.base import DECLINE_REASONS

CHUNK_CLIENTS = 16  # clients per unit of parallel work: fixed, so results do not depend on the worker count
# A round in which no selected client admits training closes this long after it started (assumption:
# the server selects again a minute later; Bonawitz et al. give rounds of 2-3 minutes).
EMPTY_ROUND_S = 60.0
ROUND_COLUMNS = ("policy", "round", "time_h", "round_s", "accuracy", "clients_online", "offline_loan",
                 "eligible", "selected", "declined", *(f"declined_{why}" for why in DECLINE_REASONS), "completed",
                 "stragglers", "dropped", "dropped_loan", "energy_j", "wasted_energy_j")


# ---------------------------------------------------------------- the local-cost interface


@dataclass(frozen=True, slots=True)
class LocalRequest:
    """One client's local training of a round, as handed to :meth:`LocalCost.train`."""

    client: Client
    round: int
    start_s: float           # server time the training starts
    n_batches: int           # local steps E, of ``batch_size`` samples
    batch_size: int
    deadline_s: float        # server time the round's deadline falls; work after it is discarded
    state: ClientState       # the client's state at ``start_s``
    timeline: Timeline       # its traced states over time (what happens during the training)
    carry: Any               # what the last outcome of this client returned as ``carry`` (None at first)
    shared: Any = None       # what clients of its phone model shared so far (``LocalOutcome.shared``), or None

    def seed_sequence(self) -> np.random.SeedSequence:
        """A stream for this client and round, the same whatever process runs it."""
        return np.random.SeedSequence(self.client.seed, spawn_key=(STREAM_COST, self.client.index, self.round))


@dataclass(frozen=True, slots=True)
class LocalOutcome:
    """What a client's local training did.

    ``admitted=False``: the policy declined to start (nothing else is read). Otherwise the
    client worked ``duration_s`` from the start and spent ``energy_j`` beyond what the phone
    draws without the training (the fleet assumes constant power over that time);
    ``batches_done < n_batches`` means the policy stopped early (a drop-out), or the callable
    stopped at the deadline. ``carry`` is kept for the client's next request (e.g. a policy's
    explored profile); it must pickle. ``shared`` (a dict) is what the client offers the
    coordinator of its phone model (Swan: its measured profiles); with sharing on, later
    requests of that model get the pool as ``shared``.
    ``lookups`` is diagnostics only (e.g. memo hits and misses; they depend on which process
    ran the request, so they never reach results). ``declined_why``: why the policy declined,
    one of `swansim.policy.base.DECLINE_REASONS` (anything else counts as "other").
    """

    admitted: bool
    batches_done: int = 0
    duration_s: float = 0.0
    energy_j: float = 0.0
    carry: Any = None
    shared: dict | None = None
    lookups: tuple[int, int] = (0, 0)
    declined_why: str = ""


class LocalCost(Protocol):
    """A policy on a device model, seen from the fleet.

    ``train`` must be a function of its request (the carry included): it may cache (e.g. batch
    costs of states already seen), but any other memory that changes results would differ
    between workers and break a resumed run. What a policy remembers of a client goes in ``carry``.
    """

    def admit(self, client: Client, state: ClientState) -> bool:
        """Would the policy let this client train now (does it check in)?"""

    def train(self, request: LocalRequest) -> LocalOutcome:
        """Run ``request.n_batches`` mini-batches from ``request.start_s`` (or decline)."""

    # Optional, for a cost that caches what it computes (the batch model's memo): ``news()``
    # returns what this process computed since last asked, ``learn(news)`` takes what others
    # did. The coordinator gathers each round's news and hands it to every chunk of the next.


CostFactory = Callable[[str, str], LocalCost]
"""``factory(model, policy) -> LocalCost``; must pickle when the run uses processes or Dask."""


def _check_outcome(o: Any, request: LocalRequest) -> LocalOutcome:
    """A malformed outcome is a bug in the callable: fail loudly with the client and round."""
    where = f"local cost, client {request.client.index}, round {request.round}"
    if not isinstance(o, LocalOutcome):
        raise TypeError(f"{where}: expected a LocalOutcome, got {type(o).__name__}")
    if not o.admitted:
        return o
    if not (0 <= o.batches_done <= request.n_batches):
        raise ValueError(f"{where}: batches_done {o.batches_done} outside 0..{request.n_batches}")
    if not (math.isfinite(o.duration_s) and o.duration_s >= 0 and math.isfinite(o.energy_j) and o.energy_j >= 0):
        raise ValueError(f"{where}: duration_s {o.duration_s} and energy_j {o.energy_j} must be finite and >= 0")
    if o.batches_done > 0 and o.duration_s == 0:
        raise ValueError(f"{where}: {o.batches_done} batches in zero time")
    return o


# ---------------------------------------------------------------- units of parallel work


class WorkContext:
    """What a worker needs, sent once: the population, the task and the cost factory."""

    def __init__(self, population: Population, task: fedavg.SyntheticTask, cost_factory: CostFactory, model: str):
        self.population, self.task, self.cost_factory, self.model = population, task, cost_factory, model
        self._costs: dict[str, LocalCost] = {}

    def cost(self, policy: str) -> LocalCost:
        if policy not in self._costs:
            self._costs[policy] = self.cost_factory(self.model, policy)
        return self._costs[policy]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_costs": {}}  # costs are rebuilt where they run


@dataclass(frozen=True, slots=True)
class TrainJob:
    """A local-training request in transit (the worker rebuilds client, state and timeline)."""

    client: int
    round: int
    start_s: float
    n_batches: int
    batch_size: int
    deadline_s: float
    loan_j: float
    carry: bytes | None      # the client's carry, pickled (None at first)
    shared: Any = None


def train_chunk(ctx: WorkContext, item: tuple[str, list[TrainJob], Any]) -> tuple[list[LocalOutcome], Any]:
    """The chunk's outcomes, and what the cost computed on the way (`LocalCost` news)."""
    policy, jobs, news = item
    cost, pop = ctx.cost(policy), ctx.population
    if news and hasattr(cost, "learn"):
        cost.learn(news)
    out = []
    for j in jobs:
        timeline = pop.timeline(j.client, j.loan_j)
        carry = None if j.carry is None else pickle.loads(j.carry)
        request = LocalRequest(pop.client(j.client), j.round, j.start_s, j.n_batches, j.batch_size, j.deadline_s,
                               timeline.state_at(j.start_s), timeline, carry, j.shared)
        o = _check_outcome(cost.train(request), request)
        # the carry travels and rests pickled: a checkpoint re-pickles only the clients that trained
        if o.carry is not carry:
            o = replace(o, carry=None if o.carry is None else pickle.dumps(o.carry, pickle.HIGHEST_PROTOCOL))
        else:
            o = replace(o, carry=j.carry)
        out.append(o)
    return out, (cost.news() if hasattr(cost, "news") else None)


def models_chunk(ctx: WorkContext, item: tuple[np.ndarray, list[tuple[int, int, int]], int, int, float]) -> np.ndarray:
    weights, clients, steps, batch, learning_rate = item
    return fedavg.local_models(ctx.task, weights, clients, steps, batch, learning_rate)


class Executor(Protocol):
    def map(self, fn: Callable[[WorkContext, Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[fn(ctx, item) for item in items]``, in order, wherever it runs."""


class SerialExecutor:
    def __init__(self, ctx: WorkContext):
        self.ctx = ctx

    def map(self, fn, items):
        return [fn(self.ctx, item) for item in items]


def _chunks(seq: Sequence, n: int = CHUNK_CLIENTS) -> list[list]:
    return [list(seq[i:i + n]) for i in range(0, len(seq), n)]


# ---------------------------------------------------------------- rounds


@dataclass(frozen=True)
class RoundSettings:
    per_round: int
    overcommit: float
    local_steps: int
    batch_size: int
    deadline_s: float                # math.inf: none
    learning_rate: float
    share_profiles: bool = True
    model_bytes: float = 0.0         # moved each way per round (`swansim.federated.network`); 0: no transfers

    @property
    def selected(self) -> int:
        return math.ceil(self.overcommit * self.per_round - 1e-9)


@dataclass
class FleetState:
    """Everything a policy's run carries from round to round (what a checkpoint holds)."""

    round: int
    time_s: float
    weights: np.ndarray
    loan: dict[str, np.ndarray]
    cursor: np.ndarray
    carry: dict[int, bytes] = field(default_factory=dict)   # client -> its carry, pickled (`carry_of`)
    rows: list[dict] = field(default_factory=list)
    shared: dict[str, dict] = field(default_factory=dict)   # phone model -> the coordinator's pool

    def carry_of(self, client: int) -> Any:
        """What ``client``'s last outcome returned as its carry (None if nothing)."""
        blob = self.carry.get(client)
        return None if blob is None else pickle.loads(blob)

    @classmethod
    def initial(cls, population: Population, loan: EnergyLoan) -> FleetState:
        return cls(0, 0.0, fedavg.zero_model(), loan.state(), np.zeros(len(population), dtype=np.int64))


@dataclass(frozen=True)
class _Work:
    """A selected, admitted client's local work as the server sees it."""

    client: int
    end_s: float          # finish (upload done), policy stop, loss of network, or loan drop-out
    finished: bool
    loan_drop: bool
    power_w: float
    train_s: tuple[float, float]   # when it trained (the energy loan's interval)


def close_round(start_s: float, deadline_s: float, per_round: int,
                works: Sequence[_Work]) -> tuple[float, list[int]]:
    """The close time and the completed clients (see the module docstring, step 4)."""
    deadline = start_s + deadline_s
    finishers = sorted((w.end_s, w.client) for w in works if w.finished and w.end_s <= deadline)
    if len(finishers) >= per_round:
        close = finishers[per_round - 1][0]
    elif works:
        close = min(deadline, max(w.end_s for w in works))
    else:
        close = min(deadline, start_s + EMPTY_ROUND_S)
    return close, [c for t, c in finishers if t <= close][:per_round]


class PolicyRun:
    """The rounds of one policy over a population."""

    def __init__(self, policy: str, ctx: WorkContext, executor: Executor, settings: RoundSettings,
                 test_set: tuple[np.ndarray, np.ndarray], critical_pct: float, state: FleetState | None = None,
                 charger_budget: str = CHARGER_BUDGET):
        self.policy, self.ctx, self.executor, self.settings = policy, ctx, executor, settings
        self.population = ctx.population
        self.cost = ctx.cost(policy)
        self.test_x, self.test_y = test_set
        self.loan = EnergyLoan(self.population, critical_pct, charger=charger_budget)
        self.state = state or FleetState.initial(self.population, self.loan)
        self.loan.restore(self.state.loan)
        self.lookups = (0, 0)   # the local costs' (hits, misses) over this process's rounds
        self._news: dict = {}   # what the workers computed last round, for every chunk of the next

    def play_round(self) -> dict:
        st, s, pop, loan = self.state, self.settings, self.population, self.loan
        r, t0 = st.round + 1, st.time_s
        loan.settle(t0)
        snap = pop.snapshot(t0)
        online = loan.online(snap.known, snap.battery_pct)
        offline_loan = snap.known & ~online & (np.where(snap.known, snap.battery_pct, 0.0) > loan.critical_pct)
        capacity = pop.capacity_j
        states = {i: snap.state(i, float(pop.shift_s[i]), float(loan.loan_j[i]), float(capacity[i]))
                  for i in np.flatnonzero(online).tolist()}
        eligible = np.array([i for i, x in states.items()
                             if x.network != "none" and self.cost.admit(pop.client(i), x)], dtype=np.int64)
        priority = stream(pop.seed, STREAM_SELECT, r).random(len(pop))
        chosen = np.sort(eligible[np.argsort(priority[eligible], kind="stable")[:s.selected]])

        device = {int(i): pop.devices[pop.device_idx[i]] for i in chosen}
        start = {int(i): t0 + (download_s(s.model_bytes, states[int(i)].network, float(pop.rate_factor[i]))
                                if s.model_bytes else 0.0)
                 for i in chosen}
        jobs = [TrainJob(int(i), r, start[int(i)], s.local_steps, s.batch_size, t0 + s.deadline_s,
                         float(loan.loan_j[i]), st.carry.get(int(i)),
                         st.shared.get(device[int(i)]) if s.share_profiles else None)
                for i in chosen]
        parts = self.executor.map(train_chunk, [(self.policy, c, self._news) for c in _chunks(jobs)])
        outcomes = [o for part, _ in parts for o in part]
        self._news = {k: v for _, news in parts if news for k, v in news.items()}
        if self._news and hasattr(self.cost, "learn"):
            self.cost.learn(self._news)   # the coordinator's memo is the merged one (it is saved)

        works = []
        declined = dict.fromkeys(DECLINE_REASONS, 0)
        for job, o in zip(jobs, outcomes):
            self.lookups = (self.lookups[0] + o.lookups[0], self.lookups[1] + o.lookups[1])
            if s.share_profiles and o.shared:
                # the coordinator keeps the first report of each entry (clients in index order:
                # the same pool whichever process ran them); requests see it from the next round
                pool = st.shared.setdefault(device[job.client], {})
                for k, v in o.shared.items():
                    pool.setdefault(k, v)
            if o.carry is None:
                st.carry.pop(job.client, None)
            else:
                st.carry[job.client] = o.carry
            if not o.admitted:
                declined[o.declined_why if o.declined_why in declined else "other"] += 1
                continue
            end = job.start_s + o.duration_s
            power = o.energy_j / o.duration_s if o.duration_s > 0 else 0.0
            stop = loan.train(job.client, t0, end, power, commit=False, start_s=job.start_s)
            trained = stop >= end and o.batches_done == s.local_steps
            up = 0.0
            if trained and s.model_bytes:
                up = upload_s(s.model_bytes, pop.timeline(job.client, job.loan_j).state_at(end).network,
                              float(pop.rate_factor[job.client]))
            finished = trained and math.isfinite(up)
            works.append(_Work(job.client, end + up if finished else min(stop, end), finished, stop < end, power,
                               (job.start_s, end)))
        close, completed = close_round(t0, s.deadline_s, s.per_round, works)

        energy = wasted = 0.0
        done = set(completed)
        dropped = dropped_loan = stragglers = 0
        for w in works:
            t_start, t_end = w.train_s
            stop = loan.train(w.client, t0, min(t_end, close), w.power_w, start_s=t_start)
            spent = w.power_w * max(0.0, stop - t_start)
            energy += spent
            if w.client in done:
                continue
            wasted += spent
            # Still working at the close, finished but not among the first K, or cut at the deadline.
            if w.finished or w.end_s > close or w.end_s >= t0 + s.deadline_s:
                stragglers += 1
            else:
                dropped += 1
                dropped_loan += w.loan_drop

        if completed:
            self._aggregate(completed)
        st.round, st.time_s, st.loan = r, close, loan.state()
        row = dict(policy=self.policy, round=r, time_h=close / 3600.0, round_s=close - t0,
                   accuracy=fedavg.accuracy(st.weights, self.test_x, self.test_y),
                   clients_online=int(online.sum()), offline_loan=int(offline_loan.sum()),
                   eligible=int(eligible.size), selected=int(chosen.size), declined=len(jobs) - len(works),
                   **{f"declined_{why}": n for why, n in declined.items()},
                   completed=len(completed), stragglers=stragglers, dropped=dropped, dropped_loan=dropped_loan,
                   energy_j=energy, wasted_energy_j=wasted)
        st.rows.append(row)
        return row

    def _aggregate(self, completed: list[int]) -> None:
        st, s, pop = self.state, self.settings, self.population
        clients = sorted(completed)
        specs = [(k, int(pop.n_samples[k]), int(st.cursor[k])) for k in clients]
        items = [(st.weights, c, s.local_steps, s.batch_size, s.learning_rate) for c in _chunks(specs)]
        models = np.concatenate(self.executor.map(models_chunk, items))
        st.weights = fedavg.fedavg(models, pop.n_samples[clients])
        rows = s.local_steps * s.batch_size
        for k, n_k, cursor in specs:
            st.cursor[k] = (cursor + rows) % n_k


# ---------------------------------------------------------------- summary

SUMMARY_COLUMNS = ("policy", "rounds", "target_accuracy", "time_to_target_h", "energy_to_target_j",
                   "final_accuracy", "best_accuracy", "total_time_h", "total_energy_j", "wasted_energy_j",
                   "median_round_s", "mean_clients_online", "completed", "stragglers", "dropped", "dropped_loan",
                   "baseline", "speedup", "energy_efficiency", "round_speedup")


def summarize(rounds: pd.DataFrame, target_accuracy: float, baseline: str) -> pd.DataFrame:
    """One row per policy: time and energy to the target accuracy, totals, and ratios to ``baseline``.

    ``speedup`` = baseline's time to target / the policy's; ``energy_efficiency`` = baseline's
    energy to target / the policy's (NaN where either never reached the target). A time to
    target is the round at which the noisy accuracy first crosses it, so these ratios carry
    that noise; ``round_speedup`` = baseline's median round / the policy's does not.
    """
    rows = []
    for policy, g in rounds.groupby("policy", sort=False):
        g = g.sort_values("round")
        hit = np.flatnonzero(g["accuracy"].to_numpy() >= target_accuracy)
        energy = g["energy_j"].cumsum().to_numpy()
        rows.append(dict(
            policy=policy, rounds=int(g["round"].max()), target_accuracy=target_accuracy,
            time_to_target_h=float(g["time_h"].iloc[hit[0]]) if hit.size else math.nan,
            energy_to_target_j=float(energy[hit[0]]) if hit.size else math.nan,
            final_accuracy=float(g["accuracy"].iloc[-1]), best_accuracy=float(g["accuracy"].max()),
            total_time_h=float(g["time_h"].iloc[-1]), total_energy_j=float(energy[-1]),
            wasted_energy_j=float(g["wasted_energy_j"].sum()), median_round_s=float(g["round_s"].median()),
            mean_clients_online=float(g["clients_online"].mean()),
            **{c: int(g[c].sum()) for c in ("completed", "stragglers", "dropped", "dropped_loan")}))
    out = pd.DataFrame(rows)
    base = out.set_index("policy").loc[baseline]
    out["baseline"] = baseline
    out["speedup"] = base["time_to_target_h"] / out["time_to_target_h"]
    out["energy_efficiency"] = base["energy_to_target_j"] / out["energy_to_target_j"]
    out["round_speedup"] = base["median_round_s"] / out["median_round_s"]
    return out[list(SUMMARY_COLUMNS)]
