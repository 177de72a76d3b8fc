"""The fleet with the policies on the batch model: fast-forward against full simulation.

A small fleet (Pixel 3s, resnet34) runs a few rounds twice: each client's local batches
fast-forwarded with the batch model, and each fully simulated (`PolicyCost(fast_forward=False)`).
Round times, energy and drop-outs must agree within 2%; the carry a client leaves behind must
stay small (the fleet checkpoints it every round).
"""
import json
import math
import pickle

import pytest

from swansim.federated.local import PolicyCosts, likely_keys
from swansim.federated.fleet import FleetConfig, build_population, run_fleet
from swansim.batchmodel import BatchModel

from conftest import PIXEL3

CFG = FleetConfig(model="resnet34", policies=("swan", "pytorch-default"), clients=48, per_round=4, rounds=2,
                  local_steps=4, devices=(("pixel3", 1.0),), trace_days=2, seed=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    bm = BatchModel()
    bm.prefill(likely_keys(["pixel3"], CFG.model, CFG.policies), jobs=1, progress=False)
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


def test_a_fleet_stopped_midway_keeps_what_it_simulated_in_its_memo(tmp_path, monkeypatch):
    """The merged memo is written after rounds that grew it, so a run stopped midway resumes
    warm; and the resumed run's rounds are those of a run never stopped."""
    from swansim.federated import local
    from swansim.federated.rounds import PolicyRun

    monkeypatch.setattr(local, "MEMO_SAVE_S", 0.0)
    cfg = CFG.__class__(**{**CFG.__dict__, "policies": ("pytorch-default",), "rounds": 3})
    real, calls = PolicyRun.play_round, []

    def stopped_in_round_3(self):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(PolicyRun, "play_round", stopped_in_round_3)
    with pytest.raises(KeyboardInterrupt):
        local.run_policy_fleet(cfg, tmp_path / "cut", jobs=1, progress=False)
    prefilled = len(likely_keys(["pixel3"], cfg.model, cfg.policies))
    saved = BatchModel()
    assert saved.load(tmp_path / "cut" / "batch-memo.pkl") > prefilled   # what the two rounds simulated too
    monkeypatch.setattr(PolicyRun, "play_round", real)
    local.run_policy_fleet(cfg, tmp_path / "cut", jobs=1, progress=False)
    local.run_policy_fleet(cfg, tmp_path / "whole", jobs=1, progress=False)
    assert (tmp_path / "cut" / "rounds.csv").read_bytes() == (tmp_path / "whole" / "rounds.csv").read_bytes()


def test_a_declined_request_says_why():
    from swansim.federated.local import PolicyCost
    from swansim.federated.rounds import LocalRequest

    pop = build_population(CFG)
    tl = pop.timeline(0, 0.0)
    t = next(float(t) for t in range(0, 2 * 86_400, 300) if tl.state_at(t).screen_on)
    req = LocalRequest(pop.client(0), 1, t, 2, 16, t + 600.0, tl.state_at(t), tl, None)
    out = PolicyCost(CFG.model, "swan", BatchModel()).train(req)
    assert not out.admitted and out.declined_why == "owner_active"


def _pixel3(charging: bool = False):
    from swansim.device import Device, DeviceConfig

    return Device(PIXEL3, DeviceConfig(charging=charging, initial_soc_pct=50.0))


def test_a_phone_arrives_as_warm_as_its_traced_charger_left_it():
    """Between requests the battery follows the owner's charger: cool when the charger has just
    been plugged in, at the charging steady state after an hour of it; a gap split in two
    (a request between, nothing trained) ends where the whole gap does."""
    from swansim.apps.traces import DeviceState, Trace
    from swansim.federated.local import settle
    from swansim.federated.population import Population

    hour = 3600.0
    rows = [(0.0, False, False, 50.0), (10 * hour, False, True, 50.0), (16 * hour, False, False, 90.0)]
    trace = Trace({"u0": ()}, {"u0": tuple(DeviceState("u0", t, s, c, b, "wifi") for t, s, c, b in rows)}, 86_400.0)
    tl = Population.build(1, 0, trace, devices=(("pixel3", 1.0),), shifts=1).timeline(0, 0.0)

    def battery_c(from_s, to_s, dev=None):
        dev = dev or _pixel3(charging=tl.state_at(to_s).charging)
        settle(dev, tl, from_s, to_s)
        return dev.battery_temp_c

    steady = _pixel3(charging=True)
    steady.platform.thermal.step(1e6, steady.platform.node_power_w)   # idle on the charger for ever
    idle, plugged_10min, plugged_2h = battery_c(-math.inf, 10 * hour), battery_c(-math.inf, 10 * hour + 600.0), \
        battery_c(-math.inf, 12 * hour)
    assert idle < 28.0 < plugged_10min < plugged_2h
    assert plugged_2h == pytest.approx(steady.battery_temp_c, abs=0.01) and plugged_2h > 35.0
    split = _pixel3(charging=True)
    settle(split, tl, -math.inf, 9 * hour)
    assert battery_c(9 * hour, 12 * hour, split) == pytest.approx(plugged_2h, abs=0.01)


@pytest.mark.parametrize("gap_h", [0.5, 3.0, 30.0])
def test_settling_a_gap_in_one_piece_before_its_last_modes_moves_no_temperature(gap_h):
    """The far past of a gap is stepped in one piece (HISTORY_MODES): against every traced
    change stepped, no node differs by more than 0.01 C, whatever the gap."""
    from swansim.federated.local import settle

    pop = build_population(CFG)
    for client in range(0, 48, 7):
        tl = pop.timeline(client, 0.0)
        for start_h in (1.0, 7.5, 20.0):
            t0, t1 = start_h * 3600.0, (start_h + gap_h) * 3600.0
            cut, full = _pixel3(), _pixel3()
            for dev in (cut, full):
                dev.platform.thermal.step(5000.0, [0.5, 2.0, 0.3, 0.3, 1.0, 0.4])   # a warm phone at t0
            settle(cut, tl, t0, t1)
            settle(full, tl, t0, t1, history_modes=math.inf)
            assert max(abs(a - b) for a, b in zip(cut.platform.thermal.temp_c, full.platform.thermal.temp_c)) < 0.01


def test_a_checkpoint_of_another_run_fails_before_the_prefill(tmp_path, monkeypatch):
    """The policies' fleet simulates its likely batches first (a minute at the paper's scale): a
    checkpoint it could not resume from is refused before that, in one line naming the file."""
    from dataclasses import replace

    from swansim.errors import InputError
    from swansim.federated.local import run_policy_fleet

    cfg = CFG.__class__(**{**CFG.__dict__, "policies": ("pytorch-default",), "rounds": 1, "local_steps": 2})
    run_policy_fleet(cfg, tmp_path, jobs=1, progress=False)

    def no_prefill(*args, **kwargs):
        raise AssertionError("simulated before the checkpoint was checked")

    monkeypatch.setattr(BatchModel, "prefill", no_prefill)
    with pytest.raises(InputError, match="checkpoint of another run") as e:
        run_policy_fleet(replace(cfg, per_round=3), tmp_path, jobs=1, progress=False)
    assert e.value.where.endswith("pytorch-default.log")


def test_a_runtime_file_is_a_runtime_of_its_own(tmp_path, monkeypatch):
    """``runtime=`` a .toml file: the phones train with it (one figure changed moves the rounds),
    its memo is not another runtime's (the file's digest is in the memo's stamp) and a resume
    after the file was edited is refused before any simulation."""
    from dataclasses import replace

    from swansim.dnn.runtime import RUNTIME_DIR, runtime_digest
    from swansim.errors import InputError
    from swansim.federated.local import run_policy_fleet

    text = (RUNTIME_DIR / "pytorch.toml").read_text()
    variant = tmp_path / "wfi.toml"
    variant.write_text(text.replace("wake_latency_s = 0.0007\n", "wake_latency_s = 4.3e-05\n", 1))
    assert variant.read_text() != text
    cfg = replace(CFG, policies=("pytorch-default",), rounds=1, local_steps=2)
    shipped, _ = run_policy_fleet(cfg, tmp_path / "shipped", jobs=1, progress=False)
    ours, bm = run_policy_fleet(replace(cfg, runtime=str(variant)), tmp_path / "variant", jobs=1, progress=False)
    assert {k.runtime for k in bm._memo} == {str(variant)}
    assert (ours.rounds["round_s"] != shipped.rounds["round_s"]).all()
    memo = tmp_path / "variant" / "batch-memo.pkl"
    assert BatchModel().load(memo) == 0 and BatchModel().load(memo, runtime_digest(variant)) == len(bm)
    manifest = json.loads((tmp_path / "variant" / "manifest.json").read_text())
    assert "sha256:" + manifest["runtime_sha256"] == runtime_digest(variant)
    assert "runtime_sha256" not in json.loads((tmp_path / "shipped" / "manifest.json").read_text())

    def no_prefill(*args, **kwargs):
        raise AssertionError("simulated before the checkpoint was checked")

    variant.write_text(variant.read_text().replace("wake_latency_s = 4.3e-05\n", "wake_latency_s = 5e-05\n", 1))
    monkeypatch.setattr(BatchModel, "prefill", no_prefill)
    with pytest.raises(InputError, match="runtime file's content changed"):
        run_policy_fleet(replace(cfg, runtime=str(variant), rounds=2), tmp_path / "variant", jobs=1, progress=False)


def test_a_misspelt_task_is_named_as_the_model_not_as_missing_local_steps(tmp_path):
    """The generic fleet asks a model outside the paper's tasks for its local steps; the policies'
    fleet trains only those tasks, so a typo in the model is reported as one, before any work."""
    from dataclasses import replace

    from swansim.errors import InputError
    from swansim.federated.local import run_policy_fleet

    with pytest.raises(InputError) as e:
        run_policy_fleet(replace(CFG, model="resnet43", local_steps=None), tmp_path / "x", jobs=1, progress=False)
    assert e.value.field == "model" and "resnet43" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "x").exists()


