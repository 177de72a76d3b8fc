"""The per-batch step every driver takes (swansim.session.step), and the two drivers on it."""
from __future__ import annotations

import math

from dataclasses import replace

import pytest

from swansim.kernel.thermal_gov import ThermalStatus
from swansim.policy import Policy, PhoneState, make_policy
from swansim.session.step import PolicyStep, is_quiet, model_info

from conftest import PIXEL3

IDLE = PhoneState(time_s=0.0, battery_pct=80.0, battery_temp_c=30.0, charging=False, screen_on=False,
                  foreground_app=False, thermal_status=ThermalStatus.NONE)


class Recorder(Policy):
    """Admits while the battery is cool; plans the first choice; keeps every view it saw."""

    def __init__(self):
        super().__init__()
        self.views, self.seen = [], []

    def admit(self, state):
        return state.battery_temp_c < 35.0

    def why_declined(self, state):
        return "battery_hot"

    def plan(self, view):
        self.views.append((view, len(view.history)))   # the history is live: its length now
        return view.uniform(view.choices[0])

    def observe(self, stats):
        self.seen.append(stats)


def test_a_step_counts_batches_in_requests_and_a_decline_ends_the_request():
    policy = Recorder()
    step = PolicyStep(policy, PIXEL3.soc, "resnet34", request=4)
    for b in range(3):
        assert step.admit(IDLE)
        plan = step.plan(IDLE, b)
        stats = step.observe(b, plan, IDLE, float(b), 1.0, 2.0, (), is_quiet(IDLE, False))
        assert (stats.request, stats.batch_in_request, stats.quiet) == (4, b, True)
    assert [(v.batch_in_request, n) for v, n in policy.views] == [(0, 0), (1, 1), (2, 2)]
    assert not step.admit(replace(IDLE, battery_temp_c=40.0))
    assert step.declines["battery_hot"] == 1 and (step.request, step.in_request) == (5, 0)
    assert not step.admit(replace(IDLE, battery_temp_c=40.0))     # no request in flight: none dropped
    assert step.declines["battery_hot"] == 2 and step.request == 5
    assert policy.seen == step.stats


def test_a_step_asks_accept_before_a_request_and_admit_within_it():
    policy = make_policy("swan")
    step = PolicyStep(policy, PIXEL3.soc, "resnet34")
    busy = replace(IDLE, screen_on=True, foreground_app=True)
    assert not step.admit(busy) and step.declines["owner_active"] == 1 and step.in_request == 0
    assert step.admit(IDLE)
    step.observe(0, step.plan(IDLE, 0), IDLE, 0.0, 1.0, 1.0, (), True)
    assert step.admit(busy)                       # the owner came back during the request
    step.observe(1, step.plan(busy, 1), busy, 1.0, 1.0, 1.0, (), False)
    step.end_request()
    assert not step.admit(busy) and step.declines["owner_active"] == 2


@pytest.mark.parametrize("state, changed, quiet", [
    (IDLE, False, True), (IDLE, True, False), (replace(IDLE, charging=True), False, False),
    (replace(IDLE, screen_on=True), False, False), (replace(IDLE, foreground_app=True), False, False),
])
def test_the_quiet_rule(state, changed, quiet):
    assert is_quiet(state, changed) is quiet


def test_the_step_knows_the_model_and_the_phone():
    step = PolicyStep(make_policy("swan"), PIXEL3.soc, "mobilenet_v2")
    info = model_info("mobilenet_v2")
    assert step.info is info and info.n_layers == len(info.layer_ops) > 50
    assert step.default_choice.threads == len(PIXEL3.soc.big_cpus)
    assert {c.kind for c in step.choices} >= {"little", "big", "mixed"}


def test_the_fleet_and_a_full_run_take_the_same_step_for_the_same_batches():
    """A request of three batches on an idle Pixel 3: the fast-forward driver (memoised batch
    costs) and its validation path (every batch simulated) show the policy the same views and
    hand it the same kind of measurements, through the one step."""
    from swansim.batchmodel import BatchModel
    from swansim.device import Device
    from swansim.session.driver import FastForwardDriver

    seen = []
    for fast in (True, False):
        policy = Recorder()
        dev = Device(PIXEL3)
        done, energy_j = FastForwardDriver(dev, policy, "shufflenet_v2_x2_0", BatchModel(), fast_forward=fast).run(
            3, _Owner())
        assert done == 3 and energy_j > 0
        seen.append([(v.batch, v.request, v.batch_in_request, n) for v, n in policy.views])
        assert all(s.quiet for s in policy.seen)
    assert seen[0] == seen[1] == [(0, 0, 0, 0), (1, 0, 1, 1), (2, 0, 2, 2)]


