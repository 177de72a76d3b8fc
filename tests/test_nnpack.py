"""PyTorch v1.8.1's NNPACK path for a batch of 16 (the pytorch profile's [nnpack], off until the
runtime is refitted with it): forward convolutions on NNPACK's own pthreadpool, sized at the
job's first call, whose workers poll before they sleep; their backward serial on the master."""
from swansim.dnn.choices import Plan, parse_choice
from swansim.dnn.runtime import with_nnpack
from swansim.dnn.tasks import build_task

from conftest import PIXEL3, PYTORCH, train_on

ON = with_nnpack(PYTORCH, enabled=True)
CONVS = ("conv", "pointwise", "depthwise")


def run(plan, runtime=ON, batch=None):
    return train_on(plan, runtime, batch=batch)


def test_the_committed_runtime_leaves_nnpack_off_until_refitted():
    assert PYTORCH.nnpack is not None and PYTORCH.nnpack.enabled is False
    assert PYTORCH.nnpack.min_batch == 16 and PYTORCH.nnpack.spin_iterations == 1e6


def test_forward_convolutions_run_on_nnpacks_pool_and_their_backward_on_the_master():
    _, job = run(parse_choice("4567", PIXEL3.soc))
    rows = job.thread_frame()
    conv = rows[rows["op"].isin(CONVS)]
    fwd, bwd = conv[conv["phase"] == "fwd"], conv[conv["phase"] != "fwd"]
    nnp = job.NNP_THREAD_ID
    assert set(fwd["thread"]) == {0, nnp + 1, nnp + 2, nnp + 3}
    assert len(job.nnp_pool) == 3
    # the backward is a serial loop over the batch: the master, and the BLAS pool for big GEMMs
    assert set(bwd["thread"]) <= {0, -1, -2, -3} and 0 in set(bwd["thread"])
    # the OpenMP team still runs the other ops
    other = rows[~rows["op"].isin(CONVS)]
    assert {1, 2, 3} <= set(other["thread"])


def test_nnpacks_workers_hold_their_cores_while_they_poll():
    """The same batch with NNPACK's workers polling 1M times or not at all: polling keeps them
    busy (CPU time) between calls."""
    cpu = {}
    for polls in (0.0, 1e6):
        _, job = run(parse_choice("4567", PIXEL3.soc), with_nnpack(ON, spin_iterations=polls))
        cpu[polls] = sum(t.cpu_time_s for t in job.nnp_pool)
    assert cpu[1e6] > cpu[0.0] > 0.0


def test_a_batch_below_nnpacks_minimum_never_takes_it():
    choice = parse_choice("4567", PIXEL3.soc)
    dev_on, job_on = run(choice, batch=8)
    dev_off, _ = run(choice, runtime=PYTORCH, batch=8)
    assert job_on.nnp_pool == []
    assert dev_on.env.now == dev_off.env.now
    assert dev_on.platform.total_energy_j == dev_off.platform.total_energy_j


def test_the_pool_keeps_the_size_of_the_first_call():
    """A plan whose first layer runs on two threads and the rest on four: the pool is created
    with one worker and every later forward convolution is split over the master and it."""
    two, four = parse_choice("45", PIXEL3.soc), parse_choice("4567", PIXEL3.soc)
    n = len(build_task("resnet34").layers)
    plan = Plan((two,) + (four,) * (n - 1), (four,) * n, four)
    _, job = run(plan)
    rows = job.thread_frame()
    fwd = rows[rows["op"].isin(CONVS) & (rows["phase"] == "fwd")]
    assert len(job.nnp_pool) == 1
    assert set(fwd["thread"]) == {0, job.NNP_THREAD_ID + 1}
    # equal shares of each call
    per_call = fwd.groupby(["layer", "fork_s"])["units"]
    assert (per_call.max() - per_call.min()).abs().max() < 1e-6 * per_call.max().max()
