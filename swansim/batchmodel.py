"""What one mini-batch costs on a phone - latency, energy, heat - memoised from the simulation.

`simulate_batch` is the one place a batch's cost is computed: the event-level simulation
(swansim.device + swansim.dnn.training) of a fresh phone of the key's profile with every
thermal node held at ambient (`DeviceConfig.frozen_temps`), the key's cpufreq caps fixed (no
thermal governor), the key's foreground app (if any) running, and the training job on the
key's plan; after the warm-up batches, the mean of the measured ones. A `BatchCost` holds the
latency, the energy (the whole device's, and above the idle floor as the paper reports it),
the mean power of every line of the energy account, the mean busy share of every core and
the time of every layer phase. Landscapes, the calibration and the fleet all read it here.

`BatchModel` memoises costs (bounded, least recently used out, hit and miss counters); a key
names the profile, so the memo is shared by every phone of one profile. `FastForward`
advances a phone by whole batches with it: the measured mean power is replayed on the
phone's own platform (`Platform.hold`, leakage rescaled to the temperatures it has reached)
for the batch's latency, so its energy account, RC network, battery, cpufreq and thermal
governors run exactly as in the full simulation, with a handful of events per batch instead
of thousands. A cap change in the middle of a batch ends that part of it: the rest runs at
the new caps' cost (progress is shared out in proportion to time).

The batch model is tested against the full simulation (tests/test_batchmodel.py); what it
leaves out is the within-batch variation of power (heat is replayed as the batch's mean) and
the thermal history's effect on the batch itself (only caps and leakage carry it).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from swansim.device import HELD_MIN_STEP_S, Device, DeviceConfig
from swansim.dnn.choices import Choice, Plan
from swansim.dnn.graph import Model
from swansim.dnn.runtime import Runtime, load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import DEFAULT_LOOPS, TrainingJob
from swansim.hw.profile import TOP_APP, Catalogue, DeviceSpec
from swansim.kernel.placement import AUTO


@dataclass(frozen=True)
class BatchKey:
    """Everything a batch's cost depends on. ``caps_mhz``: per-cluster thermal caps (None:
    none); ``foreground``: the app category on the screen, or None (screen off); ``group``: the
    training process's Android group (its cpuset and schedtune attributes; Swan's python,
    forked from Termux on the screen, inherits top-app); ``placement``: "auto" is the phone's
    kernel (kernel.placement.resolve_placement)."""

    device: str
    model: str
    plan: Plan | Choice
    runtime: str = "pytorch"
    governor: str = "schedutil"
    placement: str = AUTO
    caps_mhz: tuple[float, ...] | None = None
    foreground: str | None = None
    mode: str = "train"
    batch: int | None = None
    input_shape: tuple[int, int, int] | None = None
    num_classes: int | None = None
    batches: int = 1
    warmup: int = 1
    seed: int = 0
    group: str = TOP_APP

    def with_caps(self, caps_mhz: Sequence[float] | None) -> "BatchKey":
        return replace(self, caps_mhz=None if caps_mhz is None else tuple(caps_mhz))

    @property
    def cold_twin(self) -> "BatchKey | None":
        """The key of this run's first batch, when it is measured on the way (warm-up batches):
        a cold start, without caps (they arrive after it, see `simulate_batches`)."""
        return replace(self, caps_mhz=None, warmup=0, batches=1) if self.warmup > 0 else None


@dataclass(frozen=True)
class BatchCost:
    """One mini-batch, the mean over the measured ones."""

    latency_s: float
    energy_j: float                   # the whole device over the batch (nodes at at_temp_c)
    net_energy_j: float               # above the idle floor: what the training adds
    power_w: tuple[float, ...]        # mean power per line of the energy account
    busy: tuple[float, ...]           # mean busy share per cpu
    at_temp_c: float                  # the temperature every node was held at
    layer_s: tuple[tuple[int, str, float], ...] = ()   # (layer, phase, seconds) in execution order

@lru_cache(maxsize=16)
def _graph(model: str, batch, input_shape, num_classes, mode: str) -> Model:
    return build_task(model, batch, input_shape, num_classes, mode)


def simulate_batch(key: BatchKey, runtime: Runtime | None = None, spec: DeviceSpec | None = None,
                   record_layers: bool = True, loops: str = DEFAULT_LOOPS,
                   attach: Callable[[Device, TrainingJob], None] | None = None) -> BatchCost:
    """The event-level simulation of ``key``'s batch (see the module doc). ``runtime`` and
    ``spec`` replace the named runtime and profile (a calibration trial, a swept figure);
    ``loops``: how per-group loops run (`dnn.training.LOOPS`); ``attach`` is called with the
    phone and the job before anything runs, to attach probes from outside, or other work beside
    the job for an experiment (never through `BatchModel`: a key names all that runs)."""
    return simulate_batches(key, runtime, spec, record_layers, loops, attach)[key]


def key_phone(key: BatchKey, spec: DeviceSpec | None = None) -> Device:
    """A fresh phone as ``key``'s batches are simulated on (module doc): its profile (or
    ``spec``), governor, placement and seed, every thermal node held at ambient, no thermal
    governor, the screen on only under a foreground app (`start_foreground` starts it). Caps
    are the caller's."""
    cfg = DeviceConfig(seed=key.seed, governor=key.governor, placement=key.placement,
                       thermal_governor="off", frozen_temps=True, screen_on=key.foreground is not None)
    return Device(spec or Catalogue.load().device(key.device), cfg)


