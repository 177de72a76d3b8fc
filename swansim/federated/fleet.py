"""A fleet run: one flat config, validated up front; rounds in processes or on Dask; resumable.

``run_fleet(config, cost, out_dir)`` runs every policy of ``config`` for ``config.rounds``
rounds over the same population and task, and writes into ``out_dir``:

* ``rounds.csv``: one row per policy and round (:data:`~swansim.federated.rounds.ROUND_COLUMNS`);
* ``summary.csv``: one row per policy (:func:`~swansim.federated.rounds.summarize`);
* ``manifest.json``: the config, the seed, the population's make-up, and what
  :func:`swansim.results.write_manifest` adds (version, commit, when);
* ``checkpoints/<policy>.log``: every completed round appends what it changed
  (`swansim.federated.checkpoint`: the clients that trained, the loans and cursors that moved,
  the round's row), so a round writes kilobytes, not the whole state. Run the same config into
  the same directory again and it continues from each policy's last completed round; the
  results equal those of an uninterrupted run. Raising ``rounds`` continues a finished run. A
  checkpoint carries its run's identity - the policy, every config field, the trace's content
  digest, the code and profiles' fingerprint - and every record its sha256: one of another run,
  of another policy, of changed code or an edited trace, or whose bytes changed, is refused with
  one line naming the file and what differs.

While a run writes its directory it holds ``.lock`` there (its process id): a second run into
the same directory is refused while the first is alive.

Clients' local work (the cost callable, then the local SGD of the completed clients) runs in
chunks of a fixed size: in this process (``jobs=1``), in a process pool (``jobs>1``), or on
Dask distributed (``dask_address``: a scheduler address, or ``"local"`` for a local cluster of
``jobs`` worker processes). Same seed, same numbers, whichever way: randomness is keyed by
client and round, never drawn from a shared stream, and chunking does not depend on the
worker count. (Bit-identity assumes the same numpy/BLAS build on every worker.) The CSVs hold
no wall-clock figures, so reruns give the same bytes; only the manifest says when.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from tqdm import tqdm

from swansim import checks
from swansim.apps.synth import MAX_DAYS, MAX_USER_DAYS
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP, runtime_digest, training_runtime
from swansim.dnn.tasks import SWAN_TASKS
from swansim.errors import InputError
from swansim.federated import fedavg
from swansim.federated.checkpoint import Checkpoint
from swansim.federated.energy import CHARGER_BUDGET, CHARGER_BUDGETS, CRITICAL_PCT
from swansim.federated.network import BANDWIDTH_SIGMA, model_bytes
from swansim.federated.population import SHIFTS, Population, base_trace, base_users_needed
from swansim.federated.rounds import (ROUND_COLUMNS, CostFactory, FleetState, PolicyRun, RoundSettings,
                                  SerialExecutor, WorkContext, summarize)
from swansim.hw.profile import Catalogue
from swansim.options import option
from swansim.policy.base import policy_names
from swansim.pool import new_pool, one_blas_thread, stop_pool
from swansim.results import DirLock, sha256_of, write_csv, write_manifest

WHERE = "fleet config"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class FleetConfig:
    """Everything a fleet run depends on (besides the cost factory). Defaults are the paper's where it has one."""

    model: str = option("resnet34", help="the Swan task whose training cost the phones pay")
    policies: tuple[str, ...] = option(("swan", "pytorch-default"), help="the policies compared, one fleet each",
                                       known=policy_names)
    baseline: str = option("", help="ratios are relative to this policy (default: pytorch-default, the paper's "
                                    "baseline, if it runs, else the first)")
    clients: int = option(2400, help="clients: base users x 24 hourly shifts (the paper: 100 x 24)")
    per_round: int = option(100, help="K, participants aggregated per round")
    overcommit: float = option(1.3, help="the server selects this many times K (Bonawitz et al., MLSys'19: 130%)")
    rounds: int = option(200, help="rounds per policy")
    local_steps: int | None = option(None, help="mini-batches per client and round (default: the task's FedScale "
                                                "figure, swansim.dnn.tasks: 20 OpenImage, 30 Google Speech)")
    batch_size: int = option(16, help="mini-batch size (the Swan paper's)")
    learning_rate: float = option(fedavg.LEARNING_RATE, help="FedAvg's client learning rate")
    deadline_s: float | None = option(None, flag="--deadline", help="a round's deadline in seconds (default: none, "
                                                                    "as FedScale: a round closes at the K-th completion)")
    transfers: bool = option(True, flag="--no-transfers", help="model download and upload times at the client's "
                                                               "network rate (swansim.federated.network; --no-transfers: none)")
    bandwidth_sigma: float = option(BANDWIDTH_SIGMA, help="spread of the clients' network rates: log-sd of each "
                                                          "client's lognormal factor (mean 1) on its network's "
                                                          "average (swansim.federated.network; 0: every client at "
                                                          "the average)")
    target_accuracy: float = option(0.35, help="time-to-accuracy target (Synthetic(1, 1) with 2,400 clients tops "
                                               "out near 0.44)")
    seed: int = option(0, help="seed of the population, the traces and the selection")
    trace: str = option("synthetic", help="'synthetic', a trace-set directory, a FLASH .json or a FedScale pickle")
    trace_days: int = option(7, help="days of synthetic traces")
    shifts: int = option(SHIFTS, help="copies of each base user, one hour apart")
    devices: tuple[tuple[str, float], ...] = option((), help="(profile, weight) pairs: the phones' mix (default: "
                                                            "the Swan paper's five phones, equally)")
    alpha: float = option(1.0, help="Synthetic(alpha, beta)'s alpha (FedProx's most heterogeneous setting: 1)")
    beta: float = option(1.0, help="Synthetic(alpha, beta)'s beta")
    test_samples: int = option(10_000, help="the test set's samples")
    critical_battery_pct: float = option(CRITICAL_PCT, help="a client below this battery level drops out (%)")
    charger_budget: str = option(CHARGER_BUDGET, help="the energy loan's daily charger energy (swansim.federated."
                                                      "energy): 'traced', the trace's own daily rise in level (the "
                                                      "paper's traces); 'plugged', the charger's power over the "
                                                      "traced plugged-in hours (the synthetic owners' loans are repaid every night)",
                                 known=lambda: CHARGER_BUDGETS)
    runtime: str = option("pytorch", help=TRAINING_RUNTIME_HELP)
    # Swan paper: "a coordinator may share finished profiles between devices of the same model";
    # on here (assumption: every profile a client reports, first report per choice kept)
    share_profiles: bool = option(True, flag="--no-share-profiles",
                                  help="a coordinator shares finished profiles between phones of a model "
                                       "(--no-share-profiles: each phone explores every choice itself)")

    @property
    def baseline_policy(self) -> str:
        if self.baseline:
            return self.baseline
        return "pytorch-default" if "pytorch-default" in self.policies else self.policies[0]

    @property
    def steps(self) -> int:
        """Mini-batches per client and round: ``local_steps``, or the task's FedScale figure."""
        if self.local_steps is not None:
            return self.local_steps
        return SWAN_TASKS[self.model].fl_local_steps

    def settings(self) -> RoundSettings:
        size = model_bytes(self.model) if self.transfers and self.model in SWAN_TASKS else 0.0
        deadline_s = math.inf if self.deadline_s is None else self.deadline_s
        return RoundSettings(self.per_round, self.overcommit, self.steps, self.batch_size, deadline_s,
                             self.learning_rate, self.share_profiles, size)


