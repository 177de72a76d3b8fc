"""A client's local training: its policy on its own phone, advanced batch by batch.

`PolicyCost` is the fleet's `LocalCost` for one model and one policy (swansim.policy). A
training request of ``n_batches`` mini-batches runs on a `Device` of the client's profile,
advanced with `swansim.batchmodel.FastForward`: every batch's latency, energy and heat come
from the event-level simulation, memoised (`BatchModel`), while the phone's own RC network,
cpufreq and thermal governors run as usual between and during batches. Before each batch the
policy sees the phone as an app would (`PhoneState`: battery level and temperature, charger,
screen, a foreground app from the client's trace, thermal status) and may decline - a
drop-out; it plans the batch and observes what it measured (`BatchStats`, with per-layer
times). The loop is `swansim.session.driver.FastForwardDriver`, the per-batch step the full
simulation's driver takes too; this module only turns a client's state into a phone's.

What a client's phone remembers between rounds travels in the outcome's ``carry``: the policy
(what it learned: Swan's profiles and selection) and the phone's thermal state at the end of
its last request. Between requests (and before its first) the idle phone follows the exact RC
solution through the owner's traced screen and charger (`settle`: the charger's loss heats the
battery Swan reads; the owner's apps' CPU heat is not replayed, an assumption). The check-in
reads the battery at the profile's ambient; the request's first batch reads the settled phone,
where Swan's temperature rule declines (`declined_battery_hot` in rounds.csv).

The foreground app in a batch's key is the trace's category at the batch's start: a batch
under an app is measured with that app running (`BatchKey.foreground`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from swansim.batchmodel import BatchKey, BatchModel
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.dnn.runtime import runtime_digest
from swansim.dnn.tasks import SWAN_TASKS
from swansim.errors import InputError
from swansim.federated.availability import ClientState
from swansim.federated.population import Client
from swansim.federated.rounds import LocalOutcome, LocalRequest
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.kernel.placement import AUTO
from swansim.kernel.thermal_gov import ThermalStatus
from swansim.policy.base import Policy, make_policy, policy_class
from swansim.policy.view import PhoneState
from swansim.results import DirLock, add_to_manifest
from swansim.session.driver import FastForwardDriver


@dataclass
class ClientPhone:
    """What a client's phone remembers between its training requests (the outcome's carry)."""

    policy: Policy
    thermal_z: list[float] | None = None   # the RC network's modal state at ``time_s``
    time_s: float = 0.0
    request: int = 0


class PolicyCost:
    """`LocalCost` of ``policy`` training ``model`` on each client's phone (module doc)."""

    def __init__(self, model: str, policy: str, batch_model: BatchModel | None = None, runtime: str = "pytorch",
                 fast_forward: bool = True):
        if model not in SWAN_TASKS:
            raise InputError("--model", model, f"not a Swan task (known: {', '.join(SWAN_TASKS)})")
        self.policy_cls = policy_class(policy)
        self.model, self.policy_name, self.runtime = model, policy, runtime
        self.fast_forward = fast_forward   # False: every batch fully simulated (the validation path)
        self.placement = self.policy_cls.placement or AUTO
        self.batch_model = batch_model or BatchModel()
        self._checkin_policy = make_policy(policy)
        self._specs: dict[str, DeviceSpec] = {}   # the clients' profiles by name, resolved on first use

    def _spec(self, name: str) -> DeviceSpec:
        """A client's profile, resolved once per process (this object travels to the workers)."""
        spec = self._specs.get(name)
        if spec is None:
            spec = self._specs[name] = Catalogue.load().device(name)
        return spec

    # -- the fleet's interface ----------------------------------------------------------------

    def news(self) -> dict:
        """Batch costs simulated in this process since the last call (sent back to the fleet's
        coordinator, which ships them to every worker with the next round)."""
        return self.batch_model.fresh()

    def learn(self, costs: dict) -> None:
        """Batch costs another process simulated join this one's memo."""
        for key, cost in costs.items():
            self.batch_model.add(key, cost)

    def admit(self, client: Client, state: ClientState) -> bool:
        """Check-in: does the policy take a request on in the phone's state (its battery at ambient)?"""
        spec = self._spec(client.device)
        return self._checkin_policy.accept(_phone_state(state, spec.ambient_c, ThermalStatus.NONE, 0.0))

    def train(self, request: LocalRequest) -> LocalOutcome:
        client = request.client
        phone: ClientPhone = request.carry or ClientPhone(make_policy(self.policy_name))
        dev = self._device(client, request, phone)
        policy = phone.policy
        if request.shared:
            policy.adopt(request.shared)
        bm = self.batch_model
        hits0, misses0 = bm.hits, bm.misses
        driver = FastForwardDriver(dev, policy, self.model, bm, self.runtime, self.placement, phone.request,
                                   self.fast_forward, client.seed)
        done, energy = driver.run(request.n_batches, _TimelineOwner(request.timeline), request.start_s,
                                  request.deadline_s)
        dev.sched.sync()
        phone.thermal_z = dev.platform.thermal.state
        phone.time_s = request.start_s + dev.env.now
        phone.request += 1
        policy.decisions.clear()   # the fleet keeps no decision log; carry stays small
        lookups = (bm.hits - hits0, bm.misses - misses0)
        if done == 0:
            why = next((w for w, n in driver.step.declines.items() if n), "")
            return LocalOutcome(False, carry=phone, shared=policy.offer(), lookups=lookups, declined_why=why)
        return LocalOutcome(True, done, dev.env.now, energy, carry=phone, shared=policy.offer(), lookups=lookups)

    # -- the phone ------------------------------------------------------------------------------

    def _device(self, client: Client, request: LocalRequest, phone: ClientPhone) -> Device:
        st = request.state
        dev = Device(self._spec(client.device),
                     DeviceConfig(seed=client.seed, charging=st.charging,
                                  initial_soc_pct=max(0.0, min(100.0, st.battery_pct)),
                                  placement=self.placement))
        if phone.thermal_z is None:   # a first request: the phone's traced past, from ambient
            settle(dev, request.timeline, -math.inf, request.start_s)
        else:
            dev.platform.thermal.state = phone.thermal_z
            settle(dev, request.timeline, phone.time_s, request.start_s)
        return dev


