"""The drivers that run a policy on a phone, both on `swansim.session.step.PolicyStep`.

`PolicyDriver` (full simulation) wires the step to a training job through the job's hooks:
before each batch the job's ``gate`` asks for admission (a declined engine waits for a screen,
app or charger change, or the next poll); its plan callable asks for the plan; ``on_batch``
hands the batch's measurements to the policy and keeps the batch and layer rows. Training
requests are FedAvg local rounds of ``request_batches`` batches (Swan explores one choice per
request); a decline ends the request. The training process sits in Android group ``group``
(top-app, as Swan's python forked from Termux on the screen: runs.scenarios.TrainingBackground
says why), with that group's cpuset.

`FastForwardDriver` runs one request on a phone advanced batch by batch with
`swansim.batchmodel.FastForward` (or, to validate it, every batch fully simulated: the
`SimulatedBatches` path): each batch's latency, energy and heat come from the event-level
simulation, memoised, while the phone's RC network and governors run as usual between and
during batches. The owner is whatever the caller says it is at each instant (`Owner`).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Protocol

from swansim.batchmodel import BatchKey, BatchModel, BatchRecord, FastForward
from swansim.device import Device
from swansim.dnn.choices import Choice, Plan
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import TrainingJob
from swansim.hw.profile import TOP_APP
from swansim.kernel.placement import AUTO
from swansim.policy.base import Policy
from swansim.policy.view import LayerStat, PhoneState
from swansim.session.step import PolicyStep, is_quiet

# FedScale's default local round (fedscale/cloud/config_parser.py: --local_steps 20): a
# training request is that many mini-batches.
REQUEST_BATCHES = 20
# assumption: a declined engine re-reads the battery this often (Android delivers
# ACTION_BATTERY_CHANGED on level and temperature changes, seconds to minutes apart); screen,
# app and charger changes wake it at once.
ADMIT_POLL_S = 10.0


class PolicyDriver:
    """Wires a policy to a training job on a device: admission gate, plans, measurements.

    ``foreground()`` says whether an app of the owner's is in the foreground; ``notify()``
    must be called at every screen, app or charger change (it wakes a declined engine and
    marks the batch in flight as not quiet).
    """

    def __init__(self, dev: Device, policy: Policy, model: str, runtime: str = "pytorch",
                 foreground: Callable[[], bool] = lambda: False, request_batches: int = REQUEST_BATCHES,
                 request_gap_s: float = 0.0, group: str = TOP_APP):
        self.dev, self.env, self.policy = dev, dev.env, policy
        self.foreground = foreground
        self.request_batches, self.request_gap_s = request_batches, request_gap_s
        self.step = PolicyStep(policy, dev.spec.soc, model)
        self.job = TrainingJob(dev.env, dev.sched, dev.spec.soc, build_task(model), load_runtime(runtime), self._plan,
                               cpuset=dev.spec.cpuset(group), cgroup=group, name="train",
                               idle_floor_w=dev.platform.idle_floor_w, record_layers=True)
        self.job.gate, self.job.on_batch = self._gate, self._on_batch
        self.batch_rows: list[dict] = []
        self.layer_rows: list[tuple] = []
        self.plan_ids: dict[Plan, int] = {}     # every distinct plan run, numbered as first seen
        self._gap_due = False
        self.changes = 0
        self._changed = self.env.event()
        self._start: tuple[PhoneState, int, Plan] | None = None
        policy.begin(self.state())

    @property
    def declines(self) -> dict[str, int]:
        return self.step.declines

    # -- the phone ------------------------------------------------------------------------

    def state(self) -> PhoneState:
        d = self.dev
        d.sched.sync()
        bat = d.battery
        return PhoneState(time_s=d.env.now, battery_pct=bat.soc_pct if bat else None,
                          battery_temp_c=d.battery_temp_c, charging=bool(bat and bat.charging),
                          screen_on=d.platform.screen_on, foreground_app=self.foreground(),
                          thermal_status=d.thermal_status)

    def notify(self) -> None:
        """The screen, an app or the charger changed."""
        self.changes += 1
        ev, self._changed = self._changed, self.env.event()
        ev.succeed()

    # -- the job's hooks ------------------------------------------------------------------

    def _gate(self):
        if self._gap_due:
            self._gap_due = False
            return self.env.timeout(self.request_gap_s)
        if self.step.admit(self.state()):
            return None
        return self.env.any_of([self.env.timeout(ADMIT_POLL_S), self._changed])

    def _plan(self, batch: int) -> Plan:
        state = self.state()
        plan = self.step.plan(state, batch)
        self._start = (state, self.changes, plan)
        return plan

    def _on_batch(self, row: tuple, layer_rows: list) -> None:
        batch, label, t0, lat, energy, net, migrations = row
        state, changes, plan = self._start
        quiet = is_quiet(state, changes != self.changes)
        layers = []
        for (_, layer, name, op, phase, choice, start, end) in layer_rows:
            layers.append(LayerStat(layer, phase, plan.choice_at(layer, phase), start, end))
            self.layer_rows.append((batch, layer, name, op, phase, choice, start, end))
        self.job.layer_rows.clear()    # kept here; the job's copies would only grow
        self.job.thread_rows.clear()
        step = self.step
        self.batch_rows.append({
            "batch": batch, "request": step.request, "batch_in_request": step.in_request,
            "purpose": self.policy.purpose, "plan": label, "plan_id": self.plan_ids.setdefault(plan, len(self.plan_ids)),
            "start_s": t0, "latency_s": lat,
            "energy_j": net, "gross_energy_j": energy, "migrations": migrations, "quiet": quiet,
            "screen_on": state.screen_on, "foreground_app": state.foreground_app, "charging": state.charging,
            "battery_pct": state.battery_pct, "battery_temp_c": state.battery_temp_c})
        step.observe(batch, plan, state, t0, lat, net, tuple(layers), quiet)
        if step.in_request >= self.request_batches:
            step.end_request()
            self._gap_due = self.request_gap_s > 0


class Owner(Protocol):
    """The phone's owner as a fast-forwarded request sees them, at a time on the caller's clock:
    ``state_at(t)`` has ``battery_pct``, ``charging``, ``screen_on`` and ``app``
    (a foreground category or None); ``changed(t0, t1)`` whether the screen, an app or the
    charger changed in between; ``holds_until(t)`` until when ``state_at(t)`` holds (inf: for
    good), so that batches before then may run as one stretch."""

    def state_at(self, t_s: float): ...

    def changed(self, t0_s: float, t1_s: float) -> bool: ...

    def holds_until(self, t_s: float) -> float: ...


class FastForwardDriver:
    """One training request of a policy on a phone, batch by batch on the batch model (module
    doc). ``fast_forward=False`` simulates every batch instead (`SimulatedBatches`)."""

    def __init__(self, dev: Device, policy: Policy, model: str, batch_model: BatchModel, runtime: str = "pytorch",
                 placement: str = AUTO, request: int = 0, fast_forward: bool = True, seed: int = 0):
        self.dev, self.policy, self.model, self.runtime, self.placement = dev, policy, model, runtime, placement
        self.batch_model = batch_model
        self.step = PolicyStep(policy, dev.spec.soc, model, request)
        base = BatchKey(dev.spec.name, model, self.step.default_choice, runtime=runtime, placement=placement)
        self._phone: FastForward | None = None
        if fast_forward:   # its batches' layer times come from the memo, when a policy asks
            phone = self._phone = FastForward(dev, batch_model, base)
            self._run_batch = lambda key, ahead: (phone.run_batch(key, ahead), None)
        else:
            self._run_batch = SimulatedBatches(dev, model, runtime, seed).run_batch
        self.floor_w = dev.platform.idle_floor_w
        names = dev.platform.component_names
        # the energy lines that are not the training's: the screen and the charger's loss (the
        # owner's, in a trace's battery level already; the loss is drawn from the wall)
        self._owner_lines = [names.index(n) for n in ("screen", "charging_loss") if n in names]

    def run(self, n_batches: int, owner: Owner, start_s: float = 0.0, until_s: float = math.inf) -> tuple[int, float]:
        """Up to ``n_batches`` batches, while the policy admits and before ``until_s``; the
        caller's clock reads ``start_s`` when the phone's starts. The owner is asked, and the
        policy told, times on the caller's clock: a policy carried from request to request (a
        fleet client's, on a new phone each time) sees one clock, as the paper's Swan does.
        Returns the batches done and the energy they added to what the phone draws without
        them (J): the training's own, what the Swan paper's energy loan borrows - each batch's
        energy less the screen's, the charger's loss and the idle floor.

        Once the policy is `Policy.steady` on a request's plan, the request's remaining batches
        run as one stretch (`FastForward.run_stretch`) when nothing can change within it: the
        owner (screen, app, charger), the clocks' caps (`Device.quiet_stretch`) and admission
        (the policy admits every batch at the highest battery temperature the stretch can
        reach). Each batch is still planned and observed."""
        dev, step, policy = self.dev, self.step, self.policy
        plat, lines = dev.platform, self._owner_lines
        needs_layers = type(policy).needs_layers
        energy, k = 0.0, 0
        while k < n_batches:
            now = start_s + dev.env.now
            if now >= until_s:
                break
            owned = owner.state_at(now)
            state = self._state(owned, now)
            if not step.admit(state):
                break
            plan = step.plan(state, k)
            dev.platform.set_screen(state.screen_on)
            if dev.battery is not None and dev.battery.charging != owned.charging:
                dev.set_charging(owned.charging)   # the owner plugged in or out since the last batch
            # a request starts on a phone whose training process is new: its first batch is a
            # cold one (pool creation, clocks ramping), the others follow a batch
            key = BatchKey(dev.spec.name, self.model, plan.single or plan, runtime=self.runtime,
                           placement=self.placement, foreground=owned.app, warmup=0 if k == 0 else 1)
            n = self._stretch(state, key, plan, k, n_batches, start_s, until_s, owner) if k else 0
            owner_j = plat.energy_j[lines].sum()
            if n > 1:
                recs, layer_s = self._phone.run_stretch(key, n, n_batches - k - n), None
            else:
                rec, layer_s = self._run_batch(key, n_batches - 1 - k)
                recs = [rec]
            owner_j = (plat.energy_j[lines].sum() - owner_j) / len(recs)
            hot0_c = state.battery_temp_c
            for i, rec in enumerate(recs):
                if i:   # a stretch's later batches (the owner's state holds): admitted, planned as the first
                    state = self._state(owned, start_s + rec.start_s, hot0_c, i / len(recs))
                    if not step.admit(state) or step.plan(state, k) != plan:
                        raise RuntimeError(f"{policy.name}: a batch of a stretch found steady was not")
                energy += rec.energy_j - owner_j - self.floor_w * rec.latency_s
                quiet = is_quiet(state, owner.changed(start_s + rec.start_s, start_s + rec.start_s + rec.latency_s))
                layers = ()
                if needs_layers:
                    if layer_s is None:
                        layer_s = self.batch_model.cost(key.with_caps(rec.caps_mhz)).layer_s
                    layers = _layers(plan, layer_s, rec, start_s)
                step.observe(k, plan, state, start_s + rec.start_s, rec.latency_s,
                             rec.energy_j - self.floor_w * rec.latency_s, layers, quiet)
                k += 1
        return k, energy

    def _state(self, owned, time_s: float, start_c: float | None = None, share: float = 1.0) -> PhoneState:
        """The phone's state now, at the caller's time ``time_s``; or ``share`` of the way through
        a stretch that has run and began with the battery at ``start_c`` (its temperature then:
        between the stretch's ends, linearly; the battery's time constant is minutes)."""
        dev = self.dev
        temp_c = dev.battery_temp_c
        if start_c is not None and temp_c is not None:
            temp_c = start_c + share * (temp_c - start_c)
        return PhoneState(time_s=time_s, battery_pct=owned.battery_pct,
                          battery_temp_c=temp_c, charging=owned.charging, screen_on=owned.screen_on,
                          foreground_app=owned.app is not None, thermal_status=dev.thermal_status)

    def _stretch(self, state: PhoneState, key: BatchKey, plan: Plan, k: int, n_batches: int, start_s: float,
                 until_s: float, owner: Owner) -> int:
        """How many batches from batch ``k`` on may run as one stretch (see `run`; 0 or 1: none):
        each starts before the deadline and before the owner's state changes."""
        if self._phone is None:
            return 0
        phone, dev = self._phone, self.dev
        latency_s = phone.held_cost(key).latency_s
        if not self.policy.steady(state, plan, latency_s):
            return 0
        t0 = start_s + dev.env.now
        n = n_batches - k
        last_start_s = min(until_s, owner.holds_until(t0))
        if last_start_s < math.inf:
            n = min(n, math.ceil((last_start_s - t0) / latency_s))
        steady_s = dev.battery.loss_steady_for_s() if dev.battery is not None else math.inf
        if steady_s < math.inf:   # ends before the charger's loss may step (`Device.quiet_stretch`)
            n = min(n, math.floor(steady_s / latency_s))
        if n < 2:
            return 0

        def admitted(bounds) -> bool:   # every batch, at the hottest the battery can get
            hot_c = bounds.of("battery")[1] if dev.battery is not None else None
            return self.policy.admits(replace(state, battery_temp_c=hot_c))
        return n if dev.quiet_stretch(dev.env.now + n * latency_s, admitted) else 0


