"""Device profiles: every shipped profile loads, and malformed ones fail with a useful InputError."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from swansim.errors import InputError
from swansim.hw.profile import PROFILE_DIR, Catalogue, load_device, load_soc, validate_paths

SOC_DIR = PROFILE_DIR / "socs"
PHONE_DIR = PROFILE_DIR / "phones"
SDM845 = (SOC_DIR / "sdm845.toml").read_text()
PIXEL3 = (PHONE_DIR / "pixel3.toml").read_text()


@pytest.fixture(scope="module")
def cat() -> Catalogue:
    return Catalogue.load()


# ---------------------------------------------------------------------------------------------
# The shipped catalogue


def test_all_profiles_load(cat):
    assert len(cat.socs) >= 11
    assert len(cat.devices) >= 7
    assert "generic-phone" in cat.devices
    for name in ("sdm845", "sm8150", "sm8250", "sm8350", "gs101", "mt8183", "msm8998", "kirin970",
                 "sm8550", "dimensity9300", "rk3588"):
        assert name in cat.socs, name
    for name in ("pixel3", "galaxy-s10e", "galaxy-tab-s6", "oneplus8", "mi10", "pixel6", "rk3588-board"):
        assert name in cat.devices, name


def test_every_file_is_in_the_catalogue(cat):
    names = validate_paths(sorted(SOC_DIR.glob("*.toml")) + sorted(PHONE_DIR.glob("*.toml")))
    assert sorted(names) == sorted(list(cat.socs) + list(cat.devices))


def test_opp_tables_strictly_increasing(cat):
    for soc in cat.socs.values():
        assert soc.n_cpus == 8, soc.name
        for c in soc.clusters:
            f = c.opp_freq_mhz
            assert len(f) >= 2, (soc.name, c.name)
            assert all(b > a for a, b in zip(f, f[1:])), (soc.name, c.name)
            v = c.opp_voltage_mv
            assert len(v) == len(f) and all(b >= a for a, b in zip(v, v[1:])), (soc.name, c.name)
            assert c.vector_flop_per_cycle == c.gemm_flop_per_cycle / 2, (soc.name, c.name)


def test_gs101_x1_power_from_profile(cat):
    x1 = next(c for c in cat.socs["gs101"].clusters if c.uarch == "cortex-x1")
    assert x1.fmax_mhz == 2802
    v = x1.voltage_v(2802)
    assert v == pytest.approx(1.05625)
    assert x1.dyn_power_coeff_uw_mhz_v2 == 650
    assert x1.power_table_mw is None  # only the vendor table's endpoints are known: not invented
    watts = x1.dyn_power_coeff_uw_mhz_v2 * v ** 2 * 2802 / 1e6   # C*V^2*f in uW -> W
    assert watts == pytest.approx(2.03, abs=0.005)


def test_cluster_layouts(cat):
    s = cat.socs
    assert [c.cpus for c in s["sm8150"].clusters] == [(0, 1, 2, 3), (4, 5, 6), (7,)]
    assert [c.cpus for c in s["sm8250"].clusters] == [(0, 1, 2, 3), (4, 5, 6), (7,)]
    assert [c.uarch for c in s["sm8350"].clusters] == ["cortex-a55", "cortex-a78", "cortex-x1"]
    # SD 8 Gen 2: little first; the A715 and A710 pairs share one frequency domain in the tree.
    assert [c.cpus for c in s["sm8550"].clusters] == [(0, 1, 2), (3, 4, 5, 6), (7,)]
    # Dimensity 9300: no little cores at all.
    assert all("a55" not in c.uarch and "a510" not in c.uarch for c in s["dimensity9300"].clusters)
    # RK3588: the four A76 cores are two frequency domains of two.
    assert [c.cpus for c in s["rk3588"].clusters] == [(0, 1, 2, 3), (4, 5), (6, 7)]


def test_every_soc_has_rc_nodes_for_its_clusters(cat):
    for soc in cat.socs.values():
        for name in [c.name for c in soc.clusters] + ["soc"]:
            assert name in soc.rc.capacity_j_per_k, (soc.name, name)


def test_devices(cat):
    d = cat.devices
    assert d["galaxy-tab-s6"].kind == "tablet"
    assert d["galaxy-tab-s6"].thermal.sustainable_power_mw > d["galaxy-s10e"].thermal.sustainable_power_mw
    assert d["galaxy-tab-s6"].battery_capacity_mah > d["galaxy-s10e"].battery_capacity_mah
    assert d["oneplus8"].display_refresh_hz == 90 and d["mi10"].display_refresh_hz == 90
    assert d["pixel6"].display_refresh_hz == 90
    assert d["pixel6"].thermal.governor == "power_allocator"
    board = d["rk3588-board"]
    assert board.kind == "board" and board.battery_capacity_mah is None
    assert "battery" not in board.rc.capacity_j_per_k
    for dev in d.values():
        assert set(dev.cpusets["top_app"]) == set(range(dev.soc.n_cpus)), dev.name
        # background work stays on (part of) the smallest cluster
        assert set(dev.cpusets["background"]) <= set(dev.soc.little.cpus), dev.name


def test_bare_soc_in_generic_chassis(cat):
    dev = cat.device("sm8250")
    assert dev.soc.name == "sm8250"
    assert dev.name == "sm8250"
    assert dev.path.name == "generic-phone.toml"
    assert "generic" in dev.title
    assert dev.battery_capacity_mah == cat.devices["generic-phone"].battery_capacity_mah
    assert dev.cpusets["background"] == (0, 1, 2, 3)
    # a SoC without little cores: background goes to its smallest cluster
    assert cat.device("dimensity9300").cpusets["background"] == (0, 1, 2, 3)


def test_unknown_device_name(cat):
    with pytest.raises(InputError) as e:
        cat.device("nokia3310", "--device")
    assert (e.value.where, e.value.field) == ("--device", "'nokia3310'") and "unknown profile" in e.value.reason
    with pytest.raises(InputError, match="did you mean 'pixel3'"):
        cat.device("pixle3")


def test_no_machine_paths_in_profiles():
    for p in list(SOC_DIR.glob("*.toml")) + list(PHONE_DIR.glob("*.toml")):
        text = p.read_text()
        assert "../" not in text, p.name  # figures are transcribed, never pointed to outside the repo


# ---------------------------------------------------------------------------------------------
# Malformed files: each names the file and the field


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _sub(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, f"fixture drifted: {old!r} not in the base profile"
    return text.replace(old, new, count)


def _expect(exc: pytest.ExceptionInfo, path: Path, field: str) -> None:
    msg = str(exc.value)
    assert str(path) in msg, msg
    assert field in msg, msg
    assert exc.value.field == field, exc.value.field


SOC_CASES = {
    "cluster-without-opp-table": (
        lambda t: re.sub(r"(?m)^opp_freq_mhz = .*\n", "", t, count=1),
        "clusters[0].opp_freq_mhz"),
    "missing-field": (lambda t: _sub(t, "l3_kib = 2048\n", ""), "l3_kib"),
    "khz-instead-of-mhz": (lambda t: _sub(t, "opp_freq_mhz = [300, 403.2,", "opp_freq_mhz = [300000, 403200,"),
                           "clusters[0].opp_freq_mhz[0]"),
    "non-monotonic-opp": (lambda t: _sub(t, "[300, 403.2, 480, 576,", "[300, 480, 403.2, 576,"),
                          "clusters[0].opp_freq_mhz[2]"),
    "negative-power": (lambda t: _sub(t, "cluster_active_mw = 20", "cluster_active_mw = -20"),
                       "clusters[0].cluster_active_mw"),
    "negative-leakage": (lambda t: _sub(t, "leakage_mw_per_core = 19", "leakage_mw_per_core = -19"),
                         "clusters[1].leakage_mw_per_core"),
    "figure-without-source": (
        lambda t: re.sub(r'(?m)^capacity_dmips_mhz = "\[DT\].*\n', "", t, count=1),
        "clusters[0].sources.capacity_dmips_mhz"),
    "soc-figure-without-source": (lambda t: re.sub(r'(?m)^dram_bandwidth_gbps = "LPDDR.*\n', "", t, count=1),
                                  "sources.dram_bandwidth_gbps"),
    "rc-edge-without-source": (lambda t: re.sub(r'(?m)^"edges_k_per_w.big-soc" = .*\n', "", t, count=1),
                               "thermal_rc.sources.edges_k_per_w.big-soc"),
    "bad-toml": (lambda t: t + "\nthis is = = not toml\n", "<syntax>"),
    "voltage-count": (lambda t: _sub(t, "opp_voltage_mv = [537.5, 562.5,", "opp_voltage_mv = [562.5,"),
                      "clusters[0].opp_voltage_mv"),
    # an optional field misspelt would silently keep its default: refused, naming the nearest key
    "misspelt-optional-field": (lambda t: _sub(t, "l3_kib = 2048\n", "l3_kib = 2048\ndram_latancy_ns = 500\n"),
                                "dram_latancy_ns"),
    "misspelt-required-field": (lambda t: _sub(t, "cluster_active_mw = 20", "cluster_actve_mw = 20"),
                                "clusters[0].cluster_active_mw"),
    "source-for-unknown-field": (lambda t: t.replace('dram_bandwidth_gbps = "LPDDR',
                                                     'dram_latancy_ns = "assumption: x"\ndram_bandwidth_gbps = "LPDDR', 1),
                                 "sources.dram_latancy_ns"),
}


@pytest.mark.parametrize("case", sorted(SOC_CASES))
def test_malformed_soc(tmp_path, case):
    mutate, field = SOC_CASES[case]
    path = _write(tmp_path, f"{case}.toml", mutate(SDM845))
    with pytest.raises(InputError) as exc:
        load_soc(path)
    _expect(exc, path, field)


def test_unknown_field_names_the_nearest_known_one(tmp_path):
    path = _write(tmp_path, "typo.toml", SDM845.replace("l3_kib = 2048\n", "l3_kib = 2048\ndram_latancy_ns = 500\n"))
    with pytest.raises(InputError, match="unknown field .did you mean 'dram_latency_ns'"):
        load_soc(path)
    path = _write(tmp_path, "typo2.toml", SDM845.replace("l3_kib = 2048\n", "l3_kb = 2048\n"))
    with pytest.raises(InputError, match="missing required field .is 'l3_kb' it, misspelt"):
        load_soc(path)


@pytest.mark.parametrize("content, reason", [(None, "is a directory"), (b"\x00\xff\xfe binary", "not UTF-8")])
def test_a_directory_or_a_binary_file_is_an_input_error(tmp_path, content, reason):
    path = tmp_path / "x.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(InputError, match=reason) as exc:
        validate_paths([path])
    assert exc.value.where == str(path)


def test_a_root_without_profiles_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such directory") as exc:
        Catalogue.load(tmp_path / "nowhere")
    assert exc.value.where == str(tmp_path / "nowhere")


def test_malformed_soc_via_validate_paths(tmp_path):
    path = _write(tmp_path, "bad.toml", SDM845.replace("l3_kib = 2048\n", ""))
    with pytest.raises(InputError) as exc:
        validate_paths([path])
    _expect(exc, path, "l3_kib")


DEVICE_CASES = {
    "unknown-soc": (lambda t: _sub(t, 'soc = "sdm845"', 'soc = "sm9999"'), "soc"),
    "missing-battery": (lambda t: _sub(t, "battery_capacity_mah = 2915\n", ""), "battery_capacity_mah"),
    "negative-power": (lambda t: _sub(t, "base_power_mw = 250", "base_power_mw = -250"), "base_power_mw"),
    "figure-without-source": (lambda t: re.sub(r"(?m)^screen_power_mw = \"assumption.*\n", "", t, count=1),
                              "sources.screen_power_mw"),
    "cpu-out-of-range": (lambda t: _sub(t, "\nbackground = [0, 1]\n", "\nbackground = [0, 9]\n"),
                         "cpusets.background"),
    "rc-unknown-node": (lambda t: _sub(_sub(t, '["board", "skin", 2.0]', '["board", "case", 2.0]'),
                                       '"edges_k_per_w.board-skin"', '"edges_k_per_w.board-case"'),
                        "thermal_rc.edges_k_per_w"),
    "bad-toml": (lambda t: t.replace("[cpusets]", "[cpusets"), "<syntax>"),
}


@pytest.mark.parametrize("case", sorted(DEVICE_CASES))
def test_malformed_device(tmp_path, cat, case):
    mutate, field = DEVICE_CASES[case]
    path = _write(tmp_path, f"{case}.toml", mutate(PIXEL3))
    with pytest.raises(InputError) as exc:
        load_device(path, cat.socs)
    _expect(exc, path, field)


def test_board_needs_no_battery(tmp_path, cat):
    text = PIXEL3.replace('kind = "phone"', 'kind = "board"').replace("battery_capacity_mah = 2915\n", "")
    text = text.replace("battery_voltage_v = 3.85\n", "")
    text = text.replace('["board", "battery", 2.0], ', "").replace('["battery", "skin", 5.0], ', "")
    text = re.sub(r"(?m)^battery = 45.0\n", "", text)
    dev = load_device(_write(tmp_path, "board.toml", text), cat.socs)
    assert dev.kind == "board" and dev.battery_capacity_j is None


def test_thermal_override_replaces_trips(tmp_path, cat):
    text = PIXEL3 + (
        "\n[thermal]\ntrip_c = [80, 100]\ntrip_types = [\"passive\", \"critical\"]\n"
        "trip_hysteresis_c = [1, 1]\nsustainable_power_mw = 3000\n\n[thermal.sources]\n"
        "trip_c = \"assumption: test\"\ntrip_hysteresis_c = \"assumption: test\"\n"
        "sustainable_power_mw = \"assumption: test\"\n")
    dev = load_device(_write(tmp_path, "override.toml", text), cat.socs)
    assert [tp.temp_c for tp in dev.thermal.trips] == [80, 100]
    assert dev.thermal.sustainable_power_mw == 3000
    assert dev.thermal.polling_passive_ms == dev.soc.thermal.polling_passive_ms   # inherited


def test_thermal_override_needs_sources(tmp_path, cat):
    path = _write(tmp_path, "override.toml", PIXEL3 + "\n[thermal]\nsustainable_power_mw = 3000\n")
    with pytest.raises(InputError) as exc:
        load_device(path, cat.socs)
    _expect(exc, path, "thermal.sources.sustainable_power_mw")


def test_a_cluster_reads_as_a_slice_only_where_its_cores_are_numbered_in_a_row():
    import dataclasses

    from swansim.hw.profile import Catalogue
    big = Catalogue.load().socs["sdm845"].clusters[1]
    assert big.cpu_slice == slice(4, 8) and list(range(8))[big.cpu_slice] == list(big.cpus)
    assert dataclasses.replace(big, cpus=(4, 6)).cpu_slice is None