@dataclass(frozen=True)
class FleetResult:
    rounds: pd.DataFrame
    summary: pd.DataFrame
    out_dir: Path
    bytes_per_client: float
    lookups: tuple[int, int] = (0, 0)   # the local costs' (hits, misses) in the rounds run now (diagnostics)


# ---------------------------------------------------------------- validation


def _int(value: Any, name: str, lo: int, hi: int | None = None) -> None:
    if not checks.is_int(value):
        raise InputError(WHERE, name, f"expected an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise InputError(WHERE, name, f"must be {lo}..{hi}, got {value}" if hi is not None
                         else f"must be >= {lo}, got {value}")


def _float(value: Any, name: str, lo: float, hi: float = math.inf, lo_open: bool = False,
           hi_open: bool = False) -> None:
    if not checks.is_number(value):
        raise InputError(WHERE, name, f"expected a finite number, got {value!r}")
    if value < lo or (lo_open and value == lo) or value > hi or (hi_open and value == hi):
        lb, hb = "(" if lo_open else "[", ")" if hi_open or hi == math.inf else "]"
        raise InputError(WHERE, name, f"must be in {lb}{lo:g}, {hi:g}{hb}, got {value!r}")


# The bound on a fleet's work: client-batches (policies x rounds x selected clients x local
# steps); 2,400 clients at the paper's scale make ~0.1-1 M, each a memo hit of ~0.1 ms or a
# simulation of ~0.2 s.
MAX_CLIENT_BATCHES = 5_000_000