# A phone's RC network forgets its past with its slowest mode (13-16 min on the five phones of
# the paper): what it held more than this many of those lives before a request weighs less than
# e^-8 (0.03%) in its temperatures then, so that part of an idle stretch is stepped in one piece.
HISTORY_MODES = 8.0


def settle(dev: Device, timeline, from_s: float, to_s: float, history_modes: float = HISTORY_MODES) -> None:
    """Step an idle phone's RC network (nothing of the training's running; its state is the
    one at server time ``from_s``, or ambient when ``from_s`` is -inf) to ``to_s`` through the
    owner's traced screen and charger: the screen's power and the charger's loss, which heats
    the battery Swan reads, follow ``timeline`` over the last ``history_modes`` lives of the
    network's slowest mode; before that the power is the one where that stretch ends. The
    owner's apps are not replayed here: their CPU heat between requests is left out. A
    client without a trace keeps the phone's state at ``to_s`` throughout."""
    net, plat = dev.platform.thermal, dev.platform
    now = (plat.screen_on, dev.battery is not None and dev.battery.charging)
    powers: dict[tuple[bool, bool], list[float]] = {}

    def power(state) -> list[float]:
        key = now if state is None else (state.screen_on, state.charging)
        if key not in powers:
            powers[key] = _idle_power(dev, *key)
        return powers[key]

    if timeline.state_at(to_s) is None:   # no trace: the phone as it stands now
        net.step(to_s - from_s if from_s > -math.inf else 0.0, power(None))
        return
    t = max(from_s, to_s - history_modes / min(net.rates_per_s))
    if -math.inf < from_s < t:   # the far past in one piece, at the power where it ends
        net.step(t - from_s, power(timeline.state_at(t)))
    states = list(timeline.changes(t, to_s))
    for s, end in zip(states, [*(x.time_s for x in states[1:]), to_s]):
        net.step(end - s.time_s, power(s))


def _idle_power(dev: Device, screen_on: bool, charging: bool) -> list[float]:
    """Heat into each RC node (W) of ``dev`` idle with the screen and the charger so, and
    every core at its leakage now; the phone is left as it was."""
    plat = dev.platform
    screen0, charging0 = plat.screen_on, dev.battery is not None and dev.battery.charging
    plat.set_screen(screen_on)
    dev.set_charging(charging)
    out = plat.node_power_w.tolist()
    plat.set_screen(screen0)
    dev.set_charging(charging0)
    return out


class _TimelineOwner:
    """A client's trace as the fast-forward's `Owner`: its state, and whether the screen, an app
    or the charger came on, over the fleet's clock. A traced state holds until the trace's next
    change, so it is looked up once per stretch, not once per batch."""

    def __init__(self, timeline):
        self.timeline = timeline
        self._span: tuple[float, float, ClientState | None] = (math.inf, math.inf, None)   # [t0, t1), its state

    def _at(self, t_s: float) -> tuple[float, float, ClientState | None]:
        t0, t1, state = self._span
        if not t0 <= t_s < t1:
            state = self.timeline.state_at(t_s)
            t1 = self.timeline.next_change_s(t_s) if state is not None else t_s
            self._span = (t_s, t1, state)
        return self._span

    def state_at(self, t_s: float) -> ClientState:
        return self._at(t_s)[2]

    def holds_until(self, t_s: float) -> float:
        return self._at(t_s)[1]

    def changed(self, t0_s: float, t1_s: float) -> bool:
        _, end, state = self._at(t0_s)
        if state is not None and t1_s <= end:
            return _active(state)
        return any(_active(c) for c in self.timeline.changes(t0_s, t1_s))


def _active(s: ClientState) -> bool:
    """The owner's screen, an app or the charger is on."""
    return s.screen_on or s.app is not None or s.charging


def _phone_state(s: ClientState, battery_temp_c: float | None, status: ThermalStatus, run_s: float) -> PhoneState:
    return PhoneState(time_s=run_s, battery_pct=s.battery_pct, battery_temp_c=battery_temp_c, charging=s.charging,
                      screen_on=s.screen_on, foreground_app=s.app is not None, thermal_status=status)


