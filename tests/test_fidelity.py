"""Fidelity off the Pixel 3: the phones' Android kernels as mechanisms (issue 10).

WALT windowed demand in closed form, the WALT/EAS wake-up placement (upmigration, boost,
hysteresis), core_ctl isolation, the profile fields that carry them, the shared vector unit of
A510 complexes, and the Fig. 3 validation points pinned at the values the code gives today.
"""
from __future__ import annotations

import functools
import re

import pytest
from hypothesis import given, settings, strategies as st

from swansim.device import Device, DeviceConfig
from swansim.dnn.runtime import load_runtime
from swansim.errors import InputError
from swansim.hw.profile import PROFILE_DIR, SWAN_PHONES, Catalogue, load_device
from swansim.kernel.walt import WaltDemand, WaltPlacement, WindowStats

W = 0.020   # WALT window of every profiled phone


@pytest.fixture(scope="module")
def cat():
    return Catalogue.load()


def _device(name: str, governor: str = "performance", placement: str = "auto") -> Device:
    return Device(Catalogue.load().device(name),
                  DeviceConfig(governor=governor, thermal_governor="off", frozen_temps=True, placement=placement))


def _speed(dev) -> list[float]:
    """Work units per cycle proportional to capacity-dmips-mhz: a unit of work is worth the same
    scaled time on every core, so a task's WALT demand does not depend on where it runs."""
    return [c.capacity_dmips_mhz / 1024.0 for c in dev.platform.clusters]


def _cluster(dev, cpu: int) -> str:
    return dev.spec.soc.cluster_of(cpu).name


def _trace(dev, thread) -> list[tuple[float, int]]:
    """(time, cpu) of ``thread`` after every replan that has it runnable."""
    out = []
    dev.sched.on_replan.append(lambda: out.append((dev.env.now, thread.cpu)) if thread.runnable else None)
    return out


def _hog(dev, name: str = "hog", **spawn):
    t = dev.sched.spawn(name, **spawn)
    dev.sched.run(t, 1e15, _speed(dev))
    return t


def _periodic(dev, t, busy_share_little: float, period_s: float = 0.010):
    """Each period: work that takes ``busy_share_little`` of it on a little core at its top
    clock (less on a bigger core), then sleep to the end of the period."""
    little = dev.spec.soc.little
    units = busy_share_little * period_s * little.fmax_mhz * 1e6 * little.capacity_dmips_mhz / 1024.0

    def loop():
        while True:
            t0 = dev.env.now
            yield dev.sched.run(t, units, _speed(dev))
            yield dev.env.timeout(max(0.0, t0 + period_s - dev.env.now))

    dev.env.process(loop())


# -- WALT demand --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.0, 1.0), cuts=st.lists(st.floats(0.0, 0.2), min_size=1, max_size=12))
def test_walt_demand_is_path_independent(rate, cuts):
    """Advancing in any pieces at a constant rate gives what one step gives (closed form)."""
    walt = WaltDemand(W, 5, 15)
    whole, pieces = walt.new(0.0), walt.new(0.0)
    end = 0.0
    for c in cuts:
        end += c
        walt.advance(pieces, end, rate)
    walt.advance(whole, end, rate)
    assert pieces.window == whole.window
    assert pieces.sum == pytest.approx(whole.sum, abs=1e-12)
    assert pieces.hist == pytest.approx(whole.hist, abs=1e-12)


def test_walt_demand_closed_form():
    walt = WaltDemand(W, 5, 15)
    d = walt.new(0.0)
    assert d.demand == pytest.approx(0.15)                 # a new task: 15% of a window
    walt.advance(d, W, 0.6)
    assert d.demand == pytest.approx(0.6)                  # max(last window, mean)
    walt.advance(d, 1.0, 0.0)                                   # asleep: empty windows dropped
    assert d.demand == pytest.approx(0.6)
    walt.advance(d, 1.0 + 10 * W, 0.1)                          # five windows at 0.1 replace all
    assert d.demand == pytest.approx(0.1)


# -- placement ----------------------------------------------------------------------------------


def test_walt_is_the_default_placement_where_the_profile_names_a_kernel(cat):
    assert isinstance(_device("galaxy-s10e").sched.placement, WaltPlacement)
    assert not isinstance(_device("pixel6").sched.placement, WaltPlacement)   # no [kernel] table
    wake = Device(cat.device("galaxy-s10e"), DeviceConfig(placement="wakeup"))
    assert not isinstance(wake.sched.placement, WaltPlacement)


def test_busy_thread_climbs_one_cluster_per_window():
    """A new task (15%) fits the little cluster; busy all the time there at the top clock its
    demand reaches the little capacity (> 95% of it) when its first window closes, and an idle
    gold CPU pulls it then - not before, not a window later; on gold the same holds one window
    later (its demand is the gold capacity) and the prime core pulls it."""
    dev = _device("galaxy-s10e")
    t = _hog(dev)
    trace = _trace(dev, t)
    dev.run(0.1)
    eps = 1e-9
    assert {_cluster(dev, c) for s, c in trace if s < W - eps} == {"little"}
    assert {_cluster(dev, c) for s, c in trace if W - eps <= s < 2 * W - eps} == {"big"}
    assert {_cluster(dev, c) for s, c in trace if s >= 2 * W - eps} == {"prime"}
    assert min(s for s, c in trace if _cluster(dev, c) == "big") == pytest.approx(W, abs=eps)
    assert min(s for s, c in trace if _cluster(dev, c) == "prime") == pytest.approx(2 * W, abs=eps)