def start_foreground(dev: Device, key: BatchKey) -> None:
    """Start ``key``'s foreground app, if it names one, on ``dev`` (seeded by the key)."""
    if key.foreground is not None:
        from swansim.apps.appmodels import load_app_table
        from swansim.apps.ux import UxRecorder

        load_app_table().app(dev.env, dev.sched, dev.spec, key.foreground, UxRecorder(), key.seed).start()


def simulate_batches(key: BatchKey, runtime: Runtime | None = None, spec: DeviceSpec | None = None,
                     record_layers: bool = True, loops: str = DEFAULT_LOOPS,
                     attach: Callable[[Device, TrainingJob], None] | None = None) -> dict[BatchKey, BatchCost]:
    """`simulate_batch`, and the cost of its first batch too when that is a warm-up batch: the
    cold start of `BatchKey.cold_twin`, the same events as that key's own run up to its end."""
    spec = spec or Catalogue.load().device(key.device)
    rt = runtime or load_runtime(key.runtime)
    graph = _graph(key.model, key.batch, key.input_shape, key.num_classes, key.mode)
    dev = key_phone(key, spec)

    # Caps come from throttling a job that is already running: they arrive after the first
    # warm-up batch, so the measured batches see the threads where the uncapped job put them
    # (an unpinned team's placement carries over; a job started under the caps can settle
    # elsewhere). A key without warm-up is a cold start: capped from the outset.
    late = key.caps_mhz is not None and key.warmup > 0
    if key.caps_mhz is not None and not late:
        dev.set_caps(key.caps_mhz)
    idle_floor_w = dev.platform.idle_floor_w
    start_foreground(dev, key)
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc, graph, rt, key.plan, mode=key.mode,
                      n_batches=key.warmup + key.batches, idle_floor_w=idle_floor_w,
                      record_layers=record_layers, cpuset=dev.spec.cpuset(key.group), cgroup=key.group,
                      loops=loops)
    marks: dict[int, tuple[float, np.ndarray, list[float]]] = {}   # after batch i (-1: the start)

    def mark(i: int) -> None:
        dev.sched.sync()
        marks[i] = (dev.env.now, dev.platform.energy_j.copy(), list(dev.sched.busy_s))

    mark(-1)
    ends = {0, key.warmup - 1, key.warmup + key.batches - 1}

    def on_batch(row, _layers) -> None:
        if late and row[0] == 0:
            dev.set_caps(key.caps_mhz)
        if row[0] in ends:
            mark(row[0])

    job.on_batch = on_batch
    if attach is not None:
        attach(dev, job)
    dev.env.run(until=job.process)

    def cost(first: int, n: int) -> BatchCost:
        """The mean of batches ``first`` .. ``first + n - 1``."""
        (t0, e0, b0), (t1, e1, b1) = marks[first - 1], marks[first + n - 1]
        span = t1 - t0
        energy = (e1 - e0) / n
        layer_s: dict[tuple[int, str], float] = {}
        for b, layer, _, _, phase, _, start, end in job.layer_rows:
            if first <= b < first + n:
                layer_s[(layer, phase)] = layer_s.get((layer, phase), 0.0) + (end - start) / n
        return BatchCost(
            latency_s=span / n, energy_j=float(energy.sum()),
            net_energy_j=float(energy.sum()) - idle_floor_w * span / n,
            power_w=tuple((energy / (span / n)).tolist()),
            busy=tuple(min(1.0, (b - a) / span) for a, b in zip(b0, b1)),   # a full core: 1 + rounding
            at_temp_c=dev.spec.ambient_c,
            layer_s=tuple((layer, phase, s) for (layer, phase), s in layer_s.items()))

    out = {key: cost(key.warmup, key.batches)}
    if key.cold_twin is not None:
        out[key.cold_twin] = cost(0, 1)
    return out