@dataclass
class PolicyCosts:
    """The fleet's cost factory: ``(model, policy) -> PolicyCost``, all sharing one batch model
    (it travels to worker processes with its memo; a worker's misses stay its own)."""

    batch_model: BatchModel = field(default_factory=BatchModel)
    runtime: str = "pytorch"
    fast_forward: bool = True

    def __call__(self, model: str, policy: str) -> PolicyCost:
        return PolicyCost(model, policy, self.batch_model, self.runtime, self.fast_forward)


def likely_keys(devices, model: str, policies, runtime: str = "pytorch") -> list[BatchKey]:
    """The batches a fleet run is sure to ask for: on each device, the choices each of
    ``policies`` is sure to run (`Policy.likely_choices`: what exploration and the baselines run
    first) under its placement, screen off, cold (a request's first batch) and warm."""
    cat = Catalogue.load()
    keys = []
    for d in devices:
        soc = cat.device(d).soc
        choices, default = enumerate_choices(soc, mixed=True), pytorch_default(soc)
        for p in policies:
            cls = policy_class(p, "--policies")
            for c in cls.likely_choices(choices, default):
                keys += [BatchKey(d, model, c, runtime=runtime, placement=cls.placement or AUTO, warmup=w)
                         for w in (0, 1)]
    return list(dict.fromkeys(keys))


def memo_report(result, batch_model: BatchModel) -> str:
    """One line on the batch model: what its memo holds, and the rounds' hits and misses
    (summed over every process that ran a request)."""
    hits, misses = result.lookups
    rate = hits / (hits + misses) if hits + misses else float("nan")
    return (f"batch model: the memo holds {len(batch_model)} batches (simulated ahead, and merged from the "
            f"workers); in the rounds {hits} lookups hit and {misses} batches were simulated (hit rate {rate:.1%})")


# A fleet's merged memo is written again after a round that grew it, at most this often (s of
# wall time): a run stopped midway resumes with what it had simulated, not cold again (its
# rounds.csv is the same either way; only the time differs), and a cold run's rounds do not each
# pay for pickling the whole memo.
MEMO_SAVE_S = 60.0


class MemoSaver:
    """Called after each fleet round: save the batch model's memo if it grew since the last save
    and `MEMO_SAVE_S` have passed."""

    def __init__(self, batch_model: BatchModel, path, every_s: float | None = None, runtime: str = ""):
        self.batch_model, self.path, self.runtime = batch_model, path, runtime
        self.every_s = MEMO_SAVE_S if every_s is None else every_s
        self._size, self._at = len(batch_model), time.monotonic()

    def __call__(self) -> None:
        n, now = len(self.batch_model), time.monotonic()
        if n != self._size and now - self._at >= self.every_s:
            self.batch_model.save(self.path, self.runtime)
            self._size, self._at = n, now


def run_policy_fleet(config, out_dir, jobs: int | None = None, dask_address: str | None = None,
                     progress: bool = True, no_limit: bool = False):
    """`swansim.federated.fleet.run_fleet` with the policies on the batch model: the memo is loaded
    from ``out_dir/batch-memo.pkl`` (when the code and profiles that computed it are these),
    filled with `likely_keys` over a process pool, and saved back after the run."""

    from swansim import checks
    from swansim.federated.fleet import WHERE, build_population, check_resume, check_run, run_validated, validate
    from swansim.pool import check_jobs

    if isinstance(config.model, str) and config.model not in SWAN_TASKS:   # (else `validate` asks for local_steps)
        raise InputError(WHERE, "model", f"{config.model!r} is not a Swan task (known: {', '.join(SWAN_TASKS)})")
    validate(config, no_limit=no_limit)
    jobs = check_jobs(jobs)
    check_run(jobs, dask_address, out_dir)
    check_resume(config, out_dir)   # a stale checkpoint fails here, not after the prefill
    costs = PolicyCosts(BatchModel(max_entries=1 << 16), runtime=config.runtime)
    for p in config.policies:
        if policy_class(p, "--policies").needs_oracle:
            raise InputError("--policies", p, "needs every phone's true latencies up front; not a fleet policy")
        costs(config.model, p)   # an unknown model or policy fails here, before any simulation
    out = checks.out_dir(out_dir)
    memo_path = out / "batch-memo.pkl"
    bm = costs.batch_model
    runtime = runtime_digest(config.runtime)   # a memo of another runtime file is stale
    with DirLock(out):
        bm.load(memo_path, runtime)
        population = build_population(config)   # a bad trace fails here, before the prefill
        bm.prefill(likely_keys(sorted(set(population.devices)), config.model, config.policies, config.runtime),
                   jobs, progress)
        bm.save(memo_path, runtime)
        result = run_validated(config, costs, out, population, jobs, dask_address, progress,
                               on_round=MemoSaver(bm, memo_path, runtime=runtime))
        bm.save(memo_path, runtime)   # merged: what every worker simulated on the way
        add_to_manifest(out, [memo_path.name])
    return result, bm