@pytest.mark.parametrize("device,cgroup,where", [
    ("galaxy-s10e", "", "little"),          # root group: fits the little cluster
    ("galaxy-s10e", "top_app", "little"),   # stock Qualcomm top-app: boost 0
    ("pixel3", "", "little"),
    ("pixel3", "top_app", "big"),           # Pixel 3 top-app: schedtune.boost 10, prefer_idle
])
def test_half_busy_thread_stays_little_unless_boosted(device, cgroup, where):
    dev = _device(device)
    t = dev.sched.spawn("half", cgroup=cgroup)
    _periodic(dev, t, 0.5)
    trace = _trace(dev, t)
    dev.run(0.3)
    assert {_cluster(dev, c) for _, c in trace} == {where}
    assert dev.sched.placement.demand(t) == pytest.approx(0.5 * dev.sched.placement.rank_cap[0], rel=0.05)


def test_hysteresis_between_downmigrate_and_upmigrate(cat):
    """Demand between 85% and 95% of the little capacity: it fits the little cluster for a task
    already there (upmigrate margin) but not for one coming down from a bigger one
    (downmigrate margin), so the same task stays wherever it is."""
    dev = _device("galaxy-s10e")
    assert dev.spec.kernel.upmigrate_pct[0] == 95 and dev.spec.kernel.downmigrate_pct[0] == 85
    _hog(dev)
    dev.run(0.001)
    pl = dev.sched.placement
    cap = pl.rank_cap[0]
    for share in (0.86, 0.9, 0.94):
        assert pl.fits(share * cap, 0, 0) and not pl.fits(share * cap, 0, 1)
    assert not pl.fits(0.96 * cap, 0, 0) and pl.fits(0.84 * cap, 0, 1)
    # behaviour: the same periodic task (~90% of a little core) on two phones of one kind
    where = {}
    for start in ("all", "big first"):
        dev = _device("galaxy-s10e")
        big = dev.spec.soc.big_cpus
        t = dev.sched.spawn("band", affinity=big if start == "big first" else None)
        _periodic(dev, t, 0.90)
        dev.run(0.2)
        dev.sched.set_affinity(t, range(dev.platform.n_cpus))
        trace = _trace(dev, t)
        dev.run(0.6)
        where[start] = {_cluster(dev, c) for s, c in trace if s > 0.25}
    assert where["all"] == {"little"}
    assert where["big first"] <= {"big", "prime"}


def test_core_ctl_isolates_after_the_offline_delay_and_brings_cpus_back():
    """S10e (stock msmnile core_ctl): with nothing busy the gold cluster keeps min_cpus 2 and
    the prime core 0, isolated once the lower need has held for offline_delay_ms (100 ms); four
    busy unpinned tasks bring them back (task_thres 3 on gold, the gold overflow assists prime)."""
    dev = _device("galaxy-s10e")
    dev.sched.spawn("pinned")
    t0 = dev.sched.spawn("p0", affinity=(0,))
    dev.sched.run(t0, 1e15, _speed(dev))
    dev.run(0.099)
    pl = dev.sched.placement
    assert pl.isolated() == set()
    dev.run(0.101)
    assert pl.isolated() == {4, 7}
    # an unpinned task never lands on an isolated CPU
    hog = _hog(dev, "hog")
    trace = _trace(dev, hog)
    dev.run(0.15)
    assert not {c for _, c in trace} & {4, 7}
    # four unpinned hogs: gold needs all three, prime assists
    hogs = [hog] + [_hog(dev, f"hog{i}") for i in range(3)]
    dev.run(0.6)
    assert pl.isolated() == set()
    assert sorted(h.cpu for h in hogs) == [4, 5, 6, 7]


def test_an_idle_little_cpu_takes_a_big_task_that_shares_a_big_cpu():
    """Five busy tasks on the four gold CPUs (one shared) grow too big for the little cluster;
    then they may run anywhere, while little CPU 0 idles (CPUs 1-3 run pinned tasks). Newly idle
    balancing pulls first what fits the idle CPU and, finding nothing, pulls a big task anyway
    (msm-4.14 detach_tasks: retried without LBF_IGNORE_BIG_TASKS when it detached nothing), so
    CPU 0 runs one of them and no gold CPU is shared while it idles."""
    dev = _device("pixel3")
    for c in (1, 2, 3):
        _hog(dev, f"pinned{c}", affinity=(c,))
    big = dev.spec.soc.big_cpus
    hogs = [_hog(dev, f"big{i}", affinity=big) for i in range(5)]
    dev.run(0.2)
    for h in hogs:
        dev.sched.set_affinity(h, range(dev.platform.n_cpus))
    dev.run(0.3)
    pl = dev.sched.placement
    assert all(not pl.fits(pl.demand(h), 0, 0) for h in hogs)   # big tasks by now
    assert sorted(h.cpu for h in hogs) == [0, 4, 5, 6, 7]


@pytest.mark.parametrize("duty", [0.25, 1.0])
def test_core_ctl_counts_work_interleaved_with_sleep_at_its_duty(duty):
    """sched_avg.c averages nr_running over enqueues and dequeues, so a thread that sleeps
    three quarters of the time counts a quarter of a task: the S10e's prime CPU (task_thres 1,
    min_cpus 0, busy_up 60%) is isolated under it, and kept online under a thread always running."""
    dev = _device("galaxy-s10e")
    prime = dev.spec.soc.ranked_clusters[-1].cpus[0]
    t = dev.sched.spawn("sleepy", affinity=(prime,))
    k = dev.platform.cluster_of_cpu[prime]
    speed = _speed(dev)
    rate_cpu = dev.platform.freq_mhz[k] * 1e6 * speed[k]
    dev.sched.run(t, 1e15, speed, idle_s_per_unit=(1.0 / duty - 1.0) / rate_cpu)
    _periodic(dev, dev.sched.spawn("mover", affinity=(0, 1)), 0.2)   # unpinned: windows keep rolling
    dev.run(1.0)
    assert (prime in dev.sched.placement.isolated()) == (duty < 1.0)


