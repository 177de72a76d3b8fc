"""A client's local training: its policy on its own phone, advanced batch by batch.

`PolicyCost` is the fleet's `LocalCost` for one model and one policy (swansim.policies). A
training request of ``n_batches`` mini-batches runs on a `Device` of the client's profile,
advanced with `swansim.batchmodel.FastForward`: every batch's latency, energy and heat come
from the event-level simulation, memoised (`BatchModel`), while the phone's own RC network,
cpufreq and thermal governors run as usual between and during batches. Before each batch the
policy sees the phone as an app would (`PhoneState`: battery level and temperature, charger,
screen, a foreground app from the client's trace, thermal status) and may decline - a
drop-out; it plans the batch and observes what it measured (`BatchStats`, with per-layer
times), exactly as in `swansim.runs.driver` on the full simulation.

What a client's phone remembers between rounds travels in the outcome's ``carry``: the policy
(what it learned: Swan's profiles and selection) and the phone's thermal state at the end of
its last request. Between requests the phone cools (or warms) along the exact RC solution at
its idle power (screen off; an assumption: the owner's own use between rounds is not heated
in); the check-in's battery temperature is that relaxed state's.

The foreground app in a batch's key is the trace's category at the batch's start: a batch
under an app is measured with that app running (`BatchKey.foreground`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from swansim.batchmodel import BatchKey, BatchModel, BatchRecord, FastForward
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import Choice, Plan, enumerate_choices, pytorch_default
from swansim.dnn.tasks import SWAN_TASKS, build_task
from swansim.errors import InputError
from swansim.fleet.availability import ClientState
from swansim.fleet.population import Client
from swansim.fleet.rounds import LocalOutcome, LocalRequest
from swansim.hw.profile import Catalogue
from swansim.kernel.sched import AUTO
from swansim.kernel.thermal_gov import ThermalStatus
from swansim.policies.base import Policy, make_policy, policy_class
from swansim.policies.view import BatchStats, History, LayerStat, ModelInfo, PhoneState, PolicyView
from swansim.results import DirLock, add_to_manifest


@lru_cache(maxsize=1)
def _catalogue() -> Catalogue:
    return Catalogue.load()


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
        graph = build_task(model)
        self.info = ModelInfo(model, tuple(layer.name for layer in graph.layers),
                              tuple(layer.op for layer in graph.layers))
        self._checkin_policy = make_policy(policy)

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
        """Check-in: the policy's admission on the phone's state (its battery at ambient)."""
        spec = _catalogue().device(client.device)
        return self._checkin_policy.admit(_phone_state(state, spec.ambient_c, ThermalStatus.NONE, 0.0))

    def train(self, request: LocalRequest) -> LocalOutcome:
        client = request.client
        phone: ClientPhone = request.carry or ClientPhone(make_policy(self.policy_name))
        dev = self._device(client, request, phone)
        soc = dev.spec.soc
        choices = tuple(enumerate_choices(soc, mixed=True))
        default = pytorch_default(soc)
        base = BatchKey(client.device, self.model, default, runtime=self.runtime, placement=self.placement)
        phone_run = (FastForward(dev, self.batch_model, base) if self.fast_forward
                     else _SimulatedBatches(dev, self.model, self.runtime, client.seed))
        p = dev.platform
        floor_w = p.total_power_w - p.charging_loss_w   # idle, screen off: what a batch's energy is net of
        policy, t0 = phone.policy, request.start_s
        if request.shared:
            policy.adopt(request.shared)
        bm = self.batch_model
        hits0, misses0 = bm.hits, bm.misses
        energy, done, history = 0.0, 0, []
        for k in range(request.n_batches):
            now = t0 + dev.env.now
            if now >= request.deadline_s:
                break
            traced = request.timeline.state_at(now)
            state = _phone_state(traced, dev.battery_temp_c, dev.thermal_status, dev.env.now)
            if not policy.admit(state):
                break
            # A policy remembers what it needs itself; the view's history is this request's batches.
            view = PolicyView(choices, default, self.info, state, k, phone.request, k, History(history))
            plan = policy.plan(view)
            dev.platform.set_screen(state.screen_on)
            # a request starts on a phone whose training process is new: its first batch is a
            # cold one (pool creation, clocks ramping), the others follow a batch
            key = BatchKey(client.device, self.model, _as_plan_or_choice(plan), runtime=self.runtime,
                           placement=self.placement, foreground=traced.app, warmup=0 if k == 0 else 1)
            rec, layer_s = phone_run.run_batch(key) if not self.fast_forward else (phone_run.run_batch(key), None)
            energy += rec.energy_j
            done += 1
            # a batch worth profiling: the phone idle and discharging from its start to its end
            quiet = state.idle and not state.charging and not any(
                c.screen_on or c.app is not None or c.charging
                for c in request.timeline.changes(now, t0 + dev.env.now))
            if self.policy_cls.needs_layers and layer_s is None:
                layer_s = self.batch_model.cost(key.with_caps(rec.caps_mhz)).layer_s
            layers = _layers(plan, layer_s, rec) if self.policy_cls.needs_layers else ()
            stats = BatchStats(k, phone.request, k, plan, rec.start_s, rec.latency_s,
                               rec.energy_j - floor_w * rec.latency_s, layers, state, quiet)
            policy.observe(stats)
            history.append(stats)
        dev.sched.sync()
        phone.thermal_z = dev.platform.thermal.state
        phone.time_s = t0 + dev.env.now
        phone.request += 1
        policy.decisions.clear()   # the fleet keeps no decision log; carry stays small
        lookups = (bm.hits - hits0, bm.misses - misses0)
        if done == 0:
            return LocalOutcome(False, carry=phone, shared=policy.offer(), lookups=lookups)
        return LocalOutcome(True, done, dev.env.now, energy, carry=phone, shared=policy.offer(), lookups=lookups)

    # -- the phone ------------------------------------------------------------------------------

    def _device(self, client: Client, request: LocalRequest, phone: ClientPhone) -> Device:
        spec = _catalogue().device(client.device)
        st = request.state
        dev = Device(DeviceConfig(device=client.device, seed=client.seed, charging=st.charging,
                                  initial_soc_pct=max(0.0, min(100.0, st.battery_pct)),
                                  placement=self.placement), spec=spec)
        if phone.thermal_z is not None:
            net = dev.platform.thermal
            net.state = phone.thermal_z
            idle_w = dev.platform.node_power_w    # screen off, nothing running
            net.step(max(0.0, request.start_s - phone.time_s), idle_w)
        return dev



def _as_plan_or_choice(plan: Plan) -> Plan | Choice:
    """A uniform plan keys the memo as its one choice (one entry for a choice, however planned)."""
    return plan.single or plan


def _phone_state(s: ClientState, battery_temp_c: float | None, status: ThermalStatus, run_s: float) -> PhoneState:
    return PhoneState(time_s=run_s, battery_pct=s.battery_pct, battery_temp_c=battery_temp_c, charging=s.charging,
                      screen_on=s.screen_on, foreground_app=s.app is not None, thermal_status=status)


def _layers(plan: Plan, layer_s, rec) -> tuple[LayerStat, ...]:
    """The batch's layer phases laid end to end from its start, scaled to its measured length."""
    total = sum(s for _, _, s in layer_s) or 1.0
    scale = rec.latency_s / total
    out, t = [], rec.start_s
    for layer, phase, s in layer_s:
        choice = plan.fwd[layer] if phase == "fwd" else plan.update if phase == "update" else plan.bwd[layer]
        out.append(LayerStat(layer, phase, choice, t, t + s * scale))
        t += s * scale
    return tuple(out)



