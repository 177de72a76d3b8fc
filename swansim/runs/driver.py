"""A policy at work: wires a policy to a training job on a device through the job's hooks.

Before each batch the job's ``gate`` asks ``policy.admit`` (a declined engine waits for a
screen, app or charger change, or the next poll); the job's plan callable asks ``policy.plan``
with a `PolicyView`; ``on_batch`` hands ``policy.observe`` the batch's measurements and keeps
the batch and layer rows. Training requests are FedAvg local rounds of ``request_batches``
batches (Swan explores one choice per request); a decline ends the request. The training
process sits in Android group ``group`` (top-app, as Swan's python forked from Termux on the
screen: runs.scenarios.TrainingBackground says why), with that group's cpuset.
"""
from __future__ import annotations

from typing import Callable

from swansim.device import Device
from swansim.hw.profile import TOP_APP
from swansim.dnn.choices import Plan, enumerate_choices, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import TrainingJob
from swansim.policies.base import DECLINE_REASONS, Policy
from swansim.policies.view import BatchStats, History, LayerStat, ModelInfo, PhoneState, PolicyView

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
        soc = dev.spec.soc
        self.dev, self.env, self.policy = dev, dev.env, policy
        self.foreground = foreground
        self.request_batches, self.request_gap_s = request_batches, request_gap_s
        graph = build_task(model)
        self.info = ModelInfo(model, tuple(l.name for l in graph.layers), tuple(l.op for l in graph.layers))
        self.choices = tuple(enumerate_choices(soc, mixed=True))
        self.default_choice = pytorch_default(soc)
        # the phone's idle power (screen off, no charger loss), what a batch's energy is net of
        floor_w = dev.platform.total_power_w - dev.platform.charging_loss_w - \
            (dev.spec.screen_power_mw * 1e-3 if dev.platform.screen_on else 0.0)
        self.job = TrainingJob(dev.env, dev.sched, soc, graph, load_runtime(runtime), self._plan,
                               cpuset=dev.spec.cpuset(group), cgroup=group, name="train", idle_floor_w=floor_w,
                               record_layers=True)
        self.job.gate, self.job.on_batch = self._gate, self._on_batch
        self.stats: list[BatchStats] = []
        self._history = History(self.stats)
        self.batch_rows: list[dict] = []
        self.layer_rows: list[tuple] = []
        self.plan_ids: dict[Plan, int] = {}     # every distinct plan run, numbered as first seen
        self.request, self.in_request = 0, 0
        self._gap_due = False
        # admission checks refused, by reason (`policies.base.DECLINE_REASONS`)
        self.declines = dict.fromkeys(DECLINE_REASONS, 0)
        self.changes = 0
        self._changed = self.env.event()
        self._start: tuple[PhoneState, int, Plan] | None = None
        policy.begin(self.state())

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
        state = self.state()
        if self.policy.admit(state):
            return None
        why = self.policy.why_declined(state)
        self.declines[why if why in self.declines else "other"] += 1
        if self.in_request:    # a declined request is dropped; training resumes with a new one
            self.request, self.in_request = self.request + 1, 0
        return self.env.any_of([self.env.timeout(ADMIT_POLL_S), self._changed])

    def _plan(self, batch: int) -> Plan:
        state = self.state()
        view = PolicyView(self.choices, self.default_choice, self.info, state, batch, self.request,
                          self.in_request, self._history)
        plan = self.policy.plan(view)
        self._start = (state, self.changes, plan)
        return plan

    def _on_batch(self, row: tuple, layer_rows: list) -> None:
        batch, label, t0, lat, energy, net, migrations = row
        state, changes, plan = self._start
        quiet = state.idle and not state.charging and changes == self.changes
        layers = []
        for (_, layer, name, op, phase, choice, start, end) in layer_rows:
            c = plan.fwd[layer] if phase == "fwd" else plan.update if phase == "update" else plan.bwd[layer]
            layers.append(LayerStat(layer, phase, c, start, end))
            self.layer_rows.append((batch, layer, name, op, phase, choice, start, end))
        self.job.layer_rows.clear()    # kept here; the job's copies would only grow
        self.job.thread_rows.clear()
        stats = BatchStats(batch, self.request, self.in_request, plan, t0, lat, net, tuple(layers), state, quiet)
        self.stats.append(stats)
        self.batch_rows.append({
            "batch": batch, "request": self.request, "batch_in_request": self.in_request,
            "purpose": self.policy.purpose, "plan": label, "plan_id": self.plan_ids.setdefault(plan, len(self.plan_ids)),
            "start_s": t0, "latency_s": lat,
            "energy_j": net, "gross_energy_j": energy, "migrations": migrations, "quiet": quiet,
            "screen_on": state.screen_on, "foreground_app": state.foreground_app, "charging": state.charging,
            "battery_pct": state.battery_pct, "battery_temp_c": state.battery_temp_c})
        self.policy.observe(stats)
        self.in_request += 1
        if self.in_request >= self.request_batches:
            self.request, self.in_request = self.request + 1, 0
            self._gap_due = self.request_gap_s > 0