def validate(config: FleetConfig, catalogue: Catalogue | None = None, no_limit: bool = False) -> None:
    """Check every field; the first problem raises ``InputError('fleet config', field, reason)``.
    ``no_limit`` lifts the bound on the total work (`MAX_CLIENT_BATCHES`)."""
    c = config
    if not isinstance(c, FleetConfig):
        raise InputError(WHERE, "config", f"expected a FleetConfig, got {type(c).__name__}")
    if not isinstance(c.model, str) or not c.model:
        raise InputError(WHERE, "model", f"expected a model name, got {c.model!r}")
    if not isinstance(c.policies, tuple) or not c.policies:
        raise InputError(WHERE, "policies", f"expected a non-empty tuple of names, got {c.policies!r}")
    for p in c.policies:
        if not isinstance(p, str) or not _NAME.match(p):
            raise InputError(WHERE, "policies", f"not a policy name: {p!r} (letters, digits, '.', '_', '-')")
    if len(set(c.policies)) != len(c.policies):
        raise InputError(WHERE, "policies", f"duplicate names in {', '.join(c.policies)}")
    if c.baseline and c.baseline not in c.policies:
        raise InputError(WHERE, "baseline", f"{c.baseline!r} is not among the policies ({', '.join(c.policies)})")
    # bounds: a typo must not start a run of days (2,400 clients x 100 rounds x 3 tasks is the
    # paper-scale run; 100,000 clients or 10,000 rounds is far beyond it)
    _int(c.clients, "clients", 1, 100_000)
    _int(c.per_round, "per_round", 1, c.clients)
    _float(c.overcommit, "overcommit", 1.0)
    _float(c.bandwidth_sigma, "bandwidth_sigma", 0.0, 3.0)
    _int(c.rounds, "rounds", 1, 10_000)
    if c.local_steps is None and c.model not in SWAN_TASKS:
        raise InputError(WHERE, "local_steps", f"needed: {c.model!r} is not a Swan task with FedScale's figure "
                                               f"(tasks: {', '.join(SWAN_TASKS)})")
    if c.local_steps is not None:
        _int(c.local_steps, "local_steps", 1, 1_000)
    _int(c.batch_size, "batch_size", 1)
    _float(c.learning_rate, "learning_rate", 0.0, lo_open=True)
    if c.deadline_s is not None:
        _float(c.deadline_s, "deadline_s", 0.0, lo_open=True)
    _float(c.target_accuracy, "target_accuracy", 0.0, 1.0, lo_open=True)
    _int(c.seed, "seed", 0)
    _int(c.trace_days, "trace_days", 1, MAX_DAYS)
    _int(c.shifts, "shifts", 1, 24)
    _float(c.alpha, "alpha", 0.0)
    _float(c.beta, "beta", 0.0)
    _int(c.test_samples, "test_samples", 1)
    _float(c.critical_battery_pct, "critical_battery_pct", 0.0, 100.0, hi_open=True)
    if c.charger_budget not in CHARGER_BUDGETS:
        raise InputError(WHERE, "charger_budget", f"expected one of {', '.join(CHARGER_BUDGETS)}, got {c.charger_budget!r}")
    work = len(c.policies) * c.rounds * math.ceil(c.per_round * c.overcommit) * c.steps
    checks.work(work, MAX_CLIENT_BATCHES, "client-batches (policies x rounds x selected x local steps)",
                WHERE, no_limit)
    for flag in ("share_profiles", "transfers"):
        if not isinstance(getattr(c, flag), bool):
            raise InputError(WHERE, flag, f"expected True or False, got {getattr(c, flag)!r}")
    if not isinstance(c.trace, str) or not c.trace:
        raise InputError(WHERE, "trace", f"expected 'synthetic' or a path, got {c.trace!r}")
    if c.trace != "synthetic" and not Path(c.trace).exists():
        raise InputError(WHERE, "trace", f"no such file or directory: {c.trace}")
    users = base_users_needed(c.clients, c.shifts)
    if c.trace == "synthetic" and users * c.trace_days > MAX_USER_DAYS:
        raise InputError(WHERE, "trace_days", f"{users} base users x {c.trace_days} days is more than the "
                                              f"{MAX_USER_DAYS} user-days a synthetic trace may hold")
    training_runtime(c.runtime, WHERE)
    if not isinstance(c.devices, tuple):
        raise InputError(WHERE, "devices", f"expected a tuple of (profile, weight), got {c.devices!r}")
    if c.devices:
        catalogue = catalogue or Catalogue.load()
        seen: set[str] = set()
        for entry in c.devices:
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)):
                raise InputError(WHERE, "devices", f"expected (profile, weight), got {entry!r}")
            name, weight = entry
            if name in seen:
                raise InputError(WHERE, "devices", f"{name!r} given twice (one weight a profile)")
            seen.add(name)
            if name not in catalogue.devices:
                raise InputError(WHERE, "devices", f"unknown profile {name!r} (known: {', '.join(catalogue.devices)})")
            if not catalogue.devices[name].battery_capacity_j:
                raise InputError(WHERE, "devices", f"{name!r} has no battery (kind {catalogue.devices[name].kind!r})")
            _float(weight, f"devices.{name}", 0.0, lo_open=True)