class _SimulatedBatches:
    """The request's batches fully simulated on the phone, one at a time: one training job held
    at its gate between batches (so its pool and clocks carry over, as in a real request), and
    the traced app (if any) running while a batch runs. The validation path of the fast-forward."""

    def __init__(self, dev: Device, model: str, runtime: str, seed: int):
        from swansim.dnn.runtime import load_runtime
        from swansim.dnn.training import TrainingJob

        self.dev, self.seed = dev, seed
        self._plan: Plan | Choice | None = None
        self._go = False
        self._resume = dev.env.event()
        self._done = dev.env.event()
        self._rows: tuple = ()
        self._app = None
        self.job = TrainingJob(dev.env, dev.sched, dev.spec.soc, build_task(model), load_runtime(runtime),
                               lambda _b: self._plan, record_layers=True)
        self.job.gate, self.job.on_batch = self._gate, self._on_batch

    def _gate(self):
        if self._go:
            self._go = False
            return None
        return self._resume

    def _on_batch(self, row, layer_rows) -> None:
        self._rows = (row, list(layer_rows))
        self.job.layer_rows.clear()
        self._done.succeed()

    def _foreground(self, category: str | None) -> None:
        from swansim.apps.appmodels import App, load_app_table
        from swansim.apps.ux import UxRecorder

        current = self._app.name if self._app is not None else None
        if category == current:
            return
        if self._app is not None:
            self._app.stop()
            self._app = None
        if category is not None:
            table = load_app_table()
            self._app = App(self.dev.env, self.dev.sched, self.dev.spec, table.categories[category], table.android,
                            UxRecorder(), self.seed, name=category, memory=table.memory).start()

    def run_batch(self, key: BatchKey):
        env = self.dev.env
        self._foreground(key.foreground)
        caps = tuple(p.cap_mhz for p in self.dev.cpufreq)
        self._plan, self._go, self._done = key.plan, True, env.event()
        resume, self._resume = self._resume, env.event()
        resume.succeed()
        env.run(until=self._done)
        (b, _, t0, lat, energy, _, _), layers = self._rows
        layer_s = tuple((layer, phase, end - start) for (_, layer, _, _, phase, _, start, end) in layers)
        return BatchRecord(b, t0, lat, energy, caps), layer_s


