"""DVFS, thermal throttling and the battery: closed forms, control behaviour and invariants."""
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swansim.device import Device, DeviceConfig
from swansim.errors import InputError
from swansim.hw.profile import AMBIENT
from swansim.kernel.cpufreq import (DOWN_RATE_LIMIT_S, PELT_HALF_LIFE_S, TICK_S, UP_RATE_LIMIT_S, opp_at_or_above,
                                    schedutil_freq_mhz)
from swansim.kernel.thermal_gov import StatusMonitor, ThermalStatus, divvy_up_power
from swansim.session.workloads import SustainedGemm

from conftest import CAT

BIG = [4, 5, 6, 7]   # Pixel 3 (SDM845) gold cores, cluster 1
LITTLE = 0           # cluster index of the silver cores


def device(spec=None, **kw) -> Device:
    """A device of ``spec`` (default the Pixel 3); ``kw``: its `DeviceConfig`."""
    return Device(spec if spec is not None else CAT.device("pixel3"), DeviceConfig(**kw))


def test_the_init_scripts_floor_holds_an_idle_domain_and_a_thermal_cap_below_it_wins():
    dev = device(CAT.device("galaxy-s10e"))      # post_boot: little scaling_min_freq 672 MHz
    little = dev.cpufreq[0]
    assert little.min_mhz == 672.0 and dev.cpufreq[1].min_mhz == dev.cpufreq[1].opps_mhz[0]
    changes = record_freqs(dev)
    t = dev.sched.spawn("spin", [0])
    dev.run(0.5)
    dev.sched.spin(t)
    dev.run(1.0)
    assert dev.platform.freq_mhz[0] == little.opps_mhz[-1]
    dev.sched.stop(t)
    dev.run(2.0)
    assert dev.platform.freq_mhz[0] == 672.0 and little.governor.util() < 0.01
    assert min(f for _, k, f in changes if k == 0) == 672.0   # schedutil never went below it
    little.set_limit("kernel", 403.2)
    assert dev.platform.freq_mhz[0] == 403.2                   # the cap wins over the floor
    little.set_limit("kernel", little.fmax_mhz)
    assert dev.platform.freq_mhz[0] == 672.0
    little.set_floor(1000.0)                                   # scaling_min_freq: the OPP at or above
    assert little.min_mhz == dev.platform.freq_mhz[0] == min(f for f in little.opps_mhz if f >= 1000.0)


def pixel3_with_ipa():
    """Pixel 3 under power_allocator, its sustainable power set as the kernel docs define it.

    2.6 W is what the CPU domains dissipate with the big cluster held at control_c (90 C) once
    this chassis is at thermal equilibrium (measured with `swansim thermal`, ~4 h simulated).
    """
    spec = CAT.device("pixel3")
    return replace(spec, thermal=replace(spec.thermal, governor="power_allocator", sustainable_power_mw=2600.0))


def record_freqs(dev: Device) -> list[tuple[float, int, float]]:
    """(time, cluster, MHz) at every frequency change, via the scheduler's replan hook."""
    out = []
    last = list(dev.platform.freq_mhz)

    def hook():
        for k, f in enumerate(dev.platform.freq_mhz):
            if f != last[k]:
                out.append((dev.env.now, k, f))
                last[k] = f

    dev.sched.on_replan.append(hook)
    return out