def check_run(jobs: Any, dask_address: Any, out_dir: Any) -> Path:
    _int(jobs, "jobs", 1)
    if dask_address is not None and (not isinstance(dask_address, str) or not dask_address):
        raise InputError(WHERE, "dask_address", f"expected an address or 'local', got {dask_address!r}")
    if dask_address not in (None, "local"):
        _check_scheduler(dask_address)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(WHERE, "out_dir", f"exists and is not a directory: {out}")
    return out


def _check_scheduler(address: str, timeout_s: float = 3.0) -> None:
    """A Dask scheduler answers at ``address`` ("tcp://host:port" or "host:port"), checked before
    any work (a wrong address would otherwise fail after the prefill, on a 30 s timeout)."""
    import socket

    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(WHERE, "dask_address", f"expected host:port or 'local', got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as e:
        raise InputError(WHERE, "dask_address", f"no scheduler answers at {address} ({getattr(e, 'strerror', None) or e})") \
            from None


# ---------------------------------------------------------------- executors

_WORKER_CTX: WorkContext | None = None
_DASK_CTX: dict[str, WorkContext] = {}


def _init_worker(ctx: WorkContext) -> None:
    global _WORKER_CTX
    _WORKER_CTX = ctx


def _in_worker(fn, item):
    return fn(_WORKER_CTX, item)


class _ProcessExecutor:
    """A local process pool; each worker gets the context once, at start."""

    def __init__(self, ctx: WorkContext, jobs: int):
        self.pool = new_pool(jobs, _init_worker, ctx)
        self._ok = True

    def map(self, fn, items):
        try:
            return list(self.pool.map(_in_worker, [fn] * len(items), items))
        except BaseException:
            self._ok = False
            raise

    def abort(self) -> None:
        """End the workers now (an interrupt, or another policy's error)."""
        self._ok = False
        stop_pool(self.pool)

    def close(self) -> None:
        if self._ok:
            self.pool.shutdown(cancel_futures=True)
        else:
            stop_pool(self.pool)    # interrupted: do not wait for running workers


def _on_dask_worker(token: str, blob: bytes, fn, item):
    if token not in _DASK_CTX:
        import cloudpickle
        one_blas_thread()
        _DASK_CTX.clear()
        _DASK_CTX[token] = cloudpickle.loads(blob)
    return fn(_DASK_CTX[token], item)


class _DaskExecutor:
    """Dask distributed: a scheduler at ``address``, or a local cluster of ``jobs`` processes.

    The context travels once per worker, cloudpickled (so a cost factory defined in a script's
    ``__main__`` works too).
    """

    def __init__(self, ctx: WorkContext, address: str, jobs: int):
        import cloudpickle
        from distributed import Client, LocalCluster
        self.cluster = None
        if address == "local":
            self.cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                        dashboard_address=None)
            self.client = Client(self.cluster)
        else:
            self.client = Client(address)
        blob = cloudpickle.dumps(ctx)
        self.token = hashlib.sha256(blob).hexdigest()
        self.blob = self.client.scatter(blob, broadcast=True, hash=False)

    def map(self, fn, items):
        n = len(items)
        futures = self.client.map(_on_dask_worker, [self.token] * n, [self.blob] * n, [fn] * n, items, pure=False)
        return self.client.gather(futures)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _play_all(play: Callable[[str], PolicyRun], policies, executor, stop: threading.Event) -> list:
    """``play`` for each policy, in order; over a process pool, the policies side by side, one
    coordinator thread each, their chunks sharing the pool: a worker that has finished one
    policy's chunks of a round takes the other's instead of waiting for the round's slowest
    chunk. The policies' runs are independent (own state, own checkpoint, each client's work
    keyed by its client and round), so the results are those of the runs one after another.
    An error or an interrupt in any stops the others: the pool is ended at once, and what each
    has checkpointed stays."""
    if not isinstance(executor, _ProcessExecutor) or len(policies) < 2:
        return [play(p) for p in policies]
    threads = ThreadPoolExecutor(len(policies), thread_name_prefix="policy")
    futures = [threads.submit(play, p) for p in policies]
    try:
        for f in as_completed(futures):
            f.result()   # the first error raises here, whichever policy it came from
        return [f.result() for f in futures]
    except BaseException:
        stop.set()
        executor.abort()   # the other policy's round in flight ends now, not at its end
        raise
    finally:
        threads.shutdown(wait=True)