def _simulate_one(key: BatchKey) -> dict[BatchKey, BatchCost]:
    """A pool worker: one key (and its cold twin), layer times included."""
    return simulate_batches(key, record_layers=True)


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the simulator's source, the device profiles and the runtime profiles: a saved
    memo is reused only by the code and data that computed it."""
    import hashlib
    from pathlib import Path

    from swansim.results import profile_checksums

    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(p.read_bytes())
    h.update(repr(sorted(profile_checksums().items())).encode())
    return h.hexdigest()[:16]


_MERGE = threading.Lock()   # a process's memo merges and snapshots (`BatchModel.add`, `save`)


class BatchModel:
    """`simulate_batch`, memoised: a bounded least-recently-used map with hit/miss counters."""

    def __init__(self, max_entries: int = 4096, simulate: Callable[[BatchKey], BatchCost] | None = None):
        """``simulate``: one key's cost (default `simulate_batches`, which gives a warm key's
        cold twin too)."""
        self.max_entries = max_entries
        self._simulate = simulate_batches if simulate is None else (lambda k: {k: simulate(k)})
        self._memo: OrderedDict[BatchKey, BatchCost] = OrderedDict()
        self._fresh: dict[BatchKey, BatchCost] = {}   # simulated here since the last `fresh()`
        self.hits = 0
        self.misses = 0

    def cost(self, key: BatchKey) -> BatchCost:
        got = self._memo.get(key)
        if got is not None:
            self.hits += 1
            self._memo.move_to_end(key)
            return got
        self.misses += 1
        return self._store(self._simulate(key))[key]

    def _store(self, costs: dict[BatchKey, BatchCost]) -> dict[BatchKey, BatchCost]:
        for k, c in costs.items():
            if k not in self._memo:
                self._memo[k] = self._fresh[k] = c
        while len(self._memo) > self.max_entries:
            self._memo.popitem(last=False)
        return costs

    def add(self, key: BatchKey, cost: BatchCost) -> None:
        """A cost computed elsewhere (a pool worker) joins the memo. (A fleet's coordinator
        threads - one per policy - add and save concurrently: `_MERGE`.)"""
        with _MERGE:
            self._memo[key] = cost

    def fresh(self) -> dict[BatchKey, BatchCost]:
        """The costs this process has simulated since it was last asked (what a fleet worker
        sends back, so that other workers need not simulate them again)."""
        out, self._fresh = self._fresh, {}
        return out

    def prefill(self, keys, jobs: int | None = None, progress: bool = True) -> None:
        """Simulate every key not in the memo yet, over a process pool."""
        from swansim.pool import run_all

        todo = [k for k in dict.fromkeys(keys) if k not in self._memo]
        twins = {k.cold_twin for k in todo}
        todo = [k for k in todo if k not in twins]   # each comes with a warm key's run
        for costs in run_all(_simulate_one, [(k,) for k in todo], jobs, desc="batch model", progress=progress):
            for k, c in costs.items():
                self._memo.setdefault(k, c)
        self.misses += len(todo)

    def save(self, path, runtime: str = "") -> None:
        """Write the memo, stamped with what it was computed from (`code_fingerprint`, and
        ``runtime``: `dnn.runtime.runtime_digest` of a runtime file outside the profiles) and
        with its content's sha256."""
        import hashlib
        import pickle

        from swansim.results import write_bytes

        with _MERGE:
            items = list(self._memo.items())
        blob = pickle.dumps(items)
        write_bytes(path, pickle.dumps((code_fingerprint() + runtime, hashlib.sha256(blob).hexdigest(), blob)))

    def load(self, path, runtime: str = "") -> int:
        """Add the costs saved at ``path`` if they were computed from this code and these
        profiles (and ``runtime``, as `save` stamped it; else nothing: they would be stale);
        returns how many were added. A file that is
        not a memo, or whose content does not match its digest, is one InputError naming it."""
        import hashlib
        import pickle
        from pathlib import Path

        from swansim.errors import InputError

        path = Path(path)
        if not path.is_file():
            return 0
        try:
            stamp, digest, blob = pickle.loads(path.read_bytes())
        except Exception as e:
            raise InputError(str(path), "memo", f"not a batch memo ({type(e).__name__}); delete it to "
                                                "recompute") from None
        if stamp != code_fingerprint() + runtime:
            return 0
        if not isinstance(blob, bytes) or hashlib.sha256(blob).hexdigest() != digest:
            raise InputError(str(path), "sha256", "the memo's content does not match its digest (damaged or "
                                                  "edited); delete it to recompute")
        items = pickle.loads(blob)
        for k, c in items:
            self._memo.setdefault(k, c)
        return len(items)

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def __len__(self) -> int:
        return len(self._memo)


