"""The training workload: choices, runtime profiles, cost model, the job, and the paper's landscape.

The "must show" of issue #4: on the Pixel 3 with the PyTorch runtime, the best choice depends
on the model (ResNet-34: all big cores fastest, one big core least energy; ShuffleNetV2: one
big core fastest of every prefix choice and least energy of every choice, four little cores
slowest of the prefix choices), little-core choices draw less power without using less energy,
and a mixed big+little team is slower than its big subset because the little-core threads
finish last (read off the recorded per-thread finish times). The calibration's fitted values
stay inside their stated plausible bounds and still give the committed fit's objective.
"""
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swansim.batchmodel import BatchKey, simulate_batch
from swansim.dnn.choices import enumerate_choices, parse_choice, pytorch_default
from swansim.dnn import calibrate as cal
from swansim.kernel.sched import SCHED_LATENCY_S
from swansim.dnn.runtime import with_blas, RUNTIME_DIR, get_path, load_runtime
from swansim.errors import InputError
from swansim.dnn.tasks import build_task
from swansim.runs.calibration import Fig2, Ncnn
from swansim.device import Device
from swansim.dnn.training import TrainingJob
from swansim.runs.landscape import landscape_frame

from conftest import CAT

PIXEL3 = CAT.device("pixel3").soc
PYTORCH = load_runtime("pytorch")
RESNET = "resnet34"
SHUFFLE = "shufflenet_v2_x2_0"
PAPER = ("0", "01", "012", "0123", "4", "45", "456", "4567")
MIXED = tuple(c.label for c in enumerate_choices(PIXEL3) if c.kind == "mixed")


def sim(model, label, batches=1, **kw):
    """(latency s, energy above idle J) of one batch of ``model`` (a task name) on ``label``."""
    c = simulate_batch(BatchKey("pixel3", model, parse_choice(label, PIXEL3), batches=batches, **kw),
                       record_layers=False)
    return c.latency_s, c.net_energy_j


@pytest.fixture(scope="module")
def resnet_landscape():
    return {c: sim(RESNET, c)[:2] for c in PAPER}


@pytest.fixture(scope="module")
def shuffle_landscape():
    return {c: sim(SHUFFLE, c)[:2] for c in PAPER + MIXED}


# -- choices ---------------------------------------------------------------------------------


def test_pixel3_choices_are_the_papers_in_cost_order():
    choices = enumerate_choices(PIXEL3, mixed=False)
    assert [c.label for c in choices] == list(PAPER)
    mixed = [c for c in enumerate_choices(PIXEL3) if c.kind == "mixed"]
    assert {c.label for c in mixed} >= {"04567", "01234567"}


def test_prime_socs_add_prime_and_prime_plus_big_prefixes():
    labels = [c.label for c in enumerate_choices(CAT.socs["sm8250"], mixed=False)]
    assert {"7", "47", "457", "4567"} <= set(labels)
    # little < big < prime in cost; more cores of a type cost more
    assert labels.index("0123") < labels.index("4") < labels.index("456") < labels.index("7") < labels.index("4567")
    assert pytorch_default(PIXEL3).threads == 4 and not pytorch_default(PIXEL3).pinned


# -- runtime profiles ------------------------------------------------------------------------


def test_every_runtime_number_has_a_provenance(tmp_path: Path):
    for name in ("pytorch", "ncnn"):
        load_runtime(name)
    text = (RUNTIME_DIR / "pytorch.toml").read_text()
    broken = tmp_path / "broken.toml"
    broken.write_text(text.replace('grain_elements = "source:', 'not_grain = "source:', 1))
    with pytest.raises(InputError) as err:
        load_runtime(broken)
    assert "broken.toml" in str(err.value) and "grain_elements" in str(err.value)
    with pytest.raises(InputError):
        load_runtime("no-such-runtime")