def _executor(ctx: WorkContext, jobs: int, dask_address: str | None):
    if dask_address is not None:
        return _DaskExecutor(ctx, dask_address, jobs)
    if jobs > 1:
        return _ProcessExecutor(ctx, jobs)
    return SerialExecutor(ctx)


# ---------------------------------------------------------------- checkpoints


def _checkpoint_path(out: Path, policy: str) -> Path:
    return out / "checkpoints" / f"{policy}.log"


def _config_dict(config: FleetConfig) -> dict:
    return json.loads(json.dumps(asdict(config)))  # tuples -> lists, as the manifest has them


def trace_digest(trace: str) -> str:
    """The content digest of a fleet's trace source ("synthetic": drawn from the config itself)."""
    if trace == "synthetic":
        return "synthetic"
    path = Path(trace)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(path) if path.is_dir() else f.name}\0{sha256_of(f)}\0".encode())
    return h.hexdigest()


def _identity(config: FleetConfig, policy: str) -> dict:
    """What a checkpoint must match to continue: its policy, the config, the trace's content,
    the code and profiles that computed it."""
    from swansim.batchmodel import code_fingerprint

    return {"policy": policy, "config": _config_dict(config), "trace_sha256": trace_digest(config.trace),
            "runtime": runtime_digest(config.runtime), "code": code_fingerprint()}


