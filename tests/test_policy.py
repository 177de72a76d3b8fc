"""Policies as state machines, driven with synthetic measurements (no simulation)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swansim.dnn.choices import enumerate_choices, pytorch_default
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.kernel.thermal_gov import ThermalStatus
from swansim.policy import make_policy, policy_names
from swansim.policy.swan import Profile, SwanParams, ladder_of
from swansim.policy.swan_layer import best_chain, chain_steps
from swansim.policy.view import BatchStats, History, LayerStat, ModelInfo, PhoneState, PolicyView

SOC = Catalogue.load().device("pixel3").soc
CHOICES = tuple(enumerate_choices(SOC, mixed=True))
BY = {c.label: c for c in CHOICES}
SPACE = [c for c in CHOICES if c.kind != "mixed"]          # 0 01 012 0123 4 45 456 4567
N_LAYERS = 3
MODEL = ModelInfo("toy", tuple(f"l{i}" for i in range(N_LAYERS)), ("conv",) * N_LAYERS)


def state(t=0.0, screen=False, app=False, charging=False, battery=80.0, temp=30.0):
    return PhoneState(t, battery, temp, charging, screen, app, ThermalStatus.NONE)


class World:
    """A fake phone: each choice's batch latency and energy, split evenly over layer phases."""

    def __init__(self, policy, latency, energy=None, layer_latency=None):
        self.policy, self.latency = policy, latency
        self.energy = energy or {k: 1.0 for k in latency}
        self.layer_latency = layer_latency
        self.t, self.batch, self.request, self.in_request = 0.0, 0, 0, 0
        self.history = []
        self.plans = []

    def step(self, slowdown=1.0, request_batches=20, **st):
        s = state(self.t, **st)
        view = PolicyView(CHOICES, pytorch_default(SOC), MODEL, s, self.batch, self.request, self.in_request,
                          History(self.history))
        plan = self.policy.plan(view)
        self.plans.append((plan, self.policy.purpose))
        layers, t = [], self.t
        phases = [(i, "fwd", plan.fwd[i]) for i in range(N_LAYERS)]
        phases += [(i, ph, plan.bwd[i]) for i in reversed(range(N_LAYERS)) for ph in ("bwd_input", "bwd_weight")]
        phases += [(i, "update", plan.update) for i in range(N_LAYERS)]
        for i, ph, c in phases:
            d = (self.layer_latency[c.label][(i, ph)] if self.layer_latency
                 else self.latency[c.label] / len(phases)) * slowdown
            layers.append(LayerStat(i, ph, c, t, t + d))
            t += d
        lat = t - self.t
        e = sum(self.energy[c.label] * (l.latency_s / lat) for c, l in zip([x[2] for x in phases], layers))
        quiet = s.idle and not s.charging
        stats = BatchStats(self.batch, self.request, self.in_request, plan, self.t, lat, e, tuple(layers), s, quiet)
        self.history.append(stats)
        self.policy.observe(stats)
        self.t, self.batch = t, self.batch + 1
        self.in_request += 1
        if self.in_request >= request_batches:
            self.request, self.in_request = self.request + 1, 0
        return plan

    def run(self, n, **kw):
        return [self.step(**kw) for _ in range(n)]


# Pixel 3, ResNet-34-like: all big cores fastest; more little cores faster (Fig. 2a's shape)
RESNET = {"0": 6.5, "01": 4.6, "012": 4.2, "0123": 3.7, "4": 0.65, "45": 0.51, "456": 0.52, "4567": 0.49}
RESNET_J = {"0": 2.3, "01": 2.0, "012": 1.9, "0123": 1.8, "4": 1.04, "45": 1.10, "456": 1.20, "4567": 1.26}


def explored_swan(**kw):
    w = World(make_policy("swan", **kw), RESNET, RESNET_J)
    w.run(20 * 8)            # 8 requests: one choice explored per request
    return w


# ------------------------------------------------------------------------------------ swan


