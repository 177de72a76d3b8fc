"""The silicon and the scheduler: closed forms and invariants."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swansim.hw.platform import Platform
from swansim.hw.power import dynamic_power_w
from swansim.kernel.engine import Environment
from swansim.kernel.sched import SCHED_LATENCY_S, Scheduler, nice_to_weight

from conftest import CAT



def make(device="pixel3"):
    env = Environment()
    plat = Platform(CAT.device(device))
    return env, plat, Scheduler(env, plat)


def finish_times(env, sched, jobs):
    """jobs: list of (thread, amount, speed); returns each thread's completion time."""
    out = {}

    def proc(t, amount, speed):
        yield sched.run(t, amount, speed)
        out[t.name] = env.now

    for t, a, s in jobs:
        env.process(proc(t, a, s))
    env.run()
    sched.sync()
    return out


def test_weights_share_one_core_by_turns():
    """CFS turns: over a period each thread holds the core its weight's share of the time, so a
    heavy and a light thread end within one turn of the fluid share, and the core never idles."""
    env, plat, sched = make()
    f_hz = plat.freq_mhz[1] * 1e6
    heavy = sched.spawn("heavy", [4], nice=0)
    light = sched.spawn("light", [4], nice=10)
    assert (heavy.weight, light.weight) == (1024, 110)
    work = f_hz * 1.0  # one second of the core alone, at 1 unit/cycle
    done = finish_times(env, sched, [(heavy, work, (1.0, 1.0)), (light, work, (1.0, 1.0))])
    t_heavy = 1134 / 1024  # the fluid share: heavy gets 1024/1134 of the core until it is done
    assert abs(done["heavy"] - t_heavy) <= SCHED_LATENCY_S * 1024 / 1134 + 1e-9
    assert done["light"] == pytest.approx(2.0, rel=1e-12)


def test_a_woken_sleeper_preempts_and_a_runner_waits_its_turn():
    """check_preempt_wakeup: a thread that slept longer than the wakeup granularity takes the
    core from a spinner at once; a thread that never slept waits for the spinner's turn."""
    env, plat, sched = make()
    f_hz = plat.freq_mhz[1] * 1e6
    spinner, sleeper = sched.spawn("spin", [4]), sched.spawn("sleeper", [4])
    sched.spin(spinner)
    env.run(until=1.0)
    done = finish_times(env, sched, [(sleeper, f_hz * 0.001, (1.0, 1.0))])
    assert done["sleeper"] == pytest.approx(1.001, rel=1e-9)   # 1 ms of work, no wait
    sched.stop(spinner)
    sched.spin(spinner)          # a spinner alone again: it holds the core from now
    runner = sched.spawn("runner", [4])
    done = finish_times(env, sched, [(runner, f_hz * 0.001, (1.0, 1.0))])
    # new, one virtual slice behind: it waits for the spinner's turn (half a period), then runs
    assert done["runner"] == pytest.approx(1.001 + SCHED_LATENCY_S / 2 + 0.001, rel=1e-9)


@pytest.mark.parametrize("duty", [0.3, 0.8])
def test_work_with_sleep_interleaved_shares_a_core_max_min_over_demand(duty):
    """A thread whose work comes with sleep
    interleaved (busy ``duty`` of its time alone) beside a spinner on one core. CFS dequeues it
    while it sleeps and a woken sleeper takes the core back, so it gets min(duty, its weight's
    half) of the core and runs that share of its own speed while it works - its alone time if
    duty <= 1/2, else duty / (1/2) times slower busy."""
    env, plat, sched = make()
    f_hz = plat.freq_mhz[1] * 1e6
    work = f_hz * 0.1                            # 0.1 s of the core alone, at 1 unit/cycle
    idle_s_per_unit = 0.1 * (1 - duty) / duty / work    # alone: 0.1 s busy in 0.1 / duty s
    spinner, sleepy = sched.spawn("spin", [4]), sched.spawn("sleepy", [4])
    sched.spin(spinner)
    out = {}

    def proc():
        yield sched.run(sleepy, work, (1.0, 1.0), idle_s_per_unit=idle_s_per_unit)
        out["done"] = env.now

    env.process(proc())
    env.run(until=10.0)
    share = min(duty, 0.5)
    expected = 0.1 * duty / share + 0.1 * (1 - duty) / duty   # busy part slowed by duty / share
    assert out["done"] == pytest.approx(expected, rel=1e-9)