def check_resume(config: FleetConfig, out_dir: str | Path) -> None:
    """Fail now, before any simulation, if a checkpoint in ``out_dir`` is of another run (its
    header: policy, config, trace, code)."""
    for p in config.policies:
        _open_checkpoint(Path(out_dir), config, p, _identity(config, p), header_only=True)


def discard_stale_checkpoints(config: FleetConfig, out_dir: str | Path) -> list[Path]:
    """Remove the checkpoints in ``out_dir`` that `check_resume` would refuse (another run's,
    or written by other code or profiles) and return them: for a caller that regenerates all
    its output (the demo), where such a checkpoint is old output, not something to resume."""
    removed = []
    for p in config.policies:
        try:
            _open_checkpoint(Path(out_dir), config, p, _identity(config, p), header_only=True)
        except InputError:
            path = _checkpoint_path(Path(out_dir), p)
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _open_checkpoint(out: Path, config: FleetConfig, policy: str, ours: dict,
                     header_only: bool = False) -> tuple[Checkpoint, FleetState | None]:
    """The policy's checkpoint log and the state of its last whole round (None: start afresh;
    always with ``header_only``, which checks the header alone)."""
    log = Checkpoint(_checkpoint_path(out, policy), ours)
    where = str(log.path)

    def check(theirs: dict) -> None:
        if theirs.get("policy") != policy:
            raise InputError(where, "policy", f"a checkpoint of policy {theirs.get('policy')!r}, not {policy!r}")
        differ = [k for k in ours["config"] if k != "rounds" and theirs.get("config", {}).get(k) != ours["config"][k]]
        if differ:
            raise InputError(where, "config", f"checkpoint of another run (differs in {', '.join(differ)}); "
                                              "use another out directory")
        for key, what in (("trace_sha256", "the trace's content changed since"),
                          ("runtime", "the runtime file's content changed since"),
                          ("code", "the simulator's code or profiles changed since")):
            if theirs.get(key) != ours[key]:
                raise InputError(where, key, f"{what} the checkpoint was written; use another out directory")

    try:
        state = log.load(check, header_only)
    except InputError:
        raise
    except Exception as e:  # a record that unpickles to nonsense
        raise InputError(where, "checkpoint", f"unreadable ({type(e).__name__}); delete it to start this policy "
                                              "afresh") from None
    if state is not None and state.round > config.rounds:
        raise InputError(where, "rounds", f"checkpoint is at round {state.round}, past rounds={config.rounds}")
    return log, state


def checkpoint_state(out: str | Path, policy: str) -> FleetState | None:
    """The state a run in ``out`` left for ``policy`` (its last whole round), unchecked against
    any config: for reading a finished run's loans, carries and pools."""
    return Checkpoint(_checkpoint_path(Path(out), policy), {}).load()


# ---------------------------------------------------------------- the run


def build_population(config: FleetConfig) -> Population:
    users = base_users_needed(config.clients, config.shifts)
    trace = base_trace(config.trace, users, config.trace_days, config.seed)
    return Population.build(config.clients, config.seed, trace, config.devices or None, config.shifts,
                            bandwidth_sigma=config.bandwidth_sigma)


def run_fleet(config: FleetConfig, cost: CostFactory, out_dir: str | Path, jobs: int = 1,
              dask_address: str | None = None, progress: bool = True, no_limit: bool = False) -> FleetResult:
    """Run every policy of ``config`` (see the module docstring); returns the tables it wrote."""
    validate(config, no_limit=no_limit)
    check_run(jobs, dask_address, out_dir)
    return run_validated(config, cost, out_dir, build_population(config), jobs, dask_address, progress)