@pytest.mark.parametrize("old, new, field", [
    ('\nops = ["conv", "pointwise", "depthwise"]', '\nops = ["conv", "winograd"]', "nnpack.ops"),
    ("min_batch = 16", "min_batch = 16.5", "nnpack.min_batch"),
    ("[nnpack]\nenabled = false", '[nnpack]\nenabled = "no"', "nnpack.enabled"),
    ('spin_iterations = "source: pthreadpool', 'spin_polls = "source: pthreadpool', "spin_iterations"),
])
def test_a_bad_nnpack_table_is_one_error_naming_the_file_and_field(tmp_path: Path, old, new, field):
    text = (RUNTIME_DIR / "pytorch.toml").read_text()
    assert old in text
    broken = tmp_path / "broken.toml"
    broken.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as err:
        load_runtime(broken)
    assert "broken.toml" in str(err.value) and field in str(err.value)


def test_core_families_split_a7x_from_a76_and_later():
    for name in ("pytorch", "ncnn"):
        rt = load_runtime(name)
        assert rt.family_of("cortex-a55") == "inorder"
        assert rt.family_of("cortex-a73") == rt.family_of("cortex-a75") == "ooo"
        assert {rt.family_of(u) for u in ("cortex-a76", "cortex-a77", "cortex-x1", "cortex-a715+cortex-a710")} == {"ooo-wide"}


def test_fitted_values_stay_inside_their_stated_bounds(tmp_path: Path):
    for name in ("pytorch", "ncnn"):
        rt = load_runtime(name)
        assert rt.fit_params, f"{name}: no [[fit.param]] tables"
        for p in rt.fit_params:
            assert p.lo <= p.prior <= p.hi and p.source
            for t in p.targets:
                assert p.lo * (1 - 1e-9) <= get_path(rt, t) <= p.hi * (1 + 1e-9), (name, p.name, t)
    text = (RUNTIME_DIR / "pytorch.toml").read_text()
    broken = tmp_path / "broken.toml"
    broken.write_text(text.replace("spin_iterations = ", "spin_iterations = 1e9 #", 1))
    with pytest.raises(InputError, match="spin_iterations.*bounds"):
        load_runtime(broken)


def test_calibration_data_are_the_projects_own():
    assert len(cal.read_fig1()) == 8
    figs = cal.read_fig2()
    assert figs["shufflenet_v2_x2_0"]["latency"] == {"4": 0.03, "4567": 0.06, "0": 0.11, "0123": 1.0}
    assert len(cal.read_ncnn(CAT)) == 48
    for f in (cal.FIG1_CSV, cal.FIG2_CSV, cal.NCNN_CSV):
        assert cal.DATA_DIR in f.parents and "../" not in f.read_text()


def test_committed_ncnn_fit_is_what_the_code_and_data_give():
    """The [fit] record is the objective at the committed values: re-run the calibration
    (experiments/calibrate_runtime.py, which starts from the priors) after changing the cost
    model or the data."""
    rt = load_runtime("ncnn")
    got = cal.current_objective(rt, Ncnn(CAT, cal.read_ncnn(CAT)).residuals)
    assert got == pytest.approx(rt.fit_info["objective"], rel=1e-6)


def test_committed_pytorch_fit_is_what_the_code_and_data_give():
    rt = load_runtime("pytorch")
    got = cal.current_objective(rt, Fig2(CAT).residuals)
    assert got == pytest.approx(rt.fit_info["objective"], rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 16), rng=st.integers(1, 64),
       speeds=st.lists(st.floats(0.1, 4.0), min_size=16, max_size=16))
def test_static_chunks_are_equal_and_dynamic_ones_follow_speed(n, rng, speeds):
    from swansim.dnn.regions import _shares
    static = _shares(n, rng, speeds, "static")
    dynamic = _shares(n, rng, speeds, "dynamic")
    workers = min(n, rng)
    for shares in (static, dynamic):
        assert len(shares) == n and sum(shares) == pytest.approx(1.0)
        assert all(s == 0.0 for s in shares[workers:])
    assert max(static) == pytest.approx(math.ceil(rng / workers) / rng)   # OpenMP static: equal chunks
    for s, v in zip(dynamic[:workers], speeds[:workers]):
        assert s == pytest.approx(v / sum(speeds[:workers]))