@pytest.mark.parametrize("fast", [True, False])
def test_a_requests_energy_is_what_the_training_adds_to_the_phones_own_draw(fast):
    """The energy loan borrows the training's energy: the same request on a phone on its
    charger, or with its screen on, costs what it costs on an idle phone (the charger's loss,
    the screen and the idle floor are the owner's, in the trace's level already)."""
    from swansim.batchmodel import BatchModel
    from swansim.device import Device, DeviceConfig
    from swansim.dnn.choices import parse_choice
    from swansim.session.driver import FastForwardDriver

    class Pinned(Policy):   # one big core, whatever the owner does
        def plan(self, view):
            return view.uniform(parse_choice("4", PIXEL3.soc))

    energy = {}
    memo = BatchModel()
    for charging, screen_on, soc in ((False, False, 80.0), (True, False, 80.0), (False, True, 80.0),
                                     (True, False, 100.0)):   # full: the charger carries the load
        owner = _Owner()
        owner._State = type("S", (), dict(battery_pct=soc, charging=charging, screen_on=screen_on, app=None))
        dev = Device(PIXEL3, DeviceConfig(charging=charging, initial_soc_pct=soc))
        done, energy[charging, screen_on, soc] = FastForwardDriver(
            dev, Pinned(), "shufflenet_v2_x2_0", memo, fast_forward=fast).run(2, owner)
        assert done == 2
    idle = energy[False, False, 80.0]
    assert idle > 0
    for key in ((True, False, 80.0), (False, True, 80.0), (True, False, 100.0)):
        assert energy[key] == pytest.approx(idle, rel=0.01), key


def test_the_phone_follows_a_charger_plugged_in_during_a_request():
    from swansim.batchmodel import BatchModel
    from swansim.device import Device, DeviceConfig
    from swansim.session.driver import FastForwardDriver

    class Plugging(_Owner):   # plugs the charger in after the request's first second
        def state_at(self, t_s):
            return type("S", (), dict(battery_pct=80.0, charging=t_s > 1.0, screen_on=False, app=None))

    dev = Device(PIXEL3, DeviceConfig(charging=False, initial_soc_pct=80.0))
    FastForwardDriver(dev, Recorder(), "shufflenet_v2_x2_0", BatchModel()).run(2, Plugging())
    assert dev.battery.charging and dev.battery.charger_j > 0


def test_a_steady_policys_request_runs_as_one_stretch_and_ends_where_its_batches_one_by_one_do(monkeypatch):
    """A static policy is steady (`Policy.steady`): after a request's first batch the rest run
    as one stretch; the policy still plans and observes every batch, and the phone, the time
    and the training's energy end where they do with every batch on its own."""
    from swansim.batchmodel import BatchModel, FastForward
    from swansim.device import Device
    from swansim.dnn.choices import parse_choice
    from swansim.policy.baselines import Static
    from swansim.session.driver import FastForwardDriver

    class Pinned(Static):
        def choose(self, view):
            return parse_choice("4", PIXEL3.soc)

    runs, memo, out = [], BatchModel(), {}
    stretch = FastForward.run_stretch
    monkeypatch.setattr(FastForward, "run_stretch", lambda self, key, n, ahead=0: runs.append(n) or
                        stretch(self, key, n, ahead))
    for stretches in (True, False):
        if not stretches:
            monkeypatch.setattr(FastForwardDriver, "_stretch", lambda *a: 0)
        dev, policy = Device(PIXEL3), Pinned()
        seen = []
        policy.observe = lambda s, seen=seen: seen.append((s.batch, s.batch_in_request, s.plan.label))
        done, energy_j = FastForwardDriver(dev, policy, "shufflenet_v2_x2_0", memo).run(12, _Owner(), start_s=50.0)
        dev.sched.sync()
        out[stretches] = (done, energy_j, dev.env.now, dev.platform.thermal.temp_c, seen)
    assert runs == [11]
    (d1, e1, t1, c1, s1), (d0, e0, t0, c0, s0) = out[True], out[False]
    assert d1 == d0 == 12 and s1 == s0 == [(i, i, "4") for i in range(12)]
    assert t1 == pytest.approx(t0, rel=1e-9)
    assert e1 == pytest.approx(e0, rel=1e-3)
    assert c1 == pytest.approx(c0, abs=0.05)


class _Owner:
    """Nobody: a phone idle and discharging at 80%."""

    class _State:
        battery_pct, charging, screen_on, app = 80.0, False, False, None

    def state_at(self, t_s):
        return self._State

    def changed(self, t0_s, t1_s):
        return False

    def holds_until(self, t_s):
        return math.inf


@pytest.mark.parametrize("threads, period_s, burst_s", [(1, 0.010, 0.002), (3, 0.004, 0.001)])
def test_background_bursts_keep_their_closed_form_share_of_the_cores(threads, period_s, burst_s):
    """At the top clock each burst thread is busy burst / (mean sleep + burst) of the time (a renewal
    process); it runs only in its cpuset; and the same seed gives the same run."""
    from swansim.device import Device, DeviceConfig
    from swansim.session.workloads import Bursts

    def run(seed: int) -> list[float]:
        dev = Device(PIXEL3, DeviceConfig(governor="performance", thermal_governor="off"))
        Bursts(dev, [0, 1], threads, period_s, burst_s, seed=seed)
        dev.run(span_s)
        return dev.sched.busy_s

    span_s = 20.0
    busy = run(1)
    share = threads * burst_s / (period_s + burst_s)
    cycles = span_s / (period_s + burst_s) * threads   # sleep-burst cycles: the share's standard error ~ 1/sqrt(cycles)
    assert sum(busy) / span_s == pytest.approx(share, rel=4 / math.sqrt(cycles))
    assert busy[2:] == [0.0] * (len(busy) - 2)
    assert busy == run(1) and busy != run(2)