def run_validated(config: FleetConfig, cost: CostFactory, out_dir: str | Path, population: Population,
                  jobs: int = 1, dask_address: str | None = None, progress: bool = True,
                  on_round: Callable[[], None] | None = None) -> FleetResult:
    """`run_fleet` for a config `validate` accepted, run options `check_run` accepted and the
    config's population (`build_population`): a caller that needs them first checks and builds
    each once. ``on_round`` is called after each round's checkpoint is written."""
    out = Path(out_dir)
    if not callable(cost):
        raise InputError(WHERE, "cost", f"expected a factory (model, policy) -> LocalCost, got {cost!r}")
    task = fedavg.SyntheticTask(config.alpha, config.beta, config.seed)
    test_set = task.test_set(population.n_samples.astype(np.float64), config.test_samples)
    ctx = WorkContext(population, task, cost, config.model)
    for p in config.policies:
        ctx.cost(p)  # an unknown model or policy fails here, before any work
    out.mkdir(parents=True, exist_ok=True)
    with DirLock(out), one_blas_thread():   # the learner's products, as in the workers
        return _run(config, out, ctx, population, test_set, jobs, dask_address, progress, on_round)


def _run(config: FleetConfig, out: Path, ctx: WorkContext, population: Population, test_set, jobs: int,
         dask_address: str | None, progress: bool, on_round: Callable[[], None] | None = None) -> FleetResult:
    logs, states = {}, {}
    for p in config.policies:
        logs[p], states[p] = _open_checkpoint(out, config, p, _identity(config, p))
    done = sum(s.round for s in states.values() if s is not None)
    executor = _executor(ctx, jobs, dask_address)
    lock, stop = threading.Lock(), threading.Event()
    try:
        with tqdm(total=len(config.policies) * config.rounds, initial=done, disable=not progress,
                  desc="fleet", unit="round") as bar:
            def play(p: str) -> PolicyRun:
                """One policy's rounds to the end (or until ``stop``), each checkpointed."""
                run = PolicyRun(p, ctx, executor, config.settings(), test_set, config.critical_battery_pct, states[p],
                                config.charger_budget)
                while run.state.round < config.rounds and not stop.is_set():
                    row = run.play_round()
                    logs[p].append(run.state)
                    with lock:
                        if on_round is not None:
                            on_round()
                        bar.set_postfix(policy=p, accuracy=f"{row['accuracy']:.3f}", refresh=False)
                        bar.update(1)
                return run

            runs = _play_all(play, config.policies, executor, stop)
    finally:
        if hasattr(executor, "close"):
            executor.close()
    rows = [row for run in runs for row in run.state.rows]
    lookups = (sum(run.lookups[0] for run in runs), sum(run.lookups[1] for run in runs))
    rounds = pd.DataFrame(rows, columns=list(ROUND_COLUMNS))
    summary = summarize(rounds, config.target_accuracy, config.baseline_policy)
    write_csv(rounds, out / "rounds.csv", lineterminator="\n")
    write_csv(summary, out / "summary.csv", lineterminator="\n")
    checkpoints = [str(_checkpoint_path(out, p).relative_to(out)) for p in config.policies]
    write_manifest(out, config, config.seed, files=("rounds.csv", "summary.csv", *checkpoints), population={
        "clients": len(population), "base_users": len(population.traces),
        "trace_duration_s": population.traces.duration_s,
        "devices": {d: int(np.sum(population.device_idx == k)) for k, d in enumerate(population.devices)},
        "bytes": population.nbytes, "bytes_per_client": population.bytes_per_client},
        task={"name": "FedProx Synthetic(alpha, beta)", "learner": "multinomial logistic regression"})
    return FleetResult(rounds, summary, out, population.bytes_per_client, lookups)