@dataclass
class PolicyCosts:
    """The fleet's cost factory: ``(model, policy) -> PolicyCost``, all sharing one batch model
    (it travels to worker processes with its memo; a worker's misses stay its own)."""

    batch_model: BatchModel = field(default_factory=BatchModel)
    runtime: str = "pytorch"
    fast_forward: bool = True

    def __call__(self, model: str, policy: str) -> PolicyCost:
        return PolicyCost(model, policy, self.batch_model, self.runtime, self.fast_forward)


def likely_keys(devices, model: str, runtime: str = "pytorch") -> list[BatchKey]:
    """The batches a fleet run is sure to ask for: every pinned choice and PyTorch's default
    on each device, screen off (what exploration and the baselines run first), cold (a
    request's first batch) and warm."""
    cat = _catalogue()
    keys = []
    for d in devices:
        soc = cat.device(d).soc
        for c in (*enumerate_choices(soc, mixed=False), pytorch_default(soc)):
            keys += [BatchKey(d, model, c, runtime=runtime, warmup=w) for w in (0, 1)]
    return keys


def memo_report(result, batch_model: BatchModel) -> str:
    """One line on the batch model: what its memo holds, and the rounds' hits and misses
    (summed over every process that ran a request)."""
    hits, misses = result.lookups
    rate = hits / (hits + misses) if hits + misses else float("nan")
    return (f"batch model: the memo holds {len(batch_model)} batches (simulated ahead, and merged from the "
            f"workers); in the rounds {hits} lookups hit and {misses} batches were simulated (hit rate {rate:.1%})")


def run_policy_fleet(config, out_dir, jobs: int | None = None, dask_address: str | None = None,
                     progress: bool = True, no_limit: bool = False):
    """`swansim.fleet.run.run_fleet` with the policies on the batch model: the memo is loaded
    from ``out_dir/batch-memo.pkl`` (when the code and profiles that computed it are these),
    filled with `likely_keys` over a process pool, and saved back after the run."""

    from swansim import checks
    from swansim.fleet.run import _check_run, build_population, run_fleet, validate
    from swansim.pool import check_jobs

    validate(config, no_limit=no_limit)
    jobs = check_jobs(jobs)
    _check_run(jobs, dask_address, out_dir)
    costs = PolicyCosts(BatchModel(max_entries=1 << 16))
    for p in config.policies:
        if policy_class(p, "--policies").needs_oracle:
            raise InputError("--policies", p, "needs every phone's true latencies up front; not a fleet policy")
        costs(config.model, p)   # an unknown model or policy fails here, before any simulation
    out = checks.out_dir(out_dir)
    memo_path = out / "batch-memo.pkl"
    bm = costs.batch_model
    with DirLock(out):
        bm.load(memo_path)
        population = build_population(config)   # a bad trace fails here, before the prefill
        bm.prefill(likely_keys(sorted(set(population.devices)), config.model), jobs, progress)
        bm.save(memo_path)
        result = run_fleet(config, costs, out, jobs=jobs, dask_address=dask_address, progress=progress,
                           no_limit=no_limit, population=population)
        bm.save(memo_path)   # merged: what every worker simulated on the way
        add_to_manifest(out, [memo_path.name])
    return result, bm
