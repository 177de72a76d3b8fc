"""The vendor thermal engine: levels with hysteresis, caps by threshold, the lower of two limits."""
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swansim.device import Device, DeviceConfig
from swansim.errors import InputError
from swansim.hw.profile import EngineRule, ThermalEngineSpec, load_device
from swansim.kernel.cpufreq import ENGINE, KERNEL
from swansim.kernel.thermal_engine import step_level
from swansim.runs.thermal import first_throttle_s, run_one
from swansim.session.workloads import SustainedGemm

from conftest import CAT, PIXEL3



@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(20, 70), min_size=1, max_size=40),
       st.lists(st.floats(25, 60), min_size=1, max_size=5, unique=True), st.floats(0.1, 5))
def test_levels_rise_at_thresholds_and_fall_only_at_clear_values(temps, thr, hyst):
    thr = sorted(thr)
    clr = [t - hyst for t in thr]
    level = 0
    for t in temps:
        new = step_level(level, t, thr, clr)
        reached = sum(1 for x in thr if t >= x)
        assert reached <= new <= max(level, reached)   # every threshold reached, nothing above
        if new < level:    # a level is left only at or below its clear value
            assert all(t <= clr[i] for i in range(new, level))
        if new > reached:  # held above what the reading reaches: not yet down to its clear value
            assert t > clr[new - 1]
        level = new


def test_hysteresis_on_one_level():
    assert step_level(0, 38.9, [39.0], [38.0]) == 0
    assert step_level(0, 39.0, [39.0], [38.0]) == 1
    assert step_level(1, 38.5, [39.0], [38.0]) == 1     # between clear and threshold: held
    assert step_level(1, 38.0, [39.0], [38.0]) == 0
    assert step_level(0, 48.0, [45.0, 47.0], [43.0, 45.0]) == 2
    assert step_level(2, 44.0, [45.0, 47.0], [43.0, 45.0]) == 1


@pytest.fixture(scope="module")
def pixel3_hot():
    """Pixel 3, the four big cores fully busy for 30 simulated minutes."""
    dev = Device(PIXEL3)
    SustainedGemm(dev, list(PIXEL3.soc.big_cpus), 1800.0, 5e9)
    dev.run(1800.0)
    return dev


def test_pixel3_caps_follow_the_configs_thresholds(pixel3_hot):
    dev = pixel3_hot
    engine = dev.thermal_engine
    spec = PIXEL3.thermal_engine
    assert engine is not None and engine.level_log
    for t, i, sensor, temp, old, new in engine.level_log:
        rule = spec.rules[i]
        if new > old:
            assert temp >= rule.thresholds_c[new - 1]
        else:
            assert temp <= rule.clear_c[old - 1]
    ups = [(t, spec.rules[i].caps_mhz[new - 1]) for t, i, _, _, old, new in engine.level_log
           if new > old and spec.rules[i].cluster == "big"]
    # the SS set points in order: 1996.8 MHz from 39 C, then 1689.6 MHz from 41 C
    assert [c for _, c in ups][:2] == [1996.8, 1689.6]
    assert ups[0][0] < ups[1][0]
    engine_caps = [c for c in dev.thermal.cap_log if c.party == ENGINE]
    assert engine_caps and all(c.domain == "big" for c in engine_caps)
    assert first_throttle_s(dev, list(PIXEL3.soc.big_cpus), ENGINE) == engine_caps[0].time_s


def test_the_lower_of_kernel_and_engine_limits_applies(pixel3_hot):
    dev = pixel3_hot
    for p in dev.cpufreq:
        assert p.cap_mhz == min(p.limit_mhz(KERNEL), p.limit_mhz(ENGINE))
        assert p.cur_mhz <= p.cap_mhz
    big = dev.cpufreq[1]
    big.set_limit(KERNEL, 1500.0)
    assert big.cap_mhz == 1459.2 and big.cur_mhz <= 1459.2   # the OPP at or below the lower limit
    big.set_limit(KERNEL, big.fmax_mhz)
    assert big.cap_mhz == big.limit_mhz(ENGINE)