def test_region_over_big_and_little_ends_with_the_little_share():
    env, plat, sched = make()
    f_little, f_big = (x * 1e6 for x in plat.freq_mhz)
    speed = (8.0, 8.0)  # FLOP/cycle on both clusters
    chunk = 1e9  # static split: each thread gets the same share of the layer
    tb, tl = sched.spawn("big", [4]), sched.spawn("little", [0])
    done = finish_times(env, sched, [(tb, chunk, speed), (tl, chunk, speed)])
    assert done["big"] == pytest.approx(chunk / (f_big * 8.0), rel=1e-12)
    # the barrier is the last thread: the little core's share, at the little core's rate
    assert max(done.values()) == done["little"] == pytest.approx(chunk / (f_little * 8.0), rel=1e-12)
    assert plat.util[4] == 0.0 and plat.util[0] == 0.0


def test_energy_is_the_integral_of_power():
    """The account, kept in pieces integrated only when they change, equals the interval by
    interval integral of the power of each line, also when it is read in the middle of a run."""
    env, plat, sched = make()
    samples, lines = [], []

    def probe(t0, t1, p):
        samples.append((t1 - t0) * p.total_power_w)
        lines.append((t1 - t0) * p.power_w)

    plat.probes.append(probe)
    threads = [sched.spawn(f"t{c}", [c]) for c in (0, 4, 5)]
    rng = np.random.default_rng(1)

    def churn(t):
        for _ in range(20):
            yield sched.run(t, rng.uniform(1e8, 1e9), (8.0, 8.0), bytes_per_unit=rng.uniform(0, 2))
            yield env.timeout(rng.uniform(0, 0.05))

    for t in threads:
        env.process(churn(t))

    def dvfs():
        for f in (1766.4, 902.4, 1420.8):
            yield env.timeout(0.2)
            sched.set_freq(0, f)
            sched.sync()
            assert plat.energy_j == pytest.approx(np.sum(lines, axis=0), rel=1e-9)

    env.process(dvfs())
    env.run()
    sched.sync()
    assert plat.total_energy_j == pytest.approx(math.fsum(samples), rel=1e-9)
    assert plat.total_energy_j == pytest.approx(plat.energy_j.sum(), rel=1e-12)
    assert plat.energy_j == pytest.approx(np.sum(lines, axis=0), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1e-4, 0.03), min_size=1, max_size=6))
def test_the_uncore_stays_up_through_idle_gaps_shorter_than_its_sleep_time(gaps_s):
    """The uncore draws its active power while a core is busy and for the SoC's
    `uncore_sleep_us` after the last one goes idle (the LLCC-off level's minimum residency), so
    its energy is soc_active x (busy time + each idle stretch's first uncore_sleep_us)."""
    env, plat, sched = make()
    soc = plat.spec.soc
    t = sched.spawn("t", [4])
    busy = []

    def bursts():
        for gap in [*gaps_s, 0.0]:
            t0 = env.now
            yield sched.run(t, 2e6, (1.0, 1.0))
            busy.append(env.now - t0)
            yield env.timeout(gap)

    env.process(bursts())
    env.run(until=1.0)
    sched.sync()
    hold_s = soc.uncore_sleep_us * 1e-6
    on_s = sum(busy) + sum(min(g, hold_s) for g in gaps_s) + hold_s   # and after the last burst
    uncore = plat.energy_by_component()["soc.uncore"]
    assert uncore == pytest.approx(soc.soc_active_mw * 1e-3 * on_s, rel=1e-9)
    assert not plat.uncore_hold