def _layers(plan: Plan, layer_s, rec: BatchRecord, clock_s: float) -> tuple[LayerStat, ...]:
    """The batch's layer phases laid end to end from its start (on a clock that read ``clock_s``
    when the phone's started), scaled to its measured length."""
    total = sum(s for _, _, s in layer_s) or 1.0
    scale = rec.latency_s / total
    out, t = [], clock_s + rec.start_s
    for layer, phase, s in layer_s:
        out.append(LayerStat(layer, phase, plan.choice_at(layer, phase), t, t + s * scale))
        t += s * scale
    return tuple(out)


class SimulatedBatches:
    """The request's batches fully simulated on the phone, one at a time: one training job held
    at its gate between batches (so its pool and clocks carry over, as in a real request), and
    the owner's app (if any) running while a batch runs. The validation path of the fast-forward."""

    def __init__(self, dev: Device, model: str, runtime: str, seed: int):
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
        from swansim.apps.appmodels import load_app_table
        from swansim.apps.ux import UxRecorder

        current = self._app.name if self._app is not None else None
        if category == current:
            return
        if self._app is not None:
            self._app.stop()
            self._app = None
        if category is not None:
            dev = self.dev
            self._app = load_app_table().app(dev.env, dev.sched, dev.spec, category, UxRecorder(), self.seed).start()

    def run_batch(self, key: BatchKey, ahead: int = 0) -> tuple[BatchRecord, tuple]:
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