def test_a_sustained_fig2_measurement_is_the_cold_one_on_a_cool_core_and_throttling_only_slows():
    """The sustained protocol (minutes of training, the phone heating and throttling) against
    the calibration's cold batch: one little core stays cool, so both measure the same batch;
    all four big cores heat the phone until it caps them, so they run slower and draw less."""
    from swansim.runs.calibration import sustained_fig2_metrics

    hot = sustained_fig2_metrics(CAT, "resnet34", ["0", "4567"], minutes=6.0)
    cold = {label: simulate_batch(BatchKey("pixel3", "resnet34", parse_choice(label, PIXEL3)), record_layers=False)
            for label in ("0", "4567")}
    assert hot["latency"]["0"] == pytest.approx(cold["0"].latency_s, rel=0.01)
    assert hot["energy"]["0"] == pytest.approx(cold["0"].net_energy_j, rel=0.05)
    assert hot["latency"]["4567"] > 1.05 * cold["4567"].latency_s
    assert hot["power"]["4567"] < cold["4567"].net_energy_j / cold["4567"].latency_s


def test_ncnn_team_over_big_and_little_cores_is_paced_by_the_little_ones():
    """ncnn's layer loops take OpenMP's static schedule (its profile's source): eight threads on a
    4+4 Pixel 3 give every little core a big core's share, so they trail four threads on the big
    cores alone."""
    def ms(label):
        key = BatchKey("pixel3", "resnet18", parse_choice(label, PIXEL3), runtime="ncnn",
                       governor="performance", mode="infer", batch=1)
        return simulate_batch(key, record_layers=False).latency_s
    assert load_runtime("ncnn").partition == "static"
    assert ms("01234567") > 1.2 * ms("4567")


def test_inference_only_runtime_refuses_training():
    with pytest.raises(InputError, match="bwd"):
        simulate_batch(BatchKey("pixel3", "resnet18", parse_choice("4", PIXEL3), runtime="ncnn", batch=1))


# -- the paper's landscape (full simulation: scheduler, schedutil, thermal) ------------------


def test_resnet34_all_big_fastest_one_big_least_energy(resnet_landscape):
    lat = {c: v[0] for c, v in resnet_landscape.items()}
    energy = {c: v[1] for c, v in resnet_landscape.items()}
    assert min(lat, key=lat.get) == "4567"
    assert min(energy, key=energy.get) == "4"


def test_little_choices_draw_less_power_but_use_no_less_energy(resnet_landscape):
    power = {c: e / t for c, (t, e) in resnet_landscape.items()}
    for little in ("0", "0123"):
        assert power[little] < power["4"]
        assert resnet_landscape[little][1] >= resnet_landscape["4"][1]


def test_shufflenet_one_big_core_best_four_little_worst(shuffle_landscape):
    lat = {c: v[0] for c, v in shuffle_landscape.items()}
    energy = {c: v[1] for c, v in shuffle_landscape.items()}
    prefix = {c: lat[c] for c in PAPER}
    assert min(prefix, key=prefix.get) == "4"
    assert all(lat["4"] < lat[c] for c in PAPER if c != "4")  # strictly
    assert min(energy, key=energy.get) == "4"                  # of every choice, mixed included
    assert max(prefix, key=prefix.get) == "0123"
    assert lat["0123"] > lat["0"]  # more cores, slower