def test_the_idle_floor_leaves_out_an_uncore_still_held_up():
    env, plat, sched = make()
    floor_w = plat.idle_floor_w
    t = sched.spawn("t", [0])
    env.process((lambda: (yield sched.run(t, 1e6, (1.0, 1.0))))())
    env.run(until=1e-3)
    sched.sync()
    assert plat.uncore_hold and plat.idle_floor_w == pytest.approx(floor_w, rel=1e-5)   # (leakage warmed)


def test_gs101_x1_top_opp_dynamic_power_is_2_03_w():
    x1 = next(c for c in CAT.socs["gs101"].clusters if c.uarch == "cortex-x1")
    assert x1.opp_freq_mhz[-1] == 2802 and x1.opp_voltage_mv[-1] == 1056.25
    assert x1.dyn_power_coeff_uw_mhz_v2 == 650
    # mainline coefficient estimate, not the vendor table
    p = x1.dyn_power_coeff_uw_mhz_v2 * (1.05625 ** 2) * 2802 * 1e-6
    assert p == pytest.approx(2.03, abs=0.005)
    if x1.power_table_mw is None:
        assert dynamic_power_w(x1, 2802) == pytest.approx(2.03, abs=0.005)


def test_dram_bandwidth_bounds_rates():
    env, plat, sched = make()
    bw = plat.spec.soc.dram_bandwidth_gbps * 1e9
    threads = [sched.spawn(f"m{c}", [c]) for c in (4, 5, 6, 7)]
    # each thread alone would want 8 FLOP/cycle * 2.8 GHz * 4 B = ~90 GB/s: memory-bound
    evs = [sched.run(t, 1e9, (8.0, 8.0), bytes_per_unit=4.0) for t in threads]
    env.run(until=0.001)
    assert plat.dram_bytes_per_s == pytest.approx(bw, rel=1e-12)
    assert all(t.rate == pytest.approx(bw / 4 / 4, rel=1e-12) for t in threads)
    assert plat.util[4:] == [1.0] * 4
    env.run()
    assert all(e.processed for e in evs)


def test_spinning_holds_the_core_without_progress():
    """A spinner keeps its core busy and takes its turns: a worker next to it gets half the
    core over time, ending within one turn of the fluid 2 s."""
    env, plat, sched = make()
    spinner, worker = sched.spawn("spin", [4]), sched.spawn("work", [4])
    sched.spin(spinner)
    f_hz = plat.freq_mhz[1] * 1e6
    done = finish_times(env, sched, [(worker, f_hz, (1.0, 1.0))])
    assert abs(done["work"] - 2.0) <= SCHED_LATENCY_S / 2 + 1e-9
    assert plat.util[4] == 1.0
    sched.stop(spinner)
    env.run(until=3.0)
    sched.sync()
    assert plat.util[4] == 0.0


def test_unpinned_threads_spread_to_the_fastest_free_cores():
    env, plat, sched = make()
    ts = [sched.spawn(f"u{i}") for i in range(4)]
    for t in ts:
        sched.run(t, 1e12, (8.0, 8.0))
    env.run(until=0.01)
    assert sorted(t.cpu for t in ts) == [4, 5, 6, 7]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-20, 19), st.floats(1e6, 1e9)), min_size=1, max_size=6))
def test_one_core_is_work_conserving(jobs):
    """However weights and amounts vary, one core finishes the total work at f * t."""
    env, plat, sched = make()
    f_hz = plat.freq_mhz[1] * 1e6
    threads = [(sched.spawn(f"t{i}", [5], nice=n), a, (1.0, 1.0)) for i, (n, a) in enumerate(jobs)]
    done = finish_times(env, sched, threads)
    assert max(done.values()) == pytest.approx(sum(a for _, a in jobs) / f_hz, rel=1e-9)
    # a heavier thread with no more work never finishes more than a turn after a lighter one
    for (ti, ai, _), (tj, aj, _) in zip(threads, threads[1:]):
        if ti.weight >= tj.weight and ai <= aj:
            assert done[ti.name] <= done[tj.name] + SCHED_LATENCY_S