@pytest.mark.parametrize("overutilized", [False, True])
def test_an_idle_gold_cpu_pulls_from_a_little_one_only_when_a_cpu_is_overutilized(overutilized):
    """Two light tasks waking together pack onto little CPU 0 (their only little CPU; the gold
    ones are idle). Below the tipping point the energy-aware balancer never pulls towards more
    capacity (msm-4.14 find_busiest_group), so they stay; once a CPU is over-utilized (a hog
    pinned to little CPU 1) it balances as usual and an idle gold CPU takes one."""
    dev = _device("galaxy-s10e")
    if overutilized:
        _hog(dev, "hog", affinity=(1,))
    bigger = dev.spec.soc.big_cpus
    tasks = [dev.sched.spawn(f"light{i}", affinity=(0, *bigger)) for i in range(2)]
    for t in tasks:
        _periodic(dev, t, 0.2)
    seen = [_trace(dev, t) for t in tasks]
    dev.run(1.0)
    assert any(c in bigger for trace in seen for at, c in trace if at > 0.5) == overutilized


def test_a_pinned_tasks_demand_counts_from_when_it_first_ran():
    """WALT accounts every task whatever its mask: a hog pinned to a big CPU, alone on the
    phone for 0.3 s (nothing for a placement to decide), shows its full demand to the first
    placement that reads it, not a new task's initial 15%."""
    dev = _device("pixel3")
    big = dev.spec.soc.big_cpus[0]
    hog = _hog(dev, "hog", affinity=(big,))
    dev.run(0.3)
    pl = dev.sched.placement
    assert pl.demand(hog) == pytest.approx(pl.cap[big], rel=1e-6)


@pytest.mark.parametrize("cap_mhz", [None, 1766.4, 1209.6])
def test_a_cpu_busy_at_its_clusters_clock_cap_is_full(cap_mhz):
    """capacity_orig follows the clock cap (the kernel's max_freq_scale): a hog alone on a big
    CPU under schedutil runs at the cap, and its demand - its busy time scaled by its clock
    over the top clock - is the CPU's whole capacity under the cap, with no spare left, while
    a little CPU keeps its capacity."""
    dev = _device("pixel3", governor="schedutil")
    k = dev.platform.cluster_of_cpu[4]
    if cap_mhz is not None:
        dev.cpufreq[k].set_cap(cap_mhz)
    hog = _hog(dev, "hog", affinity=(4,))
    dev.run(0.3)
    pl = dev.sched.placement
    top = dev.platform.clusters[k].fmax_mhz
    assert dev.platform.freq_mhz[k] == (cap_mhz or top)
    assert pl.cap[4] == pytest.approx(pl.cap_max[4] * (cap_mhz or top) / top, rel=1e-9)
    assert pl.demand(hog) == pytest.approx(pl.cap[4], rel=1e-6)
    assert pl.cap[0] == pytest.approx(pl.cap_max[0], rel=1e-12)


@pytest.mark.parametrize("placement, spread", [("walt", False), ("walt-prevcpu", True)])
def test_the_balance_of_busy_cpus_spreads_tasks_queued_on_one(placement, spread):
    """Four unpinned busy tasks queued on little CPU 3 while every other CPU runs a pinned hog:
    no CPU is idle and none has spare capacity, so neither a wake-up nor an idle pull moves
    them. The kernels' periodic balance of busy CPUs (walt-prevcpu; rebalance_domains every
    CPU count x 32 ms) moves queued ones to the CPUs with the least load per capacity - the big
    CPUs, one task each beside its hog - until no move lessens the imbalance; without it they
    stay packed."""
    dev = _device("pixel3", placement=placement)
    n = dev.platform.n_cpus
    for c in range(n):
        if c != 3:
            _hog(dev, f"hog{c}", affinity=(c,))
    team = [_hog(dev, f"team{i}", affinity=(3,)) for i in range(4)]
    dev.run(0.1)
    for t in team:
        dev.sched.set_affinity(t, range(n))
    dev.run(1.5)
    where = sorted(t.cpu for t in team)
    if spread:
        assert where.count(3) == 1 and all(c in dev.spec.soc.big_cpus for c in where if c != 3)
    else:
        assert where == [3, 3, 3, 3]


def test_the_balance_of_busy_cpus_weighs_a_duty_cycled_task_at_its_duty():
    """The same four tasks queued on little CPU 3 (walt-prevcpu, which runs the balance), each
    now busy a tenth of its time (a loop of short calls and waits, as a macro region stands for
    a per-group loop): the kernel's runnable load average sees each at a tenth of its weight, so
    CPU 3 carries less load per capacity than its hogged neighbours and nothing moves (counted
    at full weight they spread, as above)."""
    dev = _device("pixel3", placement="walt-prevcpu")
    n = dev.platform.n_cpus
    for c in range(n):
        if c != 3:
            _hog(dev, f"hog{c}", affinity=(c,))
    k = dev.platform.cluster_of_cpu[3]
    rate_cpu = dev.platform.freq_mhz[k] * 1e6 * _speed(dev)[k]
    team = []
    for i in range(4):
        t = dev.sched.spawn(f"team{i}", affinity=(3,))
        dev.sched.run(t, 1e15, _speed(dev), idle_s_per_unit=9.0 / rate_cpu)
        team.append(t)
    dev.run(0.1)
    for t in team:
        dev.sched.set_affinity(t, range(n))
    dev.run(1.5)
    assert [t.cpu for t in team] == [3, 3, 3, 3]
    assert all(t.duty == pytest.approx(0.1, abs=0.01) for t in team)


