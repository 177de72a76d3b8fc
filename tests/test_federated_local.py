"""The fleet with the policies on the batch model: fast-forward against full simulation.

A small fleet (Pixel 3s, resnet34) runs a few rounds twice: each client's local batches
fast-forwarded with the batch model, and each fully simulated (`PolicyCost(fast_forward=False)`).
Round times, energy and drop-outs must agree within 2%; the carry a client leaves behind must
stay small (the fleet checkpoints it every round).
"""
import pickle

import pytest

from swansim.federated.local import PolicyCosts, likely_keys
from swansim.federated.fleet import FleetConfig, build_population, run_fleet
from swansim.batchmodel import BatchModel

CFG = FleetConfig(model="resnet34", policies=("swan", "pytorch-default"), clients=48, per_round=4, rounds=2,
                  local_steps=4, devices=(("pixel3", 1.0),), trace_days=2, seed=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    bm = BatchModel()
    bm.prefill(likely_keys(["pixel3"], CFG.model), jobs=1, progress=False)
    fast = run_fleet(CFG, PolicyCosts(bm), tmp_path_factory.mktemp("ff"), progress=False)
    full = run_fleet(CFG, PolicyCosts(bm, fast_forward=False), tmp_path_factory.mktemp("full"), progress=False)
    return fast, full


def test_fast_forward_rounds_match_full_simulation(runs):
    fast, full = (r.rounds.set_index(["policy", "round"]) for r in runs)
    assert fast["round_s"].to_numpy() == pytest.approx(full["round_s"].to_numpy(), rel=0.02)
    for col in ("completed", "dropped", "stragglers", "declined"):
        assert (fast[col] == full[col]).all(), col
    assert (fast["energy_j"] > 0).all()


def test_fast_forward_round_energy_matches_full_simulation(runs):
    fast, full = (r.rounds.set_index(["policy", "round"]) for r in runs)
    assert fast["energy_j"].to_numpy() == pytest.approx(full["energy_j"].to_numpy(), rel=0.02)


def test_a_clients_carry_stays_small(tmp_path):
    from swansim.federated.local import PolicyCost
    from swansim.federated.rounds import LocalRequest

    pop = build_population(CFG)
    cost = PolicyCost(CFG.model, "swan", BatchModel())
    client = pop.client(0)
    tl = pop.timeline(0, 0.0)
    req = LocalRequest(client, 1, 3600.0, 2, 16, 3600.0 + 600.0, tl.state_at(3600.0), tl, None)
    out = cost.train(req)
    assert len(pickle.dumps(out.carry)) < 20_000


def test_swan_checks_in_only_on_an_idle_phone_the_default_whenever_the_battery_allows():
    from dataclasses import replace

    from swansim.federated.local import PolicyCost

    pop = build_population(CFG)
    client = pop.client(0)
    idle = replace(pop.timeline(0, 0.0).state_at(3600.0), battery_pct=80.0, screen_on=False, app=None)
    in_use = replace(idle, screen_on=True, app="browsing")
    swan, default = PolicyCost(CFG.model, "swan", BatchModel()), PolicyCost(CFG.model, "pytorch-default", BatchModel())
    assert swan.admit(client, idle) and not swan.admit(client, in_use)
    assert default.admit(client, idle) and default.admit(client, in_use)


def test_same_summaries_in_process_in_a_pool_and_on_dask(tmp_path):
    """The policies on the batch model give the same rounds whoever computes them (workers
    simulate their own memo misses: the simulation is deterministic)."""
    cfg = CFG.__class__(**{**CFG.__dict__, "policies": ("swan",), "local_steps": 3})
    bm = BatchModel()
    outs = []
    for name, kw in (("serial", {"jobs": 1}), ("pool", {"jobs": 2}), ("dask", {"jobs": 2, "dask_address": "local"})):
        run_fleet(cfg, PolicyCosts(bm), tmp_path / name, progress=False, **kw)
        outs.append({f: (tmp_path / name / f).read_bytes() for f in ("rounds.csv", "summary.csv")})
    assert outs[0] == outs[1] == outs[2]


def test_a_batch_one_worker_simulated_reaches_the_others_and_the_saved_memo():
    """The coordinator gathers what workers simulated in a round and hands it to every chunk of
    the next: a worker's cost learns it (no second simulation), and the coordinator's memo - the
    one saved next to the run - holds it."""
    from swansim.batchmodel import BatchKey, BatchModel
    from swansim.dnn.choices import parse_choice
    from swansim.federated.local import PolicyCost
    from swansim.hw.profile import Catalogue

    soc = Catalogue.load().device("pixel3").soc
    key = BatchKey("pixel3", "resnet34", parse_choice("4", soc), batches=1, warmup=0)
    worker, coordinator = PolicyCost("resnet34", "swan", BatchModel()), PolicyCost("resnet34", "swan", BatchModel())
    worker.batch_model.cost(key)
    news = worker.news()
    assert list(news) == [key] and worker.news() == {}        # each batch reported once
    coordinator.learn(news)
    coordinator.batch_model.cost(key)
    assert (coordinator.batch_model.hits, coordinator.batch_model.misses) == (1, 0)


def test_a_declined_request_says_why():
    from swansim.federated.local import PolicyCost
    from swansim.federated.rounds import LocalRequest

    pop = build_population(CFG)
    tl = pop.timeline(0, 0.0)
    t = next(float(t) for t in range(0, 2 * 86_400, 300) if tl.state_at(t).screen_on)
    req = LocalRequest(pop.client(0), 1, t, 2, 16, t + 600.0, tl.state_at(t), tl, None)
    out = PolicyCost(CFG.model, "swan", BatchModel()).train(req)
    assert not out.admitted and out.declined_why == "owner_active"