class TestSteadyState:
    """With constant power the RC network settles at T = T_amb + G^-1 P."""

    def test_long_run_reaches_the_closed_form(self):
        dev = device(governor="userspace", userspace_freq_mhz=(1228.8, 1996.8))
        for cpu in (0, 4, 5):   # spinning threads: constant utilisation, no events
            dev.sched.spin(dev.sched.spawn(f"spin{cpu}", [cpu]))
        net = dev.platform.thermal
        slowest_tau_s = 1.0 / net.rates_per_s.min()
        dev.run(40 * slowest_tau_s)
        # G built here from the profile's edges, independently of ThermalNetwork
        idx = {n: i for i, n in enumerate(net.nodes)}
        g = np.zeros((len(idx), len(idx)))
        for a, b, r in dev.spec.rc.edges_k_per_w:
            for x, y in ((a, b), (b, a)):
                if x != AMBIENT:
                    g[idx[x], idx[x]] += 1.0 / r
                    if y != AMBIENT:
                        g[idx[x], idx[y]] -= 1.0 / r
        p_node = dev.platform.node_power_w
        assert p_node.sum() == pytest.approx(dev.platform.total_power_w)
        expected = dev.spec.ambient_c + np.linalg.solve(g, p_node)
        assert net.temp_c == pytest.approx(expected, abs=1e-6)
        assert dev.platform.temp_c("big") > dev.spec.ambient_c + 5  # the load did heat it


PHONES = [n for n in CAT.devices if CAT.devices[n].kind == "phone"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PHONES), st.lists(st.floats(0.0, 6.0), min_size=12, max_size=12),
       st.lists(st.floats(0.0, 6.0), min_size=12, max_size=12), st.floats(0.0, 600.0), st.floats(0.01, 900.0))
def test_temperature_bounds_hold_over_the_whole_stretch(name, before_w, during_w, warm_s, dt_s):
    """`ThermalNetwork.range_c` bounds every node over [0, dt] for a held power, from any state;
    `rise_c` bounds what more power adds within dt, and at most its steady-state rise (what the
    fast-forward's quiet skips rely on)."""
    dev = device(CAT.device(name))
    net = dev.platform.thermal
    n = len(net.nodes)
    net.step(warm_s, before_w[:n])
    lo, hi = net.range_c(dt_s, during_w[:n])
    extra_w = before_w[:n]
    rise, rise_dt = net.rise_c(extra_w), net.rise_c(extra_w, dt_s)
    assert all(-1e-9 <= a <= b + 1e-9 for a, b in zip(rise_dt, rise))
    start = net.state
    for t in np.linspace(0.0, dt_s, 41):
        net.state = start
        net.step(t, during_w[:n])
        temps = net.temp_c
        assert all(a - 1e-9 <= x <= b + 1e-9 for a, x, b in zip(lo, temps, hi))
        # extra power raises every node by at most its rise within dt (and its steady-state rise)
        net.state = start
        net.step(t, [a + b for a, b in zip(during_w[:n], extra_w)])
        assert all(-1e-9 <= y - x <= r + 1e-9 for x, y, r in zip(temps, net.temp_c, rise_dt))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(PHONES), st.lists(st.floats(0.0, 6.0), min_size=12, max_size=12),
       st.lists(st.floats(0.0, 6.0), min_size=12, max_size=12), st.floats(0.0, 600.0), st.floats(0.01, 900.0))
def test_mean_temperature_over_a_held_stretch_is_the_time_average(name, before_w, during_w, warm_s, dt_s):
    """`ThermalNetwork.mean_c` (the fast-forward's leakage over a long step) is the time average
    of every node's temperature over [0, dt] at a held power: the heat balance integrated over
    the stretch, C (T(dt) - T(0)) = P dt - G (mean - ambient) dt, gives the same; and the mean
    lies within `range_c`'s bounds."""
    net = device(CAT.device(name)).platform.thermal
    n = len(net.nodes)
    net.step(warm_s, before_w[:n])
    t0 = net.temp_c.copy()
    mean = net.mean_c(dt_s, during_w[:n], range(n))
    lo, hi = net.range_c(dt_s, during_w[:n])
    net.step(dt_s, during_w[:n])
    heat_w = np.array(during_w[:n]) - net.capacity_j_per_k * (net.temp_c - t0) / dt_s
    balance = net.ambient_c + np.linalg.solve(net.conductance_w_per_k, heat_w)
    assert mean == pytest.approx(balance.tolist(), abs=1e-6)
    assert all(a - 1e-9 <= m <= b + 1e-9 for a, m, b in zip(lo, mean, hi))