@pytest.mark.parametrize("device, placement, lands_on", [
    ("pixel3", "walt", "spare"), ("galaxy-s10e", "walt", "spare"),
    ("pixel3", "walt-prevcpu", "previous"), ("galaxy-s10e", "walt-prevcpu", "spare")])
def test_a_task_that_fits_no_cpu_takes_the_most_spare_or_as_its_kernel_the_previous_one(device, placement, lands_on):
    """Every CPU runs a pinned hog, little CPU 0's at half duty, when a big task that slept wakes:
    it fits no CPU. The reference takes the CPU with the most spare capacity; the kernels' own
    rule (walt-prevcpu): msm the same when that spare is positive, Android 4.9's find_best_target
    nothing, so the task keeps its previous CPU."""
    dev = _device(device, placement=placement)
    n = dev.platform.n_cpus
    task = _hog(dev, "task", affinity=tuple(range(n)))
    dev.run(0.3)
    k = dev.platform.cluster_of_cpu[0]
    rate_cpu = dev.platform.freq_mhz[k] * 1e6 * _speed(dev)[k]
    dev.sched.run(dev.sched.spawn("half", affinity=(0,)), 1e15, _speed(dev), idle_s_per_unit=1.0 / rate_cpu)
    for c in range(1, n):
        _hog(dev, f"hog{c}", affinity=(c,))
    dev.run(0.31)
    pl = dev.sched.placement
    previous = task.cpu
    assert previous != 0 and not pl.fits(pl.demand(task), 0, 0)
    dev.sched.stop(task)
    dev.run(0.5)
    dev.sched.run(task, 1e15, _speed(dev))
    dev.run(0.501)
    spare = [pl.cap[c] - sum(pl.demand(t) for t in dev.sched.threads if t.runnable and t.cpu == c and t is not task)
             for c in range(n)]
    assert all(s < pl.demand(task) for s in spare) and max(spare) == spare[0] > 0   # fits nowhere; CPU 0 has spare
    assert task.cpu == (previous if lands_on == "previous" else 0)


@pytest.mark.parametrize("device, placement, stays", [
    ("pixel3", "walt-prevcpu", True), ("galaxy-s10e", "walt-prevcpu", False), ("pixel3", "walt", False)])
def test_on_an_over_utilized_android_4_9_phone_a_waking_task_keeps_its_cpu(device, placement, stays):
    """A light periodic task, started on big CPU 5, wakes every 10 ms while every other CPU
    runs a hog (the phone over-utilized), little CPU 0's working half the time.
    find_best_target packs it where it fits, on the busy CPU 0; Android 4.9 takes that path
    only while the root domain is not over-utilized, and otherwise the classic one, whose
    select_idle_sibling keeps the previous CPU, idle between the task's runs (the kernels' own
    rule, walt-prevcpu; msm and the reference stay on the energy-aware path)."""
    dev = _device(device, placement=placement)
    n = dev.platform.n_cpus
    k = dev.platform.cluster_of_cpu[0]
    rate_cpu = dev.platform.freq_mhz[k] * 1e6 * _speed(dev)[k]
    dev.sched.run(dev.sched.spawn("half", affinity=(0,)), 1e15, _speed(dev), idle_s_per_unit=1.0 / rate_cpu)
    for c in range(1, n):
        if c != 5:
            _hog(dev, f"hog{c}", affinity=(c,))
    task = dev.sched.spawn("task", affinity=(5,))
    _periodic(dev, task, 0.05)
    dev.run(0.2)
    pl = dev.sched.placement
    others = [t for t in dev.sched.threads if t.runnable and t is not task]
    count = [sum(1 for t in others if t.cpu == c) for c in range(n)]
    util = [sum(pl.demand(t) for t in others if t.cpu == c) for c in range(n)]
    load = [sum(t.weight for t in others if t.cpu == c) for c in range(n)]
    assert task.cpu == 5 and count[5] == 0 and pl._overutilized(util)
    assert pl.fits(pl.demand(task) + util[0], 0, 0)   # it fits beside CPU 0's half-time hog
    woke_on = pl._wake_cpu(task, pl.demand(task), tuple(range(n)), count, util, load)
    assert woke_on == (5 if stays else 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.5), st.lists(st.sampled_from([0.0, 0.3, 0.9, 1.0]), min_size=8, max_size=8),
                          st.lists(st.integers(0, 2), min_size=8, max_size=8), st.integers(0, 7)),
                min_size=1, max_size=12))
def test_core_ctl_windows_closed_at_once_are_the_windows_closed_one_by_one(plans):
    """Under one plan, once a full window has left core_ctl steady, the windows up to a
    replan are closed at once (WindowStats): core_ctl ends where closing them one by one puts
    it, need timestamps included (S10e's stock core_ctl; random plans and replan instants)."""
    import copy

    dev = _device("galaxy-s10e")
    _hog(dev, "h")
    dev.run(W)   # the placement sets itself up at its first replan
    pl = dev.sched.placement
    fast = (copy.deepcopy(pl.core_ctl), WindowStats(8, W))
    slow = (copy.deepcopy(pl.core_ctl), WindowStats(8, W))
    t = 0.0
    for gap_s, busy, nr, misfit_cpu in plans:
        t += gap_s
        misfit = [int(c == misfit_cpu and nr[c] > 0) for c in range(8)]
        for cc, ws, steady in ((fast[0], fast[1], lambda cc=fast[0]: cc.steady), (slow[0], slow[1], lambda: False)):
            ws.advance(t, cc.evaluate, steady)
            ws.set_plan(t, busy, nr, misfit, nr)
        assert fast[1].window == slow[1].window and fast[1].t == slow[1].t
        assert fast[0].isolated == slow[0].isolated and fast[0].n_changes == slow[0].n_changes
        for a, b in zip(fast[0].clusters, slow[0].clusters):
            assert (a.need, a.need_ts, a.lru, a.busy) == (b.need, b.need_ts, b.lru, b.busy)