def test_swan_explores_one_choice_per_request_costliest_first_on_real_batches():
    w = explored_swan()
    explored = [(i // 20, p.label) for i, (p, why) in enumerate(w.plans) if why == "explore"]
    order = [c.label for c in reversed(SPACE)]
    # two batches per choice, at the start of each request, in reverse cost order
    assert [lbl for _, lbl in explored] == [lbl for lbl in order for _ in range(2)]
    assert [r for r, _ in explored] == [r for r in range(8) for _ in range(2)]
    assert set(w.policy.profiles) == set(SPACE)
    # the profile is the last exploration batch
    assert w.policy.profiles[BY["4"]].latency_s == pytest.approx(RESNET["4"])


@pytest.mark.parametrize("costliest_first", [True, False])
def test_swan_selects_the_fastest_explored_and_prunes_dominated_choices(costliest_first):
    w = explored_swan(costliest_first=costliest_first)
    assert w.plans[-1][0].label == "4567"
    # 456 is slower and costs more energy than 45, and 45 costs more than 4 while being faster:
    # the ladder keeps the little chain (each faster), 4, 45 and 4567; 456 is pruned
    assert [c.label for c in w.policy.ladder] == ["0", "01", "012", "0123", "4", "45", "4567"]
    assert {d.plan for d in w.policy.decisions if d.kind == "prune"} == {"456"}


@pytest.mark.parametrize("kw", [dict(screen=True), dict(app=True), dict(charging=True)])
def test_swan_never_explores_unless_idle_and_discharging(kw):
    w = World(make_policy("swan"), RESNET, RESNET_J)
    w.run(60, **kw)
    assert all(why == "train" for _, why in w.plans)
    assert not w.policy.profiles
    # with nothing explored it trains on the cheapest choice
    assert {p.label for p, _ in w.plans} == {"0"}
    w.run(2)   # idle now: exploration starts in this request
    assert w.plans[-1][1] == "explore"


def test_a_charging_swan_trains_on_what_a_coordinator_shares_and_offers_what_it_measured():
    donor = explored_swan()
    shared = donor.policy.offer()
    assert set(shared) == set(SPACE)
    w = World(make_policy("swan"), RESNET, RESNET_J)
    w.policy.adopt({c: p for c, p in shared.items() if c.label != "45"})
    w.run(3, charging=True)
    # never explored itself (charging), yet on the fastest shared choice, not the cheapest
    assert all(why == "train" for _, why in w.plans) and {p.label for p, _ in w.plans} == {"4567"}
    assert any(d.kind == "select" and "coordinator" in d.detail for d in w.policy.decisions)
    w.run(20 * 2)   # idle: it explores only what nobody shared
    assert [p.label for p, why in w.plans if why == "explore"] == ["45", "45"]
    assert make_policy("pytorch-default").offer() == {}


def test_exploration_abandoned_when_the_owner_interrupts_it():
    w = World(make_policy("swan"), RESNET, RESNET_J)
    w.step()                                   # first exploration batch of 4567
    w.step(screen=True)                        # the owner picks the phone up
    assert BY["4567"] not in w.policy.profiles
    assert any(d.kind == "explore_abort" for d in w.policy.decisions)
    w.run(18)
    w.step()                                   # next request, idle: 4567 is tried again
    assert w.plans[-1][0].label == "4567" and w.plans[-1][1] == "explore"


def test_step_down_above_1_1x_profile_and_not_below():
    w = explored_swan()
    top = w.plans[-1][0].label
    w.run(3, slowdown=1.09)
    assert w.plans[-1][0].label == top
    w.run(1, slowdown=1.12)
    w.step()
    assert w.plans[-1][0].label == "45"        # one rung down
    kinds = [d.kind for d in w.policy.decisions]
    assert kinds.count("step_down") == 1


def test_a_requests_first_batch_is_not_held_against_the_profile():
    """It runs on a new training process (its pools, clocks ramping from idle): no profile
    contains that, so a slow first batch does not step Swan down; the second is checked."""
    w = explored_swan()
    assert w.in_request == 0
    w.run(1, slowdown=1.5)
    assert not any(d.kind == "step_down" for d in w.policy.decisions)
    w.run(1, slowdown=1.5)
    assert [d.plan for d in w.policy.decisions if d.kind == "step_down"] == ["45"]


def test_swan_is_steady_on_its_top_rung_with_nothing_to_explore_and_nowhere_else():
    """`Policy.steady`: what a fleet's fast-forward runs as one stretch of batches."""
    fresh = World(make_policy("swan"), RESNET, RESNET_J)
    plan = fresh.step()                        # explores (an idle phone, discharging)
    assert not fresh.policy.steady(state(fresh.t), plan, RESNET[plan.label])
    w = explored_swan()
    plan = w.step()
    assert plan.label == "4567" and w.policy.steady(state(w.t), plan, RESNET["4567"])
    assert w.policy.steady(state(w.t), plan, 1.09 * RESNET["4567"])
    assert not w.policy.steady(state(w.t), plan, 1.12 * RESNET["4567"])   # it would step down
    w.run(2, slowdown=1.5)                     # down to 45
    plan = w.step()
    assert plan.label == "45" and not w.policy.steady(state(w.t), plan, RESNET["45"])   # it will step up
    static = make_policy("pytorch-default")
    view = PolicyView(CHOICES, pytorch_default(SOC), MODEL, state(), 0, 0, 0, History([]))
    assert static.steady(state(), static.plan(view), 1.0)


def test_grace_batch_after_a_change_is_not_held_against_the_profile():
    w = explored_swan()
    w.step()                                   # a new request's first batch (not checked)
    w.run(1, slowdown=1.5)                     # step down to 45
    n = sum(d.kind == "step_down" for d in w.policy.decisions)
    w.run(1, slowdown=1.5)                     # first batch on 45: the migration's batch, not checked
    assert sum(d.kind == "step_down" for d in w.policy.decisions) == n
    w.run(1, slowdown=1.5)                     # still slow: one more rung down
    assert sum(d.kind == "step_down" for d in w.policy.decisions) == n + 1
    assert w.plans[-1][0].label == "45" and w.policy.rung_plan(w.policy.rung).label == "4"


def test_step_up_two_minutes_after_the_last_step_down_then_a_rung_a_batch():
    """Fig. 4b: grade_time is set where the choice is downgraded only; once two minutes have
    passed, every batch that is not slowed steps one rung up."""
    w = explored_swan()
    w.step()                                   # a new request's first batch (not checked)
    w.run(1, slowdown=1.5)                     # 4567 -> 45
    w.run(2, slowdown=1.5)                     # the grace batch, then 45 -> 4
    assert w.policy.rung_plan(w.policy.rung).label == "4"
    t_down = w.t
    while w.t - t_down < 119.0:
        w.step()
        assert w.plans[-1][0].label == "4"
    while w.policy.rung_plan(w.policy.rung).label != "4567":
        w.step()
    up = [d for d in w.policy.decisions if d.kind == "step_up"]
    assert [d.plan for d in up] == ["45", "4567"]
    assert 120.0 <= up[0].time_s - t_down < 120.0 + RESNET["4"] * 2
    assert up[1].batch == up[0].batch + 1      # no second two-minute wait


def test_swan_declines_above_35c_and_on_low_battery_unless_charging():
    p = make_policy("swan")
    assert p.admit(state(temp=35.0))
    assert not p.admit(state(temp=35.1))
    assert not p.admit(state(temp=40.0, charging=True))
    assert not p.admit(state(battery=19.9))
    assert p.admit(state(battery=5.0, charging=True))
    assert p.admit(state(battery=20.0))
    assert [d.kind for d in p.decisions] == ["admit", "decline", "admit"]   # transitions only
    assert "35 C" in p.decisions[1].detail


@pytest.mark.parametrize("policy", ["swan", "swan-layer"])
def test_swan_takes_a_request_only_on_an_idle_phone_and_runs_it_on_when_the_owner_comes(policy):
    p = make_policy(policy)
    assert p.accept(state())
    for busy in (state(screen=True), state(app=True), state(screen=True, charging=True)):
        assert not p.accept(busy) and p.why_declined(busy) == "owner_active"
        assert p.admit(busy)              # a request taken on an idle phone goes on
    assert p.why_declined(state(screen=True, temp=40.0)) == "battery_hot"   # the battery first
    assert not p.accept(state(temp=40.0)) and not p.admit(state(temp=40.0))
    assert "using the phone" in [d for d in p.decisions if d.kind == "decline"][0].detail
    other = make_policy(policy, idle_requests_only=False)   # the other reading of the paper
    assert other.accept(state(screen=True, app=True)) and not other.accept(state(temp=40.0))


def test_the_oracle_monitors_as_swan_does():
    p = make_policy("oracle", latency_by_choice={"4": 1.0})
    assert p.accept(state()) and p.admit(state(screen=True))
    assert not p.accept(state(app=True)) and p.why_declined(state(app=True)) == "owner_active"


def test_swan_params_are_sourced_and_validated():
    from dataclasses import fields
    for f in fields(SwanParams):
        assert f.metadata["source"].startswith(("paper", "assumption"))
    for bad in (dict(slowdown_factor=0.9), dict(explore_batches=0), dict(min_battery_pct=120.0),
                dict(step_up_after_s=float("nan")), dict(costliest_first=1)):
        with pytest.raises(InputError):
            SwanParams(**bad)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(InputError, match="swan-layer"):
        make_policy("swam")


profiles_st = st.dictionaries(st.sampled_from(SPACE),
                              st.tuples(st.floats(0.1, 10.0), st.floats(0.1, 10.0)), min_size=1)


@given(profiles_st)
@settings(max_examples=200, deadline=None)
def test_ladder_properties(raw):
    profiles = {c: Profile(lat, e, {}, 0.0) for c, (lat, e) in raw.items()}
    ladder, pruned = ladder_of(profiles, SPACE)
    rank = {c: i for i, c in enumerate(SPACE)}
    assert [rank[c] for c in ladder] == sorted(rank[c] for c in ladder)              # cost order
    assert profiles[ladder[-1]].latency_s == min(p.latency_s for p in profiles.values())  # top = fastest
    for c in pruned:   # each pruned choice: a cheaper one is as fast and as efficient
        assert any(rank[d] < rank[c] and profiles[d].latency_s <= profiles[c].latency_s
                   and profiles[d].energy_j <= profiles[c].energy_j for d in profiles)
    for c in ladder:   # no kept choice is dominated by a cheaper one
        assert not any(rank[d] < rank[c] and profiles[d].latency_s <= profiles[c].latency_s
                       and profiles[d].energy_j <= profiles[c].energy_j for d in profiles)
    assert set(ladder) | set(pruned) <= set(profiles)


# ------------------------------------------------------------------------------ swan-layer


@given(st.integers(1, 6), st.integers(1, 3), st.data(), st.booleans())
@settings(max_examples=150, deadline=None)
def test_best_chain_matches_brute_force(n, c, data, cyclic):
    vals = st.floats(0.0, 10.0, allow_nan=False)
    costs = np.array([[data.draw(vals) for _ in range(c)] for _ in range(n)])
    switch = np.array([[0.0 if a == b else data.draw(vals) for b in range(c)] for a in range(c)])
    total, x = best_chain(costs, switch, cyclic)

    def value(xs):
        v = sum(costs[i, xs[i]] for i in range(n)) + sum(switch[xs[i - 1], xs[i]] for i in range(1, n))
        return v + (switch[xs[-1], xs[0]] if cyclic else 0.0)

    brute = min(value(xs) for xs in itertools.product(range(c), repeat=n))
    assert total == pytest.approx(brute, abs=1e-9)
    assert value(x) == pytest.approx(total, abs=1e-9)


def test_best_chain_respects_disallowed_choices():
    costs = np.array([[1.0, np.inf], [5.0, 1.0], [1.0, np.inf]])
    total, x = best_chain(costs, np.array([[0.0, 0.5], [0.5, 0.0]]))
    assert x == [0, 1, 0] and total == pytest.approx(1 + 1 + 1 + 0.5 + 0.5)


def _layered(fast_fwd, fast_bwd):
    """Layer-phase latencies: ``fast_fwd`` is quickest forward, ``fast_bwd`` backward; others 2x."""
    out = {}
    for lbl in RESNET:
        d = {}
        for i in range(N_LAYERS):
            d[(i, "fwd")] = 0.01 if lbl == fast_fwd else 0.02
            for ph in ("bwd_input", "bwd_weight"):
                d[(i, ph)] = 0.02 if lbl == fast_bwd else 0.04
            d[(i, "update")] = 0.001
        out[lbl] = d
    lat = {lbl: sum(d.values()) for lbl, d in out.items()}
    return out, lat


def test_swan_layer_mixes_choices_when_layers_disagree_and_switching_is_cheap():
    layer_s, lat = _layered("4", "4567")
    w = World(make_policy("swan-layer"), lat, RESNET_J, layer_s)
    w.run(20 * 8)
    plan = w.plans[-1][0]
    assert plan.label == "per-layer"
    assert {c.label for c in plan.fwd} == {"4"} and {c.label for c in plan.bwd} == {"4567"}
    # the plan was profiled on a real batch and kept (faster than the uniform top)
    assert any(d.kind == "profiled" for d in w.policy.decisions)


def test_swan_layer_drops_a_plan_that_measures_slower_than_uniform():
    layer_s, lat = _layered("4", "4567")
    w = World(make_policy("swan-layer"), lat, RESNET_J, layer_s)
    w.run(20 * 3 + 2)                          # 4567, 456, 45, 4 explored: the plan is per-layer now
    slow = w.policy.rung_plan(w.policy.rung)
    assert slow.label == "per-layer"
    # its first batches (the grace batch, then its profile) run 3x slower than its layers predicted
    w.run(2, slowdown=3.0)
    assert w.policy.decisions[-2].kind == "profiled" and "predicted" in w.policy.decisions[-2].detail
    w.run(10)
    assert all(p != slow for p, _ in w.plans[-10:])          # never run again
    assert w.policy.switch_s(BY["4"], BY["4567"]) > 0         # the switches it saw cost time


def test_swan_layer_plan_equals_swan_with_uniform_layers():
    w = World(make_policy("swan-layer"), RESNET, RESNET_J)
    w.run(20 * 8)
    assert w.plans[-1][0].label == "4567"


def test_chain_steps_cover_every_phase_once():
    steps = chain_steps(4)
    assert steps[:4] == [("fwd", i) for i in range(4)] and steps[4:8] == [("bwd", i) for i in (3, 2, 1, 0)]
    assert steps[-1] == ("update", -1) and len(steps) == 9


# ------------------------------------------------------------------------------- baselines


def view_at(s=None):
    return PolicyView(CHOICES, pytorch_default(SOC), MODEL, s or state(), 0, 0, 0, History([]))


@pytest.mark.parametrize("name,label", [("pytorch-default", "01234567/t4"), ("eas", "01234567/t4"),
                                        ("idle-charging-only", "01234567/t4"), ("all-cores", "01234567"),
                                        ("little-only", "0123")])
def test_static_baselines_choose_their_choice(name, label):
    p = make_policy(name)
    assert p.plan(view_at()).label == label
    assert p.plan(view_at()) is p.plan(view_at())


def test_eas_asks_for_the_kernels_energy_aware_placement():
    assert make_policy("eas").placement == "eas" and make_policy("pytorch-default").placement is None


def test_idle_charging_only_admits_only_idle_and_charging():
    p = make_policy("idle-charging-only")
    assert p.admit(state(charging=True))
    assert not p.admit(state(charging=False))
    assert not p.admit(state(charging=True, screen=True))
    assert not p.admit(state(charging=True, app=True))
    assert make_policy("pytorch-default").admit(state(temp=50.0, battery=1.0))


def test_oracle_picks_the_fastest_known_choice_and_needs_its_knowledge():
    lat = {**RESNET, "01234567/t4": 0.5, "01234567": 0.7}
    assert make_policy("oracle", latency_by_choice=lat).plan(view_at()).label == "4567"
    lat["0123"] = 0.1
    assert make_policy("oracle", latency_by_choice=lat).plan(view_at()).label == "0123"
    with pytest.raises(InputError):
        make_policy("oracle")
    assert not make_policy("oracle", latency_by_choice=lat).admit(state(temp=36.0))


def test_registry_lists_every_required_policy():
    assert set(policy_names()) >= {"swan", "swan-layer", "pytorch-default", "all-cores", "little-only", "eas",
                                   "idle-charging-only", "oracle"}


def test_swan_layer_judges_a_plan_against_its_mean_not_its_luckiest_batch():
    """A per-layer plan picked on one lucky batch (0.9x) then runs its ordinary latency: that is
    1.11x its first sample but within 1.1x of its mean, so it is no interference (no step down)."""
    layer_s, lat = _layered("4", "4567")
    w = World(make_policy("swan-layer"), lat, RESNET_J, layer_s)
    w.run(20 * 3 + 2)
    plan = w.policy.rung_plan(w.policy.rung)
    assert plan.label == "per-layer"
    w.run(1)                                    # the grace batch
    w.run(1, slowdown=0.9)                      # its profile: a lucky batch
    assert w.policy.decisions[-1].kind == "profiled"
    rung = w.policy.rung
    w.run(3)
    assert w.policy.rung == rung and all(p == plan for p, _ in w.plans[-3:])
    assert w.policy.expected_s(plan) == pytest.approx(sum(layer_s["4"][k] if k[1] == "fwd" else layer_s["4567"][k]
                                                          for k in layer_s["4"]) * (0.9 + 3) / 4, rel=0.05)