@dataclass(frozen=True)
class BatchRecord:
    """One fast-forwarded batch on a phone."""

    index: int
    start_s: float
    latency_s: float
    energy_j: float
    caps_mhz: tuple[float, ...]


class FastForward:
    """Advance a `Device` by whole batches of ``key`` with the batch model (module doc).

    The device keeps running as usual (its thermal zone polls, its battery drains, other
    processes may run); during a batch its platform replays the batch's power and its
    scheduler the batch's busy shares. ``key``'s caps are ignored: the device's own decide.
    Caps at every cluster's f_max are no caps: such a batch is looked up as ``caps_mhz=None``,
    the key a prefill (`BatchModel.prefill`) simulates.
    """

    def __init__(self, dev: Device, model: BatchModel, key: BatchKey, skip_quiet: bool = True):
        self.dev, self.model, self.key = dev, model, key
        self.skip_quiet = skip_quiet     # False: every thermal poll runs (the path the skips are checked against)
        self.records: list[BatchRecord] = []
        self._caps_changed = False
        self._keys: dict[tuple, BatchKey] = {}
        self._uncapped = tuple(p.fmax_mhz for p in dev.cpufreq)
        self._held: BatchCost | None = None
        dev.thermal.on_cap_change.append(self._cap_changed)

    def _cap_changed(self, _change) -> None:
        self._caps_changed = True

    def caps(self) -> tuple[float, ...]:
        return tuple(p.cap_mhz for p in self.dev.cpufreq)

    def run_batches(self, n: int, key: BatchKey | None = None, stretch: bool = False) -> list[BatchRecord]:
        """``n`` batches from now (of ``key``, default the one given at construction); with
        ``stretch``, as many of them as the phone allows as one stretch at a time
        (`run_stretch`, `Device.quiet_stretch`), as a fleet's steady policy runs them."""
        key = key or self.key
        out: list[BatchRecord] = []
        while len(out) < n:
            left = n - len(out)
            if stretch and left > 1 and self.dev.quiet_stretch(
                    self.dev.env.now + left * self.held_cost(key).latency_s, lambda _bounds: True):
                out += self.run_stretch(key, left)
            else:
                out.append(self.run_batch(key, ahead=left - 1))
        return out

    def run_process(self, n: int, stretch: bool = False) -> list[BatchRecord]:
        """``n`` batches of a training process started now: the first a cold one (its key without
        warm-up: the pools created, the clocks ramping), the rest as `run_batches`."""
        if n < 1:
            return []
        out = [self.run_batch(replace(self.key, warmup=0), ahead=n - 1)]
        return out + self.run_batches(n - 1, stretch=stretch)

    def held_cost(self, key: BatchKey) -> BatchCost:
        """``key``'s cost at the clocks' present caps, its power and busy shares held on the
        phone from now on (they stay held after a batch: the next usually holds the same)."""
        self.dev.sched.sync()
        caps = self.caps()
        capped = self._keys.get((key, caps))
        if capped is None:
            capped = self._keys[(key, caps)] = key.with_caps(None if caps == self._uncapped else caps)
        cost = self.model.cost(capped)
        if cost is not self._held:
            self.dev.platform.hold(cost.power_w, cost.at_temp_c)
            self.dev.sched.hold_busy(cost.busy)
            self._held = cost
        return cost

    def run_batch(self, key: BatchKey | None = None, ahead: int = 0) -> BatchRecord:
        """One batch from now; `release` hands the phone back. ``ahead``: how many more batches
        of the same key the caller expects next; quiet thermal polls are skipped over them too
        (`Device.skip_quiet`: if they do not come, the polls run again on their own schedule,
        so the bet decides only how much is skipped)."""
        dev, env = self.dev, self.dev.env
        key = key or self.key
        dev.sched.sync()
        start, e0 = env.now, dev.platform.total_energy_j
        caps0 = self.caps()
        left = 1.0                      # share of the batch still to run
        while left > 1e-12:
            cost = self.held_cost(key)
            t0, end = env.now, env.now + left * cost.latency_s
            self._caps_changed = False
            self._run_to(end, ahead * cost.latency_s)
            if self._caps_changed and env.now < end:
                left -= (env.now - t0) / cost.latency_s
            else:
                left = 0.0
        dev.sched.sync()
        rec = BatchRecord(len(self.records), start, env.now - start, dev.platform.total_energy_j - e0, caps0)
        self.records.append(rec)
        return rec

    def run_stretch(self, key: BatchKey, n: int, ahead: int = 0) -> list[BatchRecord]:
        """``n`` batches of ``key`` from now as one stretch, which the caller has found quiet
        (`Device.quiet_stretch`: no poll in it can change a cap, so every batch runs at the
        clocks' present caps): the phone is integrated over the whole stretch in the steps its
        leakage needs (`Device.integrate_held`), not to every batch's end. The stretch's energy
        is exact; each batch is given an equal share of it (batches are not told apart by the
        leakage their temperature adds)."""
        dev, env = self.dev, self.dev.env
        cost = self.held_cost(key)
        start, e0, caps = env.now, dev.platform.total_energy_j, self.caps()
        self._caps_changed = False
        self._run_to(start + n * cost.latency_s, ahead * cost.latency_s)
        if self._caps_changed:
            raise RuntimeError("a clock's cap changed within a stretch of batches found quiet")
        dev.sched.sync()
        energy_j = (dev.platform.total_energy_j - e0) / n
        recs = [BatchRecord(len(self.records) + i, start + i * cost.latency_s, cost.latency_s, energy_j, caps)
                for i in range(n)]
        self.records += recs
        return recs

    def _run_to(self, end: float, ahead_s: float) -> None:
        """Run the phone to ``end`` with the held power, or until a clock's cap changes; quiet
        thermal polls are skipped up to ``ahead_s`` past ``end`` (`run_batch`)."""
        dev, env = self.dev, self.dev.env
        while not self._caps_changed and env.peek() <= end:
            if not (self.skip_quiet and dev.skip_quiet(end, end + ahead_s)):
                if self.skip_quiet and env.peek() - env.now > HELD_MIN_STEP_S:
                    dev.integrate_held(env.peek())   # leakage follows the heat up to the event, as below
                env.step()   # (to an event at most one held step away, its own advance is that step)
        if not (self._caps_changed and env.now < end):
            if self.skip_quiet:   # no poll left before the end (skipped): leakage follows the heat
                dev.integrate_held(end)
            env.advance_to(end)

    def release(self) -> None:
        """The phone's own power model and activity again, from now on."""
        if self._held is not None:
            self.dev.sched.sync()
            self.dev.platform.release()
            self.dev.sched.hold_busy(None)
            self._held = None