def test_the_engine_is_optional_and_off_with_the_kernel_governor_off():
    assert Device(PIXEL3, DeviceConfig(thermal_engine=False)).thermal_engine is None
    assert Device(PIXEL3, DeviceConfig(thermal_governor="off")).thermal_engine is None
    assert Device(CAT.device("pixel6")).thermal_engine is None   # no table


def test_energy_stays_the_integral_of_power_while_the_engine_caps():
    """Caps moving by the engine's sampling change nothing in how energy is integrated."""
    spec = replace(PIXEL3, ambient_c=38.0)   # the skin passes 39 C within minutes
    dev = Device(spec)
    samples = []
    dev.platform.probes.append(lambda t0, t1, p: samples.append((t1 - t0) * p.total_power_w))
    SustainedGemm(dev, list(PIXEL3.soc.big_cpus), 400.0, 5e9)
    dev.run(400.0)
    assert any(c.party == ENGINE for c in dev.thermal.cap_log)
    assert dev.platform.total_energy_j == pytest.approx(math.fsum(samples), rel=1e-9)
    assert dev.platform.total_energy_j == pytest.approx(dev.platform.energy_j.sum(), rel=1e-12)


def test_the_engine_lowers_sustained_throughput_and_the_skin():
    base, without = run_one(PIXEL3, "big", 1200.0, 5.0, thermal_engine=False)
    df, with_engine = run_one(PIXEL3, "big", 1200.0, 5.0)
    assert with_engine["first_engine_cap_s"] is not None and without["first_engine_cap_s"] is None
    assert with_engine["sustained_gflops"] < without["sustained_gflops"]
    assert with_engine["steady_skin_c"] < without["steady_skin_c"]
    assert (df["cap_big_mhz"] <= df["limit_engine_big_mhz"]).all()
    assert (df["cap_big_mhz"] <= df["limit_kernel_big_mhz"]).all()


ENGINE_TOML = '''
[thermal_engine]

[[thermal_engine.rules]]
sensor = "skin"
cluster = "big"
sampling_ms = 1000
thresholds_c = [40, 45]
clear_c = [38, 43]
caps_mhz = [1996.8, 1056]

[thermal_engine.rules.sources]
sampling_ms = "assumption: test"
thresholds_c = "assumption: test"
clear_c = "assumption: test"
caps_mhz = "assumption: test"
'''


def phone_with(tmp_path: Path, engine: str) -> Path:
    p = tmp_path / "p.toml"
    p.write_text((Path(PIXEL3.path).read_text().split("# The vendor's user-space thermal engine")[0]) + engine)
    return p


def test_a_profile_engine_table_loads(tmp_path):
    spec = load_device(phone_with(tmp_path, ENGINE_TOML), CAT.socs).thermal_engine
    assert spec == ThermalEngineSpec((EngineRule("skin", "big", 1000.0, (40.0, 45.0), (38.0, 43.0), (1996.8, 1056.0)),))


@pytest.mark.parametrize("old, new, field", [
    ("clear_c = [38, 43]", "clear_c = [38, 46]", "clear_c[1]"),                # not below its threshold
    ("caps_mhz = [1996.8, 1056]", "caps_mhz = [1056, 1996.8]", "caps_mhz[1]"),  # hotter allows more
    ('sensor = "skin"', 'sensor = "case"', "sensor"),                          # no such sensor
    ('cluster = "big"', 'cluster = "prime"', "cluster"),                       # no such cluster
    ("caps_mhz = [1996.8, 1056]", "caps_mhz = [1996.8]", "caps_mhz"),          # one per threshold
    ('caps_mhz = "assumption: test"', "", "sources.caps_mhz"),                 # unsourced
    ("sampling_ms = 1000", "sampling_ms = 0", "sampling_ms"),
])
def test_bad_engine_tables_fail_with_file_and_field(tmp_path, old, new, field):
    path = phone_with(tmp_path, ENGINE_TOML.replace(old, new, 1))
    with pytest.raises(InputError) as e:
        load_device(path, CAT.socs)
    assert str(path) in str(e.value) and f"thermal_engine.rules[0].{field}" in str(e.value)