def test_a_fleet_simulates_ahead_only_what_its_policies_run():
    """The prefill follows the policies: the default's one choice, Swan's pinned choice space,
    a baseline's placement; two policies that run the same batches share their keys."""
    from swansim.dnn.choices import enumerate_choices, pytorch_default
    from swansim.hw.profile import Catalogue

    soc = Catalogue.load().device("pixel3").soc
    pinned = [c for c in enumerate_choices(soc, mixed=True) if c.kind != "mixed"]
    default = likely_keys(["pixel3"], "resnet34", ("pytorch-default",))
    assert [(k.plan, k.warmup, k.placement) for k in default] == [(pytorch_default(soc), 0, "auto"),
                                                                   (pytorch_default(soc), 1, "auto")]
    assert likely_keys(["pixel3"], "resnet34", ("pytorch-default", "idle-charging-only")) == default
    swan = likely_keys(["pixel3"], "resnet34", ("swan",))
    assert {k.plan for k in swan} == set(pinned) and len(swan) == 2 * len(pinned)
    assert {k.placement for k in likely_keys(["pixel3"], "resnet34", ("eas",))} == {"eas"}
    both = likely_keys(["pixel3", "galaxy-s10e"], "resnet34", ("swan", "pytorch-default"))
    assert both[:len(swan) + len(default)] == swan + default
    assert {k.device for k in both[len(swan) + len(default):]} == {"galaxy-s10e"}