def test_nice_weights_follow_cfs():
    assert nice_to_weight(0) == 1024 and nice_to_weight(10) == 110 and nice_to_weight(-20) == 88761
    with pytest.raises(ValueError):
        nice_to_weight(20)


def test_memory_queueing_slows_latency_bound_threads_in_closed_form():
    """A streaming thread loads the memory controller to rho; a latency-bound thread on another
    core pays m * L0 * rho / (1 - rho) per unit on top of its compute time; rho is capped."""
    from swansim.kernel.sched import RHO_CAP
    env, plat, sched = make()
    p = plat.spec.soc
    bw, l0 = p.dram_bandwidth_gbps * 1e9, p.dram_latency_ns * 1e-9
    f0 = plat.freq_mhz[0] * 1e6
    stream = sched.spawn("stream", [4])
    app = sched.spawn("app", [0])
    m = 0.002                                    # misses per instruction, no traffic of its own
    sched.run(app, 1e12, (1.0, 1.0), 0.0, m)
    env.run(until=0.001)
    assert app.rate == pytest.approx(f0, rel=1e-12) and sched.mem_rho == 0.0   # unloaded: as before
    f4 = plat.freq_mhz[1] * 1e6
    b = 0.4 * bw / f4                            # the streamer alone moves 40% of the bandwidth
    sched.run(stream, 1e12, (1.0, 1.0), b)
    env.run(until=0.002)
    rho = 0.4
    assert sched.mem_rho == pytest.approx(rho, abs=1e-8)
    assert app.rate == pytest.approx(1.0 / (1.0 / f0 + m * l0 * rho / (1 - rho)), rel=1e-7)
    assert stream.rate == pytest.approx(f4, rel=1e-12)           # streaming is not latency-bound
    # the app's own traffic counts: the fixed point rho = traffic(rho) / bw
    env2, plat2, sched2 = make()
    a2 = sched2.spawn("app", [0])
    s2 = sched2.spawn("stream", [4])
    bpi = 0.05
    sched2.run(s2, 1e12, (1.0, 1.0), b)
    sched2.run(a2, 1e12, (1.0, 1.0), bpi, m)
    env2.run(until=0.001)
    r = sched2.mem_rho
    assert r > rho
    assert r * bw == pytest.approx(f4 * b + a2.rate * bpi, rel=1e-7)
    assert a2.rate == pytest.approx(1.0 / (1.0 / f0 + m * l0 * r / (1 - r)), rel=1e-12)
    # saturation: latency capped at L0 / (1 - RHO_CAP), then the bandwidth cap scales traffic
    env3, plat3, sched3 = make()
    s3 = [sched3.spawn(f"s{c}", [c]) for c in (4, 5)]
    a3 = sched3.spawn("app", [0])
    for t in s3:
        sched3.run(t, 1e12, (8.0, 8.0), 4.0)
    sched3.run(a3, 1e12, (1.0, 1.0), 0.0, m)
    env3.run(until=0.001)
    assert sched3.mem_rho == RHO_CAP
    assert a3.rate == pytest.approx(1.0 / (1.0 / f0 + m * l0 * RHO_CAP / (1 - RHO_CAP)), rel=1e-12)
    assert plat3.dram_bytes_per_s == pytest.approx(bw, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(share=st.floats(0.0, 0.9), ws_kib=st.floats(16.0, 2048.0), mpki=st.floats(0.1, 20.0))
def test_l3_thrashing_costs_the_che_share_of_accesses_in_closed_form(share, ws_kib, mpki):
    """A thread reading its L3 working set W at A bytes/s next to a streamer filling F loses
    exp(-S A / (F W)) of its L3 accesses; each exposed one costs the DRAM latency less the hit
    latency. Alone (F = 0) it loses none; the loss grows with F and shrinks with A."""
    from swansim.kernel.sched import L3Use
    env, plat, sched = make()
    soc = plat.spec.soc
    use = L3Use(accesses_per_unit=mpki / 1000, exposed_share=0.5, l3_bytes=soc.l3_kib * 1024.0,
                working_set_bytes=ws_kib * 1024.0, hit_latency_s=30e-9)
    app = sched.spawn("app", [0], l3=use)
    sched.run(app, 1e12, (1.0, 1.0))
    env.run(until=0.001)
    f0 = plat.freq_mhz[0] * 1e6
    assert app.rate == pytest.approx(f0, rel=1e-12)
    stream = sched.spawn("stream", [4])
    b = share * soc.dram_bandwidth_gbps * 1e9 / (plat.freq_mhz[1] * 1e6)
    sched.run(stream, 1e12, (1.0, 1.0), b)
    env.run(until=0.002)
    fill, own = stream.rate * b, f0 * mpki / 1000 * 64
    lost = math.exp(-use.l3_bytes * own / (fill * use.working_set_bytes)) if fill > 0 else 0.0
    extra = mpki / 1000 * 0.5 * lost * (soc.dram_latency_ns * 1e-9 - use.hit_latency_s)
    assert app.rate == pytest.approx(1.0 / (1.0 / f0 + extra), rel=1e-9)
    assert use.lost_share(own, 2 * fill) >= use.lost_share(own, fill) >= use.lost_share(own, 0.0) == 0.0
    assert use.lost_share(2 * own, fill) <= use.lost_share(own, fill)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 5.0), min_size=1, max_size=12), st.floats(0.1, 20.0))
