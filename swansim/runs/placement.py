"""Where an execution choice's threads run during a batch, and what the batch's time goes to.

A diagnostic of a landscape row: the same simulation (`batchmodel.simulate_batch`), with the
scheduler probe `session.probes.CpuOccupancy` attached from outside. Over the measured batches,
per role of thread - the master (the Python thread: OpenMP's master and OpenBLAS's caller),
the OpenMP workers, OpenBLAS's pool workers, NNPACK's pool workers, a foreground app's threads -
and per cluster: how many of them were on its cores on average (runnable there: running or
waiting for their turn), spinning or not, and on which cores. And per op class, the share of
the batch its layer phases took.

It answers questions a latency alone cannot, e.g. why PyTorch's default is slow where it is:
which cores its team ends up on once OpenBLAS's spinning workers hold the others.

`start_state_latency_s`: the same team's batch when other work held the big cores as its job
began (or until just before), against a job started on an idle phone. Where the team's
placement depends on that history, a batch has no cost of its own; the batch model assumes it
does (tests/test_batchmodel.py checks the assumption).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from swansim.batchmodel import BatchCost, BatchKey, key_phone, simulate_batch, start_foreground
from swansim.dnn.runtime import Runtime, load_runtime
from swansim.dnn.tasks import build_task
from swansim.dnn.training import TrainingJob
from swansim.hw.profile import Catalogue
from swansim.session.probes import CpuOccupancy
from swansim.session.workloads import SustainedGemm

ROLES = ("master", "openmp", "blas", "nnpack", "app")
# a core counts as one a role uses when the role's threads sit on it this share of the time
CORE_SHARE = 0.01


@dataclass(frozen=True)
class BatchPlacement:
    """One batch's cost, where its threads ran (``threads``: role, cluster, ``busy`` and
    ``spinning`` as mean threads runnable on that cluster's cores, the cores used) and its time
    by op class (``ops``: op - the update phase is the optimizer's - seconds per batch, share of
    the latency, whether the runtime's cost model takes it at GEMM peak)."""

    cost: BatchCost
    threads: list[dict]
    ops: list[dict]


def batch_placement(key: BatchKey, runtime: Runtime | None = None) -> BatchPlacement:
    """``key``'s batch as `simulate_batch` runs it (the memo's numbers), with where its
    threads ran over the measured batches (module doc)."""
    spec = Catalogue.load().device(key.device)
    seen: dict = {}

    def attach(dev, job) -> None:
        seen.update(dev=dev, job=job, occupancy=CpuOccupancy(dev))

    cost = simulate_batch(key, runtime=runtime, spec=spec, record_layers=True, attach=attach)
    dev, job, occ = seen["dev"], seen["job"], seen["occupancy"]
    occ.close()
    t1 = dev.env.now                      # the job ends with its last measured batch
    t0 = t1 - cost.latency_s * key.batches
    role = {th.tid: "openmp" for th in job.pool[1:]}
    role.update({th.tid: "blas" for th in job.blas_pool})
    role.update({th.tid: "nnpack" for th in job.nnp_pool})
    if job.pool:
        role[job.pool[0].tid] = "master"
    names = {th.name: th.tid for th in dev.sched.threads}
    cluster = [spec.soc.cluster_of(c).name for c in range(spec.soc.n_cpus)]
    span = t1 - t0
    acc: dict = defaultdict(lambda: [0.0, 0.0, defaultdict(float)])
    for cpu, name, _group, spinning, start, end in occ.rows:
        dt = min(end, t1) - max(start, t0)
        if dt <= 0:
            continue
        r = role.get(names[name], "app")
        a = acc[(r, cluster[cpu])]
        a[1 if spinning else 0] += dt / span
        a[2][cpu] += dt / span
    threads = [{"role": r, "cluster": k, "busy": a[0], "spinning": a[1],
                "cores": "".join(str(c) for c in sorted(a[2]) if a[2][c] >= CORE_SHARE)}
               for (r, k), a in sorted(acc.items(), key=lambda kv: (ROLES.index(kv[0][0]), kv[0][1]))]
    graph = build_task(key.model, key.batch, key.input_shape, key.num_classes, key.mode)
    rt = runtime or load_runtime(key.runtime)
    per_op: dict[str, float] = defaultdict(float)
    for layer, phase, s in cost.layer_s:
        per_op["optimizer" if phase == "update" else graph.layers[layer].op] += s   # SGD's step per parameter tensor
    ops = [{"op": op, "s": s, "share": s / cost.latency_s, "gemm": rt.ops[op].peak == "gemm" if op in rt.ops else False}
           for op, s in sorted(per_op.items(), key=lambda kv: -kv[1])]
    return BatchPlacement(cost, threads, ops)


def start_state_latency_s(key: BatchKey, loaded_s: float = 0.0, start_s: float = 0.0) -> float:
    """``key``'s batch latency (the mean of its measured batches after its warm-up ones, as
    `batchmodel.simulate_batch` measures) for a job started at ``start_s`` on a phone as the
    batch model simulates one (`batchmodel.key_phone`, the key's caps from the outset) whose
    big cores run dense work for the first ``loaded_s`` (`SustainedGemm`): a job started while
    other work holds the big cores, or just after. A fast-forwarded job's batches are costed
    from a job started on an idle phone (`FastForward.run_process`), so a batch's cost must not
    depend on what the phone was doing when the job began (module doc): where that decides
    which cores its team settles on, it does."""
    dev = key_phone(key)
    if key.caps_mhz is not None:
        dev.set_caps(key.caps_mhz)
    if loaded_s > 0.0:
        SustainedGemm(dev, list(dev.spec.soc.big_cpus), loaded_s, 1e8)
    start_foreground(dev, key)
    if start_s > 0.0:
        dev.run(start_s)
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc,
                      build_task(key.model, key.batch, key.input_shape, key.num_classes, key.mode),
                      load_runtime(key.runtime), key.plan, mode=key.mode, n_batches=key.warmup + key.batches,
                      cpuset=dev.spec.cpuset(key.group), cgroup=key.group, record_layers=False)
    dev.env.run(until=job.process)
    return sum(row[3] for row in job.batch_rows[key.warmup:]) / key.batches