def test_rollover_is_one_timer_not_one_per_thread():
    """Window rollovers cost one event per window however many threads run."""
    counts = []
    for n in (1, 6):
        dev = _device("galaxy-s10e")
        pl = dev.sched.placement
        calls = []
        inner = pl._rollover
        pl._rollover = lambda at, inner=inner: (calls.append(at), inner(at))
        for i in range(n):
            _hog(dev, f"h{i}")
        dev.run(0.5)
        counts.append(len(calls))
    assert counts[0] == counts[1] <= 0.5 / W + 1



@pytest.mark.parametrize("device", ["pixel3", "oneplus8"])
def test_a_placed_plan_is_not_placed_again_and_nothing_changes(device, monkeypatch):
    """A training batch whose threads spin at barriers (same threads, same cores, same window)
    skips the placement; placing every plan in full gives the same cores at every replan and
    the same latency and energy."""
    from swansim.dnn.choices import pytorch_default
    from swansim.dnn.tasks import build_task
    from swansim.dnn.training import TrainingJob
    from swansim.hw.profile import TOP_APP

    def one(full: bool):
        if full:   # forget every placement: no plan is ever "the same as last placed"
            monkeypatch.setattr(WaltPlacement, "_remember", lambda self, threads, window: None)
        dev = Device(Catalogue.load().device(device))
        job = TrainingJob(dev.env, dev.sched, dev.spec.soc, build_task("resnet34"), load_runtime("pytorch"),
                          pytorch_default(dev.spec.soc), n_batches=1, record_layers=False,
                          cpuset=dev.spec.cpuset(TOP_APP))
        cpus = []
        dev.sched.on_replan.append(lambda: cpus.append(tuple(t.cpu for t in job.pool if t.runnable)))
        full_calls = []
        inner = WaltPlacement._balance
        monkeypatch.setattr(WaltPlacement, "_balance", lambda self, *a, **kw: (full_calls.append(1), inner(self, *a, **kw))[1])
        dev.env.run(until=job.process)
        monkeypatch.undo()
        return cpus, job.batch_rows[0][3:5], len(full_calls), dev.sched.n_replans

    cpus, row, n_full, n_replans = one(full=False)
    cpus_full, row_full, n_full_full, _ = one(full=True)
    assert cpus == cpus_full and row == row_full
    assert n_full < 0.8 * n_full_full   # the skip is taken, at a good share of the replans

# -- profiles ------------------------------------------------------------------------------------




def test_swan_phones_cpusets_and_schedtune_as_their_init_scripts(cat):
    d = {n: cat.devices[n] for n in SWAN_PHONES}
    assert d["pixel3"].cpusets["foreground"] == (0, 1, 2, 3, 6, 7)
    assert d["pixel3"].cpusets["background"] == (0, 1)
    assert d["galaxy-s10e"].cpusets["foreground"] == (0, 1, 2, 4, 5, 6, 7)
    assert d["oneplus8"].cpusets["foreground"] == (0, 1, 2, 3, 4, 5, 6)
    assert d["mi10"].cpusets["background"] == (0, 1, 2)
    assert d["pixel3"].kernel.stune("top_app").boost_pct == 10 and d["pixel3"].kernel.stune("top_app").prefer_idle
    for n in SWAN_PHONES[1:]:
        k = d[n].kernel
        assert k.stune("top_app").boost_pct == 0 and k.stune("top_app").colocate
        assert [c.cluster for c in k.core_ctl] == ["big", "prime"]
        assert k.schedutil_up_rate_limit_us == 0
    assert d["pixel3"].kernel.core_ctl == ()
    assert _device("pixel3", "schedutil").cpufreq[0].governor.up_rate_limit_s == pytest.approx(500e-6)
    assert _device("galaxy-s10e", "schedutil").cpufreq[0].governor.down_rate_limit_s == 0.0
    assert cat.socs["sm8550"].clusters[0].vector_unit_shared_by == 2


PHONE = (PROFILE_DIR / "phones" / "galaxy-s10e.toml").read_text()


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, f"fixture drifted: {old!r}"
    return text.replace(old, new, 1)