def test_mixed_team_straggles_on_its_little_core():
    """The OpenMP team pinned one thread per core, static chunks: a region over big and little
    cores ends when the little cores' chunks do. (Without the BLAS pool: OpenBLAS's workers are
    not pinned, the kernel places them, and their spinning shares the team's cores.)"""
    big_lat, _ = sim(RESNET, "4567")
    mixed_lat, _ = sim(RESNET, "01234567")
    assert mixed_lat > big_lat
    dev = Device(CAT.device("pixel3"))
    job = TrainingJob(dev.env, dev.sched, PIXEL3, build_task(RESNET), with_blas(PYTORCH, enabled=False),
                      parse_choice("01234567", PIXEL3), n_batches=2)
    dev.env.run(until=job.process)
    th = job.thread_frame()
    th = th[(th["batch"] == th["batch"].max()) & (th["units"] > 0)
            & th["phase"].isin(["fwd", "bwd_input"]) & th["op"].isin(["conv", "pointwise"])]
    last = th.loc[th.groupby(["layer", "phase"])["finish_s"].idxmax()]
    assert (last["cluster"] == "little").mean() > 0.5


# -- properties ------------------------------------------------------------------------------


def test_same_config_same_latency():
    a = sim(SHUFFLE, "456")[0]
    b = sim(SHUFFLE, "456")[0]
    assert a == b


def _at(label, model="resnet18", governor="performance", caps=None, **kw):
    return simulate_batch(BatchKey("pixel3", model, parse_choice(label, PIXEL3), governor=governor,
                                   caps_mhz=caps, num_classes=35, **kw), record_layers=False)


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(PAPER + ("04567",)), st.integers(4, 16), st.sampled_from([(1, 32, 32), (3, 32, 32)]))
def test_more_flops_never_less_time(label, batch, shape):
    """A bigger batch is never faster - for a team, by more than one CFS period: its threads
    share cores with OpenBLAS's spinning workers, and where a barrier falls in their turns
    moves with the work (04567 at batch 8 was 11 ms faster than at batch 4, in 2.2 s)."""
    small = _at(label, batch=batch, input_shape=shape)
    big = _at(label, batch=batch + 4, input_shape=shape)
    slack = SCHED_LATENCY_S if len(label) > 1 else 0.0
    assert big.latency_s >= small.latency_s - slack


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(("0", "4")), st.floats(0.3, 1.0))
def test_lower_frequency_never_faster(label, scale):
    """A lower cap never makes a one-thread batch faster (performance governor: the cap is the
    clock). Not an invariant of teams: a waiting thread spins for a number of polls, so at a
    lower clock it spins longer, sleeps less and skips wake-ups (a 4567 team at 0.625 x f_max
    is 3% faster on a tiny ResNet-34 batch)."""
    top = tuple(c.fmax_mhz for c in PIXEL3.clusters)
    fast = _at(label, batch=4, input_shape=(1, 32, 32), caps=top)
    slow = _at(label, batch=4, input_shape=(1, 32, 32), caps=tuple(f * scale for f in top))
    assert slow.latency_s >= fast.latency_s * (1 - 1e-12)


def test_frequency_cap_slows_the_simulated_job():
    top = tuple(c.fmax_mhz for c in PIXEL3.clusters)
    capped = tuple(c.opp_freq_mhz[len(c.opp_freq_mhz) // 2] for c in PIXEL3.clusters)
    fast = sim(RESNET, "4", governor="performance", caps_mhz=top)[0]
    slow = sim(RESNET, "4", governor="performance", caps_mhz=capped)[0]
    assert slow > fast * 1.2


def test_landscape_rows_are_the_batch_model():
    """One truth: a landscape row is `simulate_batch` of that choice (what calibration fits)."""
    df = landscape_frame("pixel3", "resnet34", batches=1)
    row = df.set_index("choice").loc["4"]
    cost = simulate_batch(BatchKey("pixel3", "resnet34", parse_choice("4", PIXEL3)), record_layers=False)
    assert row["latency_s"] == cost.latency_s and row["energy_j"] == cost.net_energy_j
    assert list(df["choice"][:8]) == list(PAPER)
    assert df.iloc[-1]["kind"] == "default" and (df["kind"] == "mixed").sum() == 3
    assert (df["latency_s"] > 0).all() and (df["energy_j"] > 0).all()