@dataclass
class FastForwardCheck:
    """The same batches fully simulated on one phone and fast-forwarded on a twin: both phones
    as they end, where each stood when the batches began (time s, energy J, cap changes), the
    CPU seconds each path took and the memo the twin used."""

    full: Device
    ff: Device
    full_start: tuple[float, float, int]
    ff_start: tuple[float, float, int]
    full_cpu_s: float
    ff_cpu_s: float
    memo: BatchModel


def check_fast_forward(make_device: Callable[[], Device], jobs: Sequence[tuple[str, Choice, int]],
                       skip_quiet: bool = True, stretch: bool = False, placement: str = AUTO) -> FastForwardCheck:
    """The (model, choice, batches) of ``jobs`` in turn, on a phone from ``make_device`` fully
    simulated and on another fast-forwarded (tests/test_batchmodel, experiments/batchmodel_check
    and benchmarks/bench_fastforward compare the two). Making the phones is not timed.
    ``placement``: the batch keys', which should be the phones' own. Each job is a new training
    process on both phones: the fast-forward's first batch is a cold key's (`FastForward.run_process`)."""
    def where(dev: Device) -> tuple[float, float, int]:
        return dev.env.now, dev.platform.total_energy_j, len(dev.thermal.cap_log)

    full = make_device()
    full_start = where(full)
    cpu0 = time.process_time()
    for model, choice, n in jobs:
        job = TrainingJob(full.env, full.sched, full.spec.soc, build_task(model), load_runtime("pytorch"), choice,
                          n_batches=n, record_layers=False)
        full.env.run(until=job.process)
    full.sched.sync()
    full_cpu = time.process_time() - cpu0
    ff, memo = make_device(), BatchModel()
    ff_start = where(ff)
    cpu0 = time.process_time()
    for model, choice, n in jobs:
        run = FastForward(ff, memo, BatchKey(ff.spec.name, model, choice, placement=placement), skip_quiet)
        run.run_process(n, stretch=stretch)
        run.release()
    ff.sched.sync()
    return FastForwardCheck(full, ff, full_start, ff_start, full_cpu, time.process_time() - cpu0, memo)
