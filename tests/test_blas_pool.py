"""The runtime's BLAS pool (OpenBLAS's pthreads server beside PyTorch's OpenMP team): its size,
its equal shares, its spinning workers; and nothing at all where no GEMM reaches it."""
import pytest

from swansim.batchmodel import BatchKey, simulate_batch
from swansim.dnn.choices import parse_choice, pytorch_default
from swansim.dnn.regions import gemm_mnk
from swansim.dnn.runtime import with_blas
from swansim.dnn.tasks import build_task

from conftest import PIXEL3, PYTORCH, train_on

RT = PYTORCH
ON = with_blas(RT, enabled=True)


def job_on(choice, runtime=ON, group="top_app", batches=1, model="resnet34"):
    return train_on(choice, runtime, group, batches, model)


def test_the_committed_runtime_runs_the_pool_it_was_fitted_with():
    assert RT.blas is not None and RT.blas.enabled is True
    assert RT.blas.mt_threshold_mnk == 262144 and RT.blas.max_threads == 8


def test_a_pool_that_no_gemm_reaches_changes_nothing():
    key = BatchKey("pixel3", "resnet34", pytorch_default(PIXEL3.soc), batches=1, warmup=0)
    never = with_blas(RT, enabled=True, mt_threshold_mnk=1e12)
    off = with_blas(RT, enabled=False)
    assert simulate_batch(key, runtime=never, record_layers=False) == simulate_batch(key, runtime=off,
                                                                                    record_layers=False)


@pytest.mark.parametrize("choice, group, pool, size", [
    ("default", "top_app", "choice", 8),       # every CPU of the cpuset, the caller included
    ("default", "foreground", "choice", 6),    # the Pixel 3's foreground cpuset is 0-3,6-7
    ("45", "top_app", "choice", 2),            # a pinned choice's cores
    ("45", "top_app", "process", 8),           # a pool started before the pinning
])
def test_the_pool_holds_a_thread_per_cpu_the_process_may_use(choice, group, pool, size):
    c = pytorch_default(PIXEL3.soc) if choice == "default" else parse_choice(choice, PIXEL3.soc)
    _, job = job_on(c, with_blas(RT, enabled=True, pinned_pool=pool), group)
    assert len(job.blas_pool) + 1 == size
    allowed = set(PIXEL3.cpuset(group)) if (choice == "default" or pool == "process") else set(c.cpus)
    assert all(set(th.affinity) == allowed for th in job.blas_pool)


def test_a_large_gemm_is_split_equally_over_the_pool_and_a_small_one_stays_on_the_caller():
    _, job = job_on(parse_choice("4567", PIXEL3.soc))
    rows = job.thread_frame()
    layers = build_task("resnet34").layers
    for (layer, phase), g in rows.groupby(["layer", "phase"]):
        big = gemm_mnk(layers[layer]) > ON.blas.mt_threshold_mnk
        on_pool = (g["thread"] < 0).any()
        if layers[layer].op in ("conv", "pointwise", "linear") and big and phase != "update":
            assert on_pool and set(g["thread"]) == {0, -1, -2, -3}, (layer, phase)
            assert g["units"].nunique() == 1      # equal shares
        else:
            assert not on_pool, (layer, phase)


def test_spinning_workers_hold_their_cores_and_cost_energy():
    """The same batch with workers that sleep at once and with ones that poll 0.109 s: the
    polling ones keep cores busy between GEMMs (busy time and energy up)."""
    c = parse_choice("0123", PIXEL3.soc)
    runs = {}
    for spin in (0.0, 0.109):
        dev, job = job_on(c, with_blas(RT, enabled=True, spin_s=spin))
        runs[spin] = (sum(dev.sched.busy_s[:4]), dev.platform.total_energy_j, dev.env.now)
    (busy0, e0, t0), (busy1, e1, t1) = runs[0.0], runs[0.109]
    assert busy1 / t1 > busy0 / t0 and e1 / t1 > e0 / t0