@pytest.mark.parametrize("name", sorted(CAT.devices))
def test_ipa_power_estimate_rises_with_the_opp(name):
    """IPA's power_to_freq bisects the OPPs: its estimate must rise with frequency at any load
    and temperature, on every profile (energy-model tables included)."""
    spec = replace(CAT.device(name), thermal=replace(CAT.device(name).thermal, governor="power_allocator",
                                                   sustainable_power_mw=2000.0))
    dev = device(spec=spec)
    zone = dev.thermal
    for d, policy in enumerate(zone.policies):
        for load in (0.01, 0.5, 1.0, float(len(policy.cpus))):
            watts = [zone.domain_power_w(d, f, load) for f in policy.opps_mhz]
            assert all(a <= b for a, b in zip(watts, watts[1:]))
            for budget in (0.0, *watts, watts[-1] * 2):
                linear = next((f for f in reversed(policy.opps_mhz) if zone.domain_power_w(d, f, load) <= budget),
                              policy.opps_mhz[0])
                assert zone.power_to_freq_mhz(d, budget, load) == linear


class TestSchedutil:
    """PELT-like utilisation with a 32 ms half-life, 1.25x headroom, rounded up to an OPP."""

    def test_busy_core_goes_to_fmax_and_idle_domain_to_fmin(self):
        dev = device()
        dev.sched.spin(dev.sched.spawn("spin", [4]))
        dev.run(0.5)
        big, little = dev.cpufreq[1], dev.cpufreq[LITTLE]
        assert dev.platform.freq_mhz[1] == big.fmax_mhz
        assert dev.platform.freq_mhz[LITTLE] == little.fmin_mhz

    def test_domain_settles_at_fmin_after_the_load_stops(self):
        dev = device()
        t = dev.sched.spawn("spin", [5])
        dev.sched.spin(t)
        dev.run(0.5)
        dev.sched.stop(t)
        dev.run(1.5)
        assert dev.platform.freq_mhz[1] == dev.cpufreq[1].fmin_mhz
        assert dev.cpufreq[1].governor.util() == pytest.approx(2.0 ** (-1.0 / PELT_HALF_LIFE_S), abs=1e-12)

    def test_one_half_life_of_busy_gives_half_utilisation_and_its_opp(self):
        dev = device()
        dev.run(1.0)
        dev.sched.spin(dev.sched.spawn("spin", [6]))
        dev.run(1.0 + PELT_HALF_LIFE_S)
        gov = dev.cpufreq[1].governor
        assert gov.util() == pytest.approx(0.5, abs=1e-9)
        opps = dev.cpufreq[1].opps_mhz
        want = opp_at_or_above(opps, 0.625 * opps[-1])
        assert want >= 0.625 * opps[-1] and schedutil_freq_mhz(opps, 0.5, opps[-1]) == want
        # the governor sees the utilisation at the scheduler ticks: at a tick the clock is its OPP
        tick = math.ceil((1.0 + PELT_HALF_LIFE_S) / TICK_S) * TICK_S
        dev.run(tick + 1e-9)
        assert dev.platform.freq_mhz[1] == schedutil_freq_mhz(opps, gov.util(), opps[-1])
        assert dev.platform.freq_mhz[1] >= want

    def test_rate_limits_hold_and_it_does_not_tick(self):
        dev = device()
        changes = record_freqs(dev)
        t = dev.sched.spawn("bursty", [4])
        rng = np.random.default_rng(3)
        f_hz = dev.cpufreq[1].fmax_mhz * 1e6

        def app():
            while True:   # frame-like bursts: 2-12 ms of work every 16.7 ms
                yield dev.sched.run(t, rng.uniform(0.002, 0.012) * f_hz, (1.0, 1.0))
                yield dev.env.timeout(rng.uniform(0.004, 0.02))

        dev.env.process(app())
        dev.run(20.0)
        big = [(time, f) for time, k, f in changes if k == 1]
        assert len(big) > 10
        prev_t, prev_f = big[0]
        for time, f in big[1:]:
            limit = UP_RATE_LIMIT_S if f > prev_f else DOWN_RATE_LIMIT_S
            assert time - prev_t >= limit - 1e-9
            prev_t, prev_f = time, f

    def test_a_steady_load_costs_a_handful_of_evaluations(self):
        dev = device()
        dev.sched.spin(dev.sched.spawn("spin", [4]))
        dev.run(300.0)
        # ~one per OPP on the way up, then nothing until the thermal caps move
        assert dev.cpufreq[1].governor.n_evaluations < 100 + 2 * len(dev.thermal.cap_log)

    @settings(max_examples=200, deadline=None)
    @given(st.sampled_from([c for s in CAT.socs.values() for c in s.clusters]),
           st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
    def test_frequency_is_monotone_in_util_and_an_opp_under_the_cap(self, cluster, u1, u2, cap_frac):
        opps = cluster.opp_freq_mhz
        cap = opps[0] + cap_frac * (opps[-1] - opps[0])
        lo, hi = sorted((u1, u2))
        f_lo, f_hi = schedutil_freq_mhz(opps, lo, cap), schedutil_freq_mhz(opps, hi, cap)
        assert f_lo <= f_hi
        for f in (f_lo, f_hi):
            assert f in opps and (f <= cap + 1e-9 or f == opps[0])

    def test_performance_powersave_userspace(self):
        for gov, expect in (("performance", 2803.2), ("powersave", 300.0)):
            dev = device(governor=gov)
            dev.run(0.1)
            assert dev.platform.freq_mhz[1] == expect
        dev = device(governor="userspace", userspace_freq_mhz=(1000.0, 2000.0))
        dev.run(0.1)
        assert dev.platform.freq_mhz == [1056.0, 2092.8]   # lowest OPP at or above

    def test_bad_governor_fails_early(self):
        with pytest.raises(InputError, match="governor"):
            device(governor="ondemand")


def big_load_run(duration_s: float, spec=None) -> tuple[Device, list[tuple[float, float]]]:
    """Pixel 3, dense FP32 on the four big cores; the sensor temperature at every poll. The kernel's
    zone alone (no vendor thermal engine, tests/test_thermal_engine.py): these test its governors."""
    dev = device(spec, thermal_engine=False)
    SustainedGemm(dev, BIG, duration_s, 5e9)
    temps = []
    poll = dev.thermal.poll

    def recording_poll():
        poll()
        temps.append((dev.env.now, dev.thermal.temp_c))

    dev.thermal.poll = recording_poll
    dev.run(duration_s)
    return dev, temps


class TestStepWise:
    """One OPP step per poll; never a raised cap while above a trip and rising."""

    dev, temps = None, None

    @classmethod
    def setup_class(cls):
        cls.dev, cls.temps = big_load_run(600.0)

    def test_it_throttles_and_releases(self):
        log = self.dev.thermal.cap_log
        assert self.dev.thermal.first_throttle_s is not None
        assert any(c.new_mhz < c.old_mhz for c in log) and any(c.new_mhz > c.old_mhz for c in log)

    def test_never_raises_a_cap_while_above_the_trip_and_rising(self):
        trip_c = self.dev.spec.thermal.trips[0].temp_c
        raises = [c for c in self.dev.thermal.cap_log if c.new_mhz > c.old_mhz]
        assert raises
        for c in raises:
            assert not (c.temp_c >= trip_c and c.rising), c

    def test_one_opp_step_per_poll(self):
        for c in self.dev.thermal.cap_log:
            opps = next(p.opps_mhz for p in self.dev.cpufreq if p.name == c.domain)
            assert abs(opps.index(c.new_mhz) - opps.index(c.old_mhz)) == 1

    def test_polls_passive_while_mitigating(self):
        times = [t for t, _ in self.temps]
        gaps = np.diff(times)
        assert gaps.min() == pytest.approx(0.25) and gaps.max() == pytest.approx(1.0)
        assert self.dev.thermal.n_polls < 600.0 / 0.25 + 10


class TestPowerAllocator:
    """IPA holds the controlled node near its control temperature under sustained load."""

    def test_holds_within_3_c_of_control_after_settling(self):
        dev, temps = big_load_run(900.0, pixel3_with_ipa())
        control = dev.spec.thermal.control_c
        settled = [temp for t, temp in temps if t >= 600.0]
        assert settled and max(abs(temp - control) for temp in settled) <= 3.0
        assert dev.cpufreq[1].cap_mhz < dev.cpufreq[1].fmax_mhz   # it is really capping

    def test_config_and_profile_choose_the_governor(self):
        assert device(thermal_governor="power_allocator").thermal.name == "power_allocator"
        assert device().thermal.name == CAT.device("pixel3").thermal.governor
        with pytest.raises(InputError, match="thermal_governor"):
            device(thermal_governor="fair_share")

    def test_no_capping_below_switch_on(self):
        dev = device(pixel3_with_ipa())
        dev.sched.spin(dev.sched.spawn("one", [0]))
        dev.run(120.0)
        assert dev.thermal.temp_c < dev.spec.thermal.switch_on_c
        assert dev.thermal.cap_log == [] and dev.thermal.budget_w is None

    def test_divvy_up_power_is_proportional_and_redistributes(self):
        assert divvy_up_power([1.0, 3.0], [10.0, 10.0], 2.0) == pytest.approx([0.5, 1.5])
        # the second actor is capped at 1 W: its excess goes to the first, by its headroom
        g = divvy_up_power([1.0, 3.0], [10.0, 1.0], 4.0)
        assert g == pytest.approx([3.0, 1.0])
        assert divvy_up_power([0.0, 0.0], [1.0, 1.0], 1.0) == [0.0, 0.0]


class TestStatus:
    """Android thermal status from the skin (Pixel thermal HAL thresholds) and CPU trips."""

    def test_levels_and_hysteresis(self):
        m = StatusMonitor()
        assert m.update(30.0, False, False) == ThermalStatus.NONE
        assert m.update(44.0, False, False) == ThermalStatus.MODERATE
        assert m.update(42.0, False, False) == ThermalStatus.MODERATE   # within 1.9 C hysteresis
        assert m.update(41.0, False, False) == ThermalStatus.LIGHT
        assert m.update(60.0, False, False) == ThermalStatus.SHUTDOWN
        assert m.update(30.0, True, False) == ThermalStatus.EMERGENCY
        assert m.update(30.0, False, True) == ThermalStatus.SHUTDOWN

    def test_device_reports_status_and_battery_temperature(self):
        dev = device()
        dev.run(1.0)
        assert dev.thermal_status == ThermalStatus.NONE
        assert dev.battery_temp_c == dev.platform.temp_c("battery")


class TestBattery:
    """Platform energy = energy drawn from the battery + energy from the charger, exactly."""

    @staticmethod
    def churn(dev: Device, seed: int = 1):
        rng = np.random.default_rng(seed)
        for cpu in (0, 4, 5):
            t = dev.sched.spawn(f"w{cpu}", [cpu])

            def work(t=t):
                while True:
                    yield dev.sched.run(t, rng.uniform(1e8, 3e9), (8.0, 8.0), rng.uniform(0, 2))
                    yield dev.env.timeout(rng.uniform(0, 0.5))

            dev.env.process(work())

    def check(self, dev: Device) -> None:
        b = dev.battery
        e = dev.platform.total_energy_j
        assert e == pytest.approx(b.drawn_j + b.charger_j, rel=1e-9)
        assert math.fsum(dev.platform.energy_j) == pytest.approx(e, rel=1e-12)

    def test_discharging(self):
        dev = device(initial_soc_pct=80.0)
        self.churn(dev)
        dev.run(120.0)
        self.check(dev)
        b = dev.battery
        assert b.charger_j == 0.0
        assert b.energy_j == pytest.approx(0.8 * b.capacity_j - dev.platform.total_energy_j, rel=1e-12)

    def test_charging_to_full_then_unplugged(self):
        dev = device(initial_soc_pct=99.95, charging=True, charger_power_w=10.0)
        self.churn(dev)
        dev.run(60.0)
        b = dev.battery
        assert b.full and b.full_s is not None and b.soc_pct == pytest.approx(100.0)
        self.check(dev)
        dev.set_charging(False)
        dev.run(120.0)
        self.check(dev)
        assert b.soc_pct < 100.0
        loss = dict(zip(dev.platform.component_names, dev.platform.energy_j))["charging_loss"]
        assert loss > 0.0

    def test_charging_loss_heats_the_battery(self):
        plugged, unplugged = device(initial_soc_pct=20.0, charging=True), device(initial_soc_pct=20.0)
        for d in (plugged, unplugged):
            d.run(600.0)
        self.check(plugged)
        assert plugged.battery_temp_c > unplugged.battery_temp_c + 1.0
        assert plugged.soc_pct > 20.0 > unplugged.soc_pct

    def test_the_charge_tapers_in_its_constant_voltage_phase(self):
        """Constant current to CV_START_PCT: the charger's whole power, a tenth of it lost.
        Above, the cell takes efficiency x power x taper and the charger its load besides, with
        a tenth of that input lost; the account stays exact."""
        from swansim.hw.battery import CHARGING_EFFICIENCY as eta, CV_END_FRACTION, CV_START_PCT, CV_STEPS, cv_taper

        assert cv_taper(0.0) == cv_taper(CV_START_PCT) == 1.0 and cv_taper(100.0) == pytest.approx(CV_END_FRACTION)
        steps = [cv_taper(CV_START_PCT + 30.0 * i / 300) for i in range(301)]
        assert all(a >= b for a, b in zip(steps, steps[1:])) and len(set(steps)) == CV_STEPS + 1
        for soc in (50.0, 85.0, 96.0):
            dev = device(initial_soc_pct=soc, charging=True, charger_power_w=10.0)
            self.churn(dev)
            dev.run(20.0)
            self.check(dev)
            b = dev.battery
            power = dev.platform.power_w
            loss_w = dict(zip(dev.platform.component_names, power))["charging_loss"]
            load_w = float(power.sum()) - loss_w
            taper = cv_taper(b.soc_pct)
            want = min(1.0, (1.0 - eta) * (load_w / eta + 10.0 * taper))
            assert loss_w == pytest.approx(want, rel=1e-9)
            assert (loss_w == pytest.approx(1.0, rel=1e-12)) == (soc < CV_START_PCT)
        slow, flat = device(initial_soc_pct=90.0, charging=True), device(initial_soc_pct=60.0, charging=True)
        for d in (slow, flat):
            d.run(120.0)
        # above 70% the cell takes a tapered share; below it what the whole charger leaves
        assert slow.soc_pct - 90.0 < 0.5 * (flat.soc_pct - 60.0)

    @pytest.mark.parametrize("soc", [69.9, 78.95, 99.5])
    def test_the_chargers_loss_holds_at_least_as_long_as_it_says(self, soc):
        """`Battery.loss_steady_for_s` is a lower bound on when the charger's loss next steps
        (the taper's next step, or the cell full), under a load that changes."""
        dev = device(initial_soc_pct=soc, charging=True, charger_power_w=10.0)
        self.churn(dev)
        b = dev.battery
        promised_s, taper, t = b.loss_steady_for_s(dev.platform.total_power_w), b._taper, 0.0
        assert 0.0 < promised_s < math.inf
        while b._taper == taper and not b.full:
            t += 0.25
            dev.run(t)
        assert t >= promised_s

    def test_boards_have_no_battery(self):
        board = next((n for n, d in CAT.devices.items() if d.kind == "board"), None)
        if board is None:
            pytest.skip("no board profile in the catalogue")
        dev = device(CAT.device(board))
        dev.run(1.0)
        assert dev.battery is None and dev.battery_temp_c is None and dev.soc_pct is None