def test_the_environment_clock_reads_the_time_of_the_event_being_processed(delays, until):
    """``Environment.now`` (an attribute, SimPy's is a property) is the event's time inside every
    callback - a kernel timer's, a SimPy timeout's, a process's, an instant-end function's - and
    where ``run(until=...)`` stops."""
    env = Environment()
    seen = []

    def check(at):
        seen.append((env.now, at))

    for d in delays:
        env.call_in(d, lambda d=d: check(d))
        env.timeout(d).callbacks.append(lambda _ev, d=d: (check(d), env.at_instant_end(lambda: check(d))))

    def proc():
        for d in delays:
            t0 = env.now
            yield env.timeout(d)
            check(t0 + d)

    env.process(proc())
    env.run(until=until)
    assert env.now == until
    assert all(now == at for now, at in seen)
    assert len(seen) >= 4 * sum(d < until for d in delays[:1])   # the first delay's four checks ran


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 5.0), min_size=1, max_size=12), st.floats(0.0, 20.0))
def test_advance_to_is_run_until_without_a_stop_event(delays, until):
    """``advance_to(t)`` processes exactly what ``run(until=t)`` does, in the same order: every
    event before ``t`` and the deferred work of the instants before it, none at ``t``."""
    logs = []
    for advance in (False, True):
        env, log = Environment(), []
        for d in delays:
            env.call_in(d, lambda d=d: (log.append(("timer", d, env.now)),
                                        env.at_instant_end(lambda: log.append(("end", d, env.now)))))
            env.timeout(d).callbacks.append(lambda _ev, d=d: log.append(("timeout", d, env.now)))
        if advance:
            env.advance_to(until)
        else:
            env.run(until=until) if until > 0 else None
        logs.append((log, env.now))
    assert logs[0] == logs[1]


def test_a_rescheduled_event_fires_at_its_new_time_and_never_in_the_past():
    env = Environment()
    fired = []
    ev = env.timeout(1.0)
    ev.callbacks.append(lambda _ev: fired.append(env.now))
    env.reschedule(ev, 2.5)
    env.advance_to(0.5)
    with pytest.raises(ValueError, match="before now"):
        env.reschedule(ev, 0.4)
    env.reschedule(ev, 2.0)   # brought forward again
    env.run(until=3.0)
    assert fired == [2.0]