def _per_call_closed_form_s(choice) -> float:
    """What `[blas] per_call` adds to a ResNet-34 batch on a pinned choice of one cluster at its
    top clock: per region on the pool, the lock's turns (a futex wake and a wake-up each) when
    the team calls at once, and a fork and join (two line latencies a worker) per call."""
    from swansim.dnn.regions import SocView, phase_regions
    view, model = SocView.of(PIXEL3.soc, RT), build_task("resnet34")
    cl = PIXEL3.soc.cluster_of(choice.cpus[0])
    fam, f_hz, n = view.fam(PIXEL3.soc.clusters.index(cl)), cl.fmax_mhz * 1e6, len(choice.cpus)
    total = 0.0
    for i in range(len(model.layers)):
        for phase in ("fwd", "bwd_input", "bwd_weight"):
            for r in phase_regions(view, model, i, phase, choice):
                if r.gemm_mnk > RT.blas.mt_threshold_mnk and r.repeat == 1:
                    turns = r.gemm_calls - 1 if min(len(r.team), r.gemm_calls) > 1 else 0
                    total += turns * (fam.wake_latency_s + RT.futex_wake_instructions / cl.scalar_ipc / f_hz)
                    total += r.gemm_calls * 2 * (n - 1) * fam.line_latency_cycles / f_hz
    return total


@pytest.mark.parametrize("label", ["4", "4567", "0123"])
def test_per_call_costs_add_the_locks_turns_and_the_pools_forks(label):
    """A batch with `per_call` is slower than without it by the closed form (a single thread has
    no pool and pays nothing); the serial weight-gradient loop calls alone and takes no turns."""
    c = parse_choice(label, PIXEL3.soc)
    (d0, j0), (d1, j1) = (job_on(c, with_blas(RT, per_call=on)) for on in (False, True))
    expected = _per_call_closed_form_s(c)
    assert (expected == 0.0) == (len(c.cpus) == 1)
    assert d1.env.now - d0.env.now == pytest.approx(expected, rel=0.02, abs=1e-9)
    assert d1.platform.total_energy_j >= d0.platform.total_energy_j


def test_a_per_sample_gemm_region_makes_a_call_per_sample():
    from swansim.dnn.regions import SocView, phase_regions
    view, model = SocView.of(PIXEL3.soc, RT), build_task("resnet34")
    c = parse_choice("4567", PIXEL3.soc)
    calls = {model.layers[i].op: r.gemm_calls for i in range(len(model.layers))
             for r in phase_regions(view, model, i, "fwd", c) if r.gemm_mnk > 0}
    assert calls == {"conv": model.batch, "pointwise": model.batch, "linear": 1}


# -- where the pools' threads run (swansim.runs.placement, experiments/where_threads_run.py) ----

def test_where_a_pinned_choices_threads_run_is_its_cores_and_no_more_threads_than_it_has():
    """ResNet-34 on 4567: the master and every worker of both pools only on the big cores; a
    role never more threads runnable than it has; the op classes' times add up to the batch."""
    from swansim.runs.placement import batch_placement

    p = batch_placement(BatchKey("pixel3", "resnet34", parse_choice("4567", PIXEL3.soc)))
    assert {(r["cluster"], r["cores"]) for r in p.threads if r["cores"]} == {("big", "4567"), ("big", "4"),
                                                                            ("big", "567")}
    per_role = {}
    for r in p.threads:
        per_role[r["role"]] = per_role.get(r["role"], 0.0) + r["busy"] + r["spinning"]
    assert per_role["master"] <= 1.0 + 1e-9 and per_role["openmp"] <= 3.0 + 1e-9 and per_role["blas"] <= 3.0 + 1e-9
    assert sum(o["s"] for o in p.ops) == pytest.approx(p.cost.latency_s, rel=0.01)


def test_openblas_workers_of_the_default_never_sleep_between_resnet34s_gemms():
    """The default's pool holds a worker on each of the other seven CPUs; spinning 0.109 s after
    each GEMM, far longer than ResNet-34's gaps between them, they stay runnable all batch long:
    seven threads, busy or spinning, the whole time - the cores the OpenMP team cannot have."""
    from swansim.runs.placement import batch_placement

    p = batch_placement(BatchKey("pixel3", "resnet34", pytorch_default(PIXEL3.soc)))
    blas = [r for r in p.threads if r["role"] == "blas"]
    assert sum(r["busy"] + r["spinning"] for r in blas) == pytest.approx(7.0, rel=1e-3)
    assert sum(r["spinning"] for r in blas) > sum(r["busy"] for r in blas)