KERNEL_CASES = {
    "flavour": (lambda t: _sub(t, 'flavour = "msm-4.14-walt"', 'flavour = "linux-6.6-eevdf"'), "kernel.flavour"),
    "upmigrate-count": (lambda t: _sub(t, "sched_upmigrate_pct = [95, 95]", "sched_upmigrate_pct = [95]"),
                        "kernel.sched_upmigrate_pct"),
    "no-hysteresis": (lambda t: _sub(t, "sched_downmigrate_pct = [85, 85]", "sched_downmigrate_pct = [85, 97]"),
                      "kernel.sched_downmigrate_pct[1]"),
    "unknown-group": (lambda t: t.replace("kernel.schedtune.top_app", "kernel.schedtune.top-app"),
                      "kernel.schedtune.top-app"),
    "unknown-cluster": (lambda t: t.replace("kernel.core_ctl.prime", "kernel.core_ctl.gold_plus"),
                        "kernel.core_ctl.gold_plus"),
    "too-many-cpus": (lambda t: _sub(t, "min_cpus = 2", "min_cpus = 4"), "kernel.core_ctl.big.min_cpus"),
    "floor-above-the-opps": (lambda t: _sub(t, "scaling_min_freq_mhz = 672", "scaling_min_freq_mhz = 6720"),
                             "kernel.cpufreq.little.scaling_min_freq_mhz"),
    "floor-of-no-cluster": (lambda t: t.replace("kernel.cpufreq.little", "kernel.cpufreq.silver"),
                            "kernel.cpufreq.silver"),
    "fraction-of-a-cpu": (lambda t: _sub(t, "min_cpus = 2", "min_cpus = 1.5"), "kernel.core_ctl.big.min_cpus"),
    "unsourced": (lambda t: re.sub(r"(?m)^colocate = \".*\n", "", t, count=1),
                  "kernel.schedtune.top_app.sources.colocate"),
}


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_malformed_kernel_table(tmp_path, cat, case):
    mutate, field = KERNEL_CASES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(mutate(PHONE))
    with pytest.raises(InputError) as exc:
        load_device(path, cat.socs)
    assert str(path) in str(exc.value) and field in str(exc.value), str(exc.value)


# -- hardware: the A510 complexes' shared vector unit (SM8550) -------------------------------------


def test_a510_complex_shares_its_vector_unit(cat):
    """Two threads on the two cores of one A510 complex split its vector unit's FLOP rate;
    two on different complexes (or one alone) each get all of it."""
    from swansim.dnn.choices import parse_choice
    from swansim.dnn.regions import SocView, layer_regions
    from swansim.dnn.tasks import build_task

    soc = cat.socs["sm8550"]
    assert soc.clusters[0].complex_of(0) == (0, 1) and soc.clusters[0].complex_of(2) == (2,)
    view = SocView.of(soc, load_runtime("pytorch"))
    model = build_task("resnet34")
    i = next(i for i, ly in enumerate(model.layers) if ly.op == "conv" and ly.batch > 1)

    def little_speeds(label):
        region = layer_regions(view, model.layers[i], i, "fwd", parse_choice(label, soc))[0]
        return [w.speed[0] for w in region.team]

    full = view.peak(view.runtime.ops["conv"], 0)
    same, apart = little_speeds("01"), little_speeds("02")
    assert same == pytest.approx([full / 2] * 2) and apart == pytest.approx([full] * 2)
    # every other SoC: one unit per core, nothing shared
    assert all(c.vector_unit_shared_by == 1 for s in cat.socs.values() if s.name != "sm8550" for c in s.clusters)


# -- core classes: a prime core is one whose capacity stands above the rest --------------------------


def test_rk3588_second_a76_domain_is_not_a_prime_core(cat):
    from swansim.dnn.choices import enumerate_choices

    rk = cat.socs["rk3588"]
    assert rk.prime is None and rk.tiers == ((4, 5, 6, 7),)
    kinds = {c.label: c.kind for c in enumerate_choices(rk, mixed=False)}
    assert kinds == {"0": "little", "01": "little", "012": "little", "0123": "little",
                     "4": "big", "45": "big", "456": "big", "4567": "big"}
    assert cat.socs["sm8150"].prime.cpus == (7,) and cat.socs["sdm845"].prime is None


# -- Swan Fig. 3: the four validation points, pinned at the values the code gives ------------------

# Work-score drop (%) with PyTorch's default training in the background (seed 0), over a run as
# long as PCMark's Work test (the app table's 25 passes of the script), as
# experiments/calibration_ledger.py records it from runs.scenarios.fig3_drop_pct in
# experiments/calibration/ledger.csv. One such point takes 40-90 CPU-s: the suite recomputes the
# points over one pass (FIG3_ONE_PASS) to catch a change of the mechanism, and the ledger's rows
# are checked against these.
FIG3_TODAY = {
    ("pixel3", "shufflenet_v2_x2_0"): 31.47,
    ("pixel3", "mobilenet_v2"): 34.07,
    ("galaxy-s10e", "resnet34"): 52.45,
    ("galaxy-s10e", "shufflenet_v2_x2_0"): 9.02,
}
# The same over one pass of the script (24 s of benchmark): a depthwise default's batch lasts
# seconds to tens of seconds, so one pass sees a part of a batch (24.5% against 31.5% for the
# Pixel 3's ShuffleNetV2) - a guard of the mechanism, not the figure.
FIG3_ONE_PASS = {
    ("pixel3", "shufflenet_v2_x2_0"): 24.545,
    ("pixel3", "mobilenet_v2"): 20.208,
    ("galaxy-s10e", "resnet34"): 42.466,
    ("galaxy-s10e", "shufflenet_v2_x2_0"): 8.047,
}
# A point reproduces the paper if it is within 5 points of it (one run's drop moves by a few
# points from seed to seed: runs/ux.py).
FIG3_TOLERANCE_PP = 5.0
# What a point outside the tolerance lacks (README, "Where the model stands"): its xfail's reason.
_DEPTHWISE_TEAM = ("caches thrashed across the training team's threads (the paper's account of the depthwise "
                   "slowdown) are not modelled; the model's default team sleeps between the per-group loop's tiny "
                   f"regions instead (its spin fitted at {load_runtime('pytorch').spin_iterations:,.0f} polls, "
                   "libgomp documents 300,000)")
_POLLING = ("OpenBLAS 0.3.18's workers poll 0.109 s after each GEMM (its source) and hold every core the training "
            "may use, so the app's threads take CFS turns with them; what lets the real pool sleep sooner is not found")
FIG3_MISSING = {
    ("pixel3", "shufflenet_v2_x2_0"): _POLLING + "; and " + _DEPTHWISE_TEAM,
    ("pixel3", "mobilenet_v2"): _POLLING + "; and " + _DEPTHWISE_TEAM,
    ("galaxy-s10e", "resnet34"): _POLLING,
    ("galaxy-s10e", "shufflenet_v2_x2_0"): _DEPTHWISE_TEAM + "; its threads sleep most of each batch on the little "
                                           "cores, so the benchmark shares them with a light load",
}


def _paper(point):
    from swansim.runs.scenarios import PAPER_FIG3_DROP_PCT
    return PAPER_FIG3_DROP_PCT[point]


@pytest.fixture(scope="module")
def fig3_one_pass():
    from swansim.runs.scenarios import fig3_drop_pct
    return {p: fig3_drop_pct(*p, passes=1) for p in FIG3_ONE_PASS}


@pytest.mark.parametrize("point", list(FIG3_ONE_PASS))
def test_fig3_validation_point_over_one_pass_is_pinned(fig3_one_pass, point):
    assert fig3_one_pass[point] == pytest.approx(FIG3_ONE_PASS[point], abs=0.01)


def _against_paper(point):
    miss = abs(FIG3_TODAY[point] - _paper(point))
    if miss <= FIG3_TOLERANCE_PP:
        return point
    return pytest.param(point, marks=pytest.mark.xfail(
        strict=True, reason=f"today {FIG3_TODAY[point]:.1f}% vs the paper's {_paper(point)}%: {FIG3_MISSING[point]}"))


@pytest.mark.parametrize("point", [_against_paper(p) for p in FIG3_TODAY])
def test_fig3_validation_point_against_the_paper(point):
    assert abs(FIG3_TODAY[point] - _paper(point)) <= FIG3_TOLERANCE_PP


def test_ledger_lists_every_figure_with_its_role():
    from swansim.dnn.calibrate import read_ledger

    rows = read_ledger()
    fig3 = {r["point"].split(" Work")[0]: r for r in rows if r["figure"] == "Swan Fig. 3"}
    assert fig3["pixel3 resnet34"]["role"] == "calibration"
    for (d, m), today in FIG3_TODAY.items():
        r = fig3[f"{d} {m}"]
        assert r["role"] == "validation" and float(r["predicted"]) == pytest.approx(today, abs=0.01)
        assert float(r["target"]) == _paper((d, m))
    figures = {r["figure"] for r in rows}
    assert {"Swan Fig. 1", "Swan Fig. 2a", "Swan Fig. 2b", "ncnn benchmark", "Swan Fig. 3"} <= figures
    for r in rows:
        assert r["role"] in ("calibration", "validation", "normaliser")
        if r["role"] != "normaliser" and "points" not in r["unit"]:
            assert float(r["residual"]) == pytest.approx(float(r["predicted"]) / float(r["target"]) - 1, abs=1e-3)


# -- the per-group loop's fast path against the loop run repeat by repeat (experiments/macro_check.py)

@functools.lru_cache(maxsize=None)   # the repeat-by-repeat runs (5-7 s each) serve several tests
def _run(device: str, model: str, label: str, loops: str, warm: bool = False):
    """One cold batch (``warm``: one after a warm-up batch): its cost, and how often the job's
    threads fell asleep in all it ran."""
    from swansim.batchmodel import BatchKey, simulate_batch
    from swansim.dnn.choices import parse_choice, pytorch_default

    soc = Catalogue.load().device(device).soc
    choice = pytorch_default(soc) if label == "default" else parse_choice(label, soc)
    seen = {}
    cost = simulate_batch(BatchKey(device, model, choice, warmup=int(warm), batches=1), record_layers=False,
                          loops=loops, attach=lambda dev, job: seen.update(job=job))
    return cost, seen["job"].sleeps


def _batch(device: str, model: str, label: str, loops: str, warm: bool = False):
    return _run(device, model, label, loops, warm)[0]


def test_a_model_without_grouped_convolutions_runs_the_same_either_way():
    assert _batch("pixel3", "resnet34", "default", "macro") == _batch("pixel3", "resnet34", "default", "repeats")


@pytest.mark.parametrize("label", ["default", "4567"])
def test_the_chunked_fast_path_tracks_the_repeats_beside_the_blas_spinners(label):
    """The default fast path, which the runtime is fitted on: on the Pixel 3, where the BLAS
    pool's spinners share the team's cores, within 8% of the loop run repeat by repeat today
    (default 6.83 vs 6.33 s, 4567 2.87 vs 2.97 s, cold); 15% is the bound."""
    chunked = _batch("pixel3", "shufflenet_v2_x2_0", label, "chunked")
    repeats = _batch("pixel3", "shufflenet_v2_x2_0", label, "repeats")
    assert chunked.latency_s == pytest.approx(repeats.latency_s, rel=0.15)
    assert chunked.net_energy_j == pytest.approx(repeats.net_energy_j, rel=0.15)


@pytest.mark.xfail(strict=True, reason="the chunked path tracks the default's cold batch on the Pixel 3 (6.83 vs "
                   "6.33 s) but not a warm one, the kind the landscape measures: 7.15 vs 5.96 s "
                   "(+20%; MobileNetV2 8.12 vs 7.04 s, +15%; the Galaxy S10e's within 3%), so the Pixel 3's "
                   "default-over-best gaps read 2.80 and 2.39 where the loop run repeat by repeat gives 2.34 and 2.08 "
                   "(experiments/macro_check.py, 2026-12-05): beside OpenBLAS's spinners, repeat by repeat the woken "
                   "workers take a big CPU each and spin through a depthwise loop; as macro regions they enter as mostly "
                   "idle work and are packed onto one CPU (DESIGN.md, the per-group loop)")
def test_the_chunked_fast_path_tracks_the_defaults_warm_batch():
    chunked = _batch("pixel3", "shufflenet_v2_x2_0", "default", "chunked", warm=True)
    repeats = _batch("pixel3", "shufflenet_v2_x2_0", "default", "repeats", warm=True)
    assert chunked.latency_s == pytest.approx(repeats.latency_s, rel=0.10)


def test_the_fast_path_counts_the_sleeps_of_a_little_team_as_its_repeats_do():
    """The threads' sleeps (each a futex_wait: wake_sweep.py's ``sleeps_*``) in Fig. 2b's
    normaliser: the macro regions count theirs in closed form, within 0.1% of the loop run
    repeat by repeat today (83,815 vs 83,823); 5% is the bound. One thread never sleeps."""
    assert _run("pixel3", "shufflenet_v2_x2_0", "0123", "chunked")[1] == pytest.approx(
        _run("pixel3", "shufflenet_v2_x2_0", "0123", "repeats")[1], rel=0.05)
    assert _run("pixel3", "shufflenet_v2_x2_0", "4", "chunked")[1] == 0


def test_the_macro_region_of_a_pinned_little_team_tracks_its_repeats():
    """Fig. 2b's normaliser, four threads pinned to the Pixel 3's little cores: the fast path is
    within 2% of the loop run repeat by repeat today (50.7 vs 51.3 s); 10% is the bound."""
    macro = _batch("pixel3", "shufflenet_v2_x2_0", "0123", "macro")
    repeats = _batch("pixel3", "shufflenet_v2_x2_0", "0123", "repeats")
    assert macro.latency_s == pytest.approx(repeats.latency_s, rel=0.10)
    assert macro.net_energy_j == pytest.approx(repeats.net_energy_j, rel=0.15)


@pytest.mark.xfail(strict=True, reason="as a macro region the loop's workers stay runnable through their idle "
                   "shares and stay where they are, mostly on little cores beside the BLAS pool's spinners, paying the "
                   "little cores' fitted 0.7 ms wake-up on every repeat; repeat by repeat they sleep, wake and run mostly "
                   "on the big cores. On the Pixel 3 the default's cold ShuffleNetV2 batch is 2.9x its repeats (22.9 vs "
                   "8.0 s at the values fitted on chunked loops, 2026-12-02; 3.0x at the previous values, where the "
                   "wake-up at 10 us gave 1.12x and no BLAS pool 1.01x)")
def test_the_macro_region_of_an_unpinned_team_agrees_with_its_repeats():
    macro = _batch("pixel3", "shufflenet_v2_x2_0", "default", "macro").latency_s
    repeats = _batch("pixel3", "shufflenet_v2_x2_0", "default", "repeats").latency_s
    assert macro == pytest.approx(repeats, rel=0.25)


@pytest.mark.parametrize("at_s", [0.205, 0.215, 0.225, 0.235])
def test_an_idle_cpu_pulls_the_queued_task_never_the_one_running(at_s):
    """Two hogs take turns on big CPU 4 (CFS turns of 12 ms) until, at ``at_s``, both may also
    run on little CPU 0, idle all along: under the kernels' own rules (walt-prevcpu) the idle CPU
    takes the one waiting in the queue (can_migrate_task refuses the task running; detach_tasks),
    whichever of the two holds CPU 4 at that instant, and the other stays."""
    dev = _device("pixel3", placement="walt-prevcpu")
    hogs = [_hog(dev, f"hog{i}", affinity=(4,)) for i in range(2)]
    dev.run(at_s)
    running = dev.sched._curr[4]
    assert running in hogs
    for h in hogs:
        dev.sched.set_affinity(h, (0, 4))
    dev.run(at_s + 1e-4)
    assert running.cpu == 4
    assert next(h for h in hogs if h is not running).cpu == 0


@pytest.mark.parametrize("device, period_s, sleep_s, pulled", [
    ("pixel3", 1e-3, 5e-6, False), ("pixel3", 1e-3, 100e-6, True),
    ("galaxy-s10e", 1e-3, 100e-6, False), ("galaxy-s10e", 4e-3, 1e-3, True)])
def test_a_cpu_that_idles_only_briefly_does_not_balance_when_it_goes_idle(device, period_s, sleep_s, pulled):
    """Little CPU 0 runs a pinned task that sleeps ``sleep_s`` every ``period_s``; two hogs take
    turns on big CPU 4 and may also run on CPU 0 (walt-prevcpu). A newly idle CPU balances
    only while its average idle time covers the balancing's cost (idle_balance: avg_idle
    against max_newidle_lb_cost, `walt.NEWIDLE_COST_S`) - on msm only once it reaches
    sched_migration_cost, 0.5 ms (`KernelSpec.newidle_needs_migration_cost`): 5 us idle periods
    never let the Pixel 3's CPU 0 take a hog, 100 us ones do at its first sleep; on the Galaxy
    S10e 100 us ones do not, 1 ms ones do."""
    dev = _device(device, placement="walt-prevcpu")
    _periodic(dev, dev.sched.spawn("short", affinity=(0,)), 1.0 - sleep_s / period_s, period_s=period_s)
    hogs = [_hog(dev, f"hog{i}", affinity=(4,)) for i in range(2)]
    dev.run(0.2)
    for h in hogs:
        dev.sched.set_affinity(h, (0, 4))
    dev.run(0.3)
    assert sorted(h.cpu for h in hogs) == ([0, 4] if pulled else [4, 4])
