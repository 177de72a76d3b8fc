"""Foreground-app traces: schema and validation, the synthetic generator, the importers."""
from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swansim.apps.importers import load_fedscale, load_flash, write_fedscale
from swansim.apps.synth import SessionLengths, SynthParams, params_table, synth_to_dir, synthesize
from swansim.apps.traces import (CATEGORIES, DAY_S, DeviceState, Session, Trace, load_sessions, load_states,
                                 load_trace, write_sessions, write_trace)
from swansim.errors import InputError

TRACES_DIR = Path(__file__).resolve().parents[1] / "traces"
LSAPP_SESSIONS_PER_DAY = 17.0
LSAPP_MEDIAN_S = 106.0  # 1:46
LSAPP_MEAN_S = 326.0  # 5:26


@pytest.fixture(scope="module")
def month() -> Trace:
    return synthesize(users=100, days=30, seed=1)


def _session_gaps_ok(trace: Trace, gap_s: float) -> bool:
    for u in trace.users:
        s = trace.sessions_of(u)
        for a, b in zip(s, s[1:]):
            if b.start_s < a.end_s + gap_s - 1e-6:
                return False
    return True


# ---------------------------------------------------------------- generator: statistics


def test_generator_hits_published_sessions_per_day(month):
    assert month.sessions_per_day() == pytest.approx(LSAPP_SESSIONS_PER_DAY, rel=0.10)
    per_user = [month.sessions_per_day(u) for u in month.users]
    # Soikkeli's 3-46 range bounds the users' rates; daily counts add Poisson noise.
    assert min(per_user) >= 3 * 0.8 and max(per_user) <= 46 * 1.1


def test_generator_hits_published_session_lengths(month):
    assert month.median_session_s() == pytest.approx(LSAPP_MEDIAN_S, rel=0.10)
    assert month.mean_session_s() == pytest.approx(LSAPP_MEAN_S, rel=0.10)


def test_sessions_never_overlap_and_keep_the_session_gap(month):
    assert _session_gaps_ok(month, SynthParams().session_gap_min_s)


def test_screen_is_on_exactly_during_sessions(month):
    for u in month.users[:10]:
        for s in month.sessions_of(u):
            assert month.state_at(u, s.start_s + s.duration_s / 2).screen_on
            assert not month.state_at(u, s.end_s + 1.0).screen_on


def test_phones_charge_nearly_every_day_and_mostly_at_night(month):
    night = available = 0.0
    for u in month.users:
        for a, b in month.availability_windows(u):
            available += b - a
            for day in range(int(month.days) + 1):  # overlap with 00:00-06:00 of each day
                night += max(0.0, min(b, day * DAY_S + 6 * 3600) - max(a, day * DAY_S))
    assert night / available > 0.5  # a quarter of the day holds most of the availability
    charging_days = {(u, int(s.time_s // DAY_S)) for u in month.users for s in month.states_of(u) if s.charging}
    assert len(charging_days) / (len(month.users) * month.days) > 0.9


# ---------------------------------------------------------------- generator: determinism


def test_same_seed_gives_identical_trace_and_files(tmp_path):
    assert synthesize(5, 3, seed=7) == synthesize(5, 3, seed=7)
    assert synthesize(5, 3, seed=7) != synthesize(5, 3, seed=8)
    synth_to_dir(tmp_path / "a", 4, 2, 3)
    synth_to_dir(tmp_path / "b", 4, 2, 3)
    for name in ("sessions.csv", "states.csv", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_adding_users_leaves_existing_users_unchanged():
    small, large = synthesize(3, 2, seed=5), synthesize(6, 2, seed=5)
    for u in small.users:
        assert small.sessions_of(u) == large.sessions_of(u)
        assert small.states_of(u) == large.states_of(u)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(users=st.integers(1, 3), days=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_any_generated_trace_is_valid_and_round_trips(tmp_path, users, days, seed):
    trace = synthesize(users, days, seed)
    assert _session_gaps_ok(trace, SynthParams().session_gap_min_s)
    for u in trace.users:
        assert all(0 <= s.start_s and s.end_s <= trace.duration_s for s in trace.sessions_of(u))
        times = [s.time_s for s in trace.states_of(u)]
        assert times[0] == 0.0 and times == sorted(set(times)) and times[-1] < trace.duration_s
        assert all(0 <= s.battery_pct <= 100 for s in trace.states_of(u))
        windows = trace.availability_windows(u)
        assert all(0 <= a < b <= trace.duration_s for a, b in windows)
        assert all(w1[1] < w2[0] for w1, w2 in zip(windows, windows[1:]))  # merged, disjoint
    out = tmp_path / f"t{users}-{days}-{seed}"
    write_trace(trace, out)
    assert load_trace(out) == trace  # the loader's validation accepts it, and nothing is lost


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200))
def test_session_lengths_stay_in_bounds(seed, n):
    p = SynthParams()
    x = SessionLengths(p).sample(np.random.default_rng(seed), n)
    assert x.shape == (n,) and np.all((x >= p.session_min_s) & (x <= p.session_max_s))


def test_params_are_validated():
    with pytest.raises(InputError, match="session_tail_prob"):
        SynthParams(session_tail_prob=1.5)
    with pytest.raises(InputError, match="hourly_activity"):
        SynthParams(hourly_activity=(1.0,) * 23)
    with pytest.raises(InputError, match="tiktok"):
        SynthParams(category_mix=(("tiktok", 1.0),))


def test_cli_arguments_are_checked(tmp_path):
    with pytest.raises(InputError) as e:
        synth_to_dir(tmp_path, users=0, days=2, seed=1)
    assert (e.value.where, e.value.field) == ("--users", "0")
    with pytest.raises(InputError) as e:
        synth_to_dir(tmp_path, users=2, days=2, seed=-1)
    assert (e.value.where, e.value.field) == ("--seed", "-1")
    with pytest.raises(InputError, match="user-days"):
        synth_to_dir(tmp_path, users=10_000, days=365, seed=1)
    with pytest.raises(InputError) as e:
        synthesize(0, 2, 1)
    assert e.value.where == "config"


def test_manifest_records_generator_seed_and_params(tmp_path):
    synth_to_dir(tmp_path, 2, 1, seed=11)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 11 and manifest["days"] == 1 and manifest["users"] == 2
    assert manifest["duration_s"] == DAY_S and manifest["swansim_version"]
    assert manifest["params"]["sessions_per_day_mean"] == SynthParams().sessions_per_day_mean


# ---------------------------------------------------------------- docs and shipped examples


def test_readme_parameter_table_matches_the_code():
    readme = (TRACES_DIR / "README.md").read_text()
    for row in params_table().splitlines():
        assert row in readme, f"traces/README.md is out of date: {row}"


def test_shipped_examples_are_small_and_regenerate():
    examples = TRACES_DIR / "examples"
    assert sum(f.stat().st_size for f in examples.iterdir()) < 200_000
    assert load_trace(examples) == synthesize(users=3, days=2, seed=1)


# ---------------------------------------------------------------- schema and validation

SESSIONS = """user_id,start_s,duration_s,app_category,load_scale
u1,0,60,messaging,
u1,100,30.5,video,1.5
u2,50,10,game3d,1
"""
STATES = """user_id,time_s,screen_on,charging,battery_pct,network
u1,0,0,1,80,wifi
u1,3600,1,0,75.5,cellular
u2,10,0,0,100,none
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_valid_tables_load(tmp_path):
    sessions = load_sessions(_write(tmp_path, "s.csv", SESSIONS))
    assert sessions["u1"] == (Session("u1", 0.0, 60.0, "messaging", 1.0), Session("u1", 100.0, 30.5, "video", 1.5))
    states = load_states(_write(tmp_path, "st.csv", STATES))
    assert states["u1"][1] == DeviceState("u1", 3600.0, True, False, 75.5, "cellular")
    assert list(states) == ["u1", "u2"]


def test_load_scale_column_is_optional(tmp_path):
    text = "user_id,start_s,duration_s,app_category\nu1,0,60,audio\n"
    assert load_sessions(_write(tmp_path, "s.csv", text))["u1"][0].load_scale == 1.0


def _replace_line(text: str, line: int, new: str) -> str:
    lines = text.splitlines()
    lines[line - 1] = new
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("line, row, field, reason", [
    (2, "u1,abc,60,messaging,", "start_s", "not a finite number"),
    (2, "u1,0,-5,messaging,", "duration_s", "negative duration"),
    (3, "u1,100,0,video,1", "duration_s", "zero duration"),
    (3, "u1,100,30,tiktok,1", "app_category", "unknown category"),
    (3, "u1,30,30,video,1", "start_s", "overlaps the previous session"),
    (3, "u1,-1,30,video,1", "start_s", "negative time"),
    (4, "u1,50,10,game3d,1", "start_s", "not in time order"),
    (3, "u1,100,30,video,1,extra", "row", "expected 5 fields, got 6"),
    (3, "u1,100,30,video,0", "load_scale", "must be positive"),
    (2, ",0,60,messaging,", "user_id", "missing value"),
])
def test_malformed_session_rows_name_file_line_field(tmp_path, line, row, field, reason):
    path = _write(tmp_path, "s.csv", _replace_line(SESSIONS, line, row))
    with pytest.raises(InputError) as e:
        load_sessions(path)
    assert (e.value.where, e.value.line, e.value.field) == (str(path), line, field)
    assert reason in e.value.reason and str(e.value).startswith(f"{path}:{line}: {field}: ")


@pytest.mark.parametrize("line, row, field, reason", [
    (2, "u1,0,0,1,104,wifi", "battery_pct", "out of range 0-100"),
    (2, "u1,0,0,1,-0.5,wifi", "battery_pct", "out of range 0-100"),
    (3, "u1,3600,2,0,75,cellular", "screen_on", "expected 0 or 1"),
    (3, "u1,3600,1,yes,75,cellular", "charging", "expected 0 or 1"),
    (3, "u1,3600,1,0,75,5g", "network", "unknown network"),
    (3, "u1,0,1,0,75,wifi", "time_s", "not increasing"),
    (3, "u1,inf,1,0,75,wifi", "time_s", "not a finite number"),
    (3, "u1,3600,1,0,,wifi", "battery_pct", "missing value"),
    (1, "user_id,time_s,screen_on,charging,battery_pct", "network", "missing column"),
    (1, "user_id,time_s,screen_on,charging,battery,network", "battery", "unknown column"),
])
def test_malformed_state_rows_name_file_line_field(tmp_path, line, row, field, reason):
    path = _write(tmp_path, "st.csv", _replace_line(STATES, line, row))
    with pytest.raises(InputError) as e:
        load_states(path)
    assert (e.value.where, e.value.line, e.value.field) == (str(path), line, field)
    assert reason in e.value.reason


def test_the_first_bad_line_is_reported(tmp_path):
    text = _replace_line(_replace_line(STATES, 4, "u2,10,0,0,100,lte"), 3, "u1,3600,1,0,175,wifi")
    with pytest.raises(InputError) as e:
        load_states(_write(tmp_path, "st.csv", text))
    assert (e.value.line, e.value.field) == (3, "battery_pct")


def test_missing_file_and_short_manifest(tmp_path):
    with pytest.raises(InputError) as e:
        load_trace(tmp_path)
    assert e.value.field == "path" and e.value.where.endswith("sessions.csv")
    _write(tmp_path, "sessions.csv", SESSIONS)
    _write(tmp_path, "states.csv", STATES)
    assert load_trace(tmp_path).duration_s == DAY_S  # no manifest: whole days
    _write(tmp_path, "manifest.json", json.dumps({"duration_s": 100}))
    with pytest.raises(InputError, match="duration_s"):
        load_trace(tmp_path)


_cell = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda x: f"{x:.3f}")
_bad_cell = st.sampled_from(["", "x", "nan", "1e400", "--3", "1,5"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(durations=st.lists(st.floats(0.001, 1e4), min_size=1, max_size=30),
       gaps=st.lists(st.floats(0, 1e4), min_size=30, max_size=30),
       cats=st.lists(st.sampled_from(CATEGORIES), min_size=30, max_size=30),
       bad_row=st.integers(0, 29), bad_value=_bad_cell, column=st.sampled_from(["start_s", "duration_s"]))
def test_sessions_round_trip_and_any_bad_cell_is_located(tmp_path, durations, gaps, cats, bad_row, bad_value, column):
    t, sessions = 0.0, []
    for d, g, c in zip(durations, gaps, cats):
        start, dur = round(t + g, 3), round(d, 3) or 0.001
        sessions.append(Session("u", start, dur, c))
        t = start + dur
    path = tmp_path / "s.csv"
    write_sessions({"u": sessions}, path)
    assert load_sessions(path) == {"u": tuple(sessions)}

    bad_row %= len(sessions)
    lines = path.read_text().splitlines()
    cells = lines[bad_row + 1].split(",")
    cells[1 if column == "start_s" else 2] = bad_value
    lines[bad_row + 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        load_sessions(path)
    assert e.value.line == bad_row + 2  # header is line 1
    assert e.value.field in (column, "row")  # "1,5" splits the cell into two fields


# ---------------------------------------------------------------- Trace helpers


def test_availability_windows_merge_and_run_to_the_end():
    rows = (DeviceState("u", 0.0, False, False, 50, "wifi"), DeviceState("u", 10.0, False, True, 50, "wifi"),
            DeviceState("u", 20.0, False, True, 51, "cellular"), DeviceState("u", 30.0, True, True, 52, "wifi"),
            DeviceState("u", 40.0, False, True, 53, "wifi"))
    trace = Trace({}, {"u": rows}, 100.0)
    assert trace.availability_windows("u") == [(10.0, 30.0), (40.0, 100.0)]
    assert trace.availability_windows("u", require_wifi=True) == [(10.0, 20.0), (40.0, 100.0)]
    assert trace.state_at("u", 25.0).battery_pct == 51 and trace.state_at("u", -1.0) is None
    assert trace.availability_windows("nobody") == []


# ---------------------------------------------------------------- FedScale


def test_fedscale_round_trip_keeps_availability_windows(month, tmp_path):
    for require_wifi in (False, True):
        path = tmp_path / f"behave-{require_wifi}.pkl"
        write_fedscale(month, path, require_wifi=require_wifi)
        back = load_fedscale(path)
        assert back.duration_s == month.duration_s
        for u in month.users:
            assert back.availability_windows(u) == month.availability_windows(u, require_wifi=require_wifi)


def test_fedscale_windows_repeat_with_the_period(tmp_path):
    path = tmp_path / "behave.pkl"
    path.write_bytes(pickle.dumps({7: {"active": [0, 50], "inactive": [10, 100], "finish_time": 100,
                                       "model": "Pixel"}}))
    trace = load_fedscale(path, horizon_s=250)
    assert trace.users == ("7",)
    assert trace.availability_windows("7") == [(0, 10), (50, 110), (150, 210)]
    assert all(not s.screen_on for s in trace.states_of("7"))


class _Evil:
    def __reduce__(self):
        return (print, ("this must not run",))


@pytest.mark.parametrize("data, field", [
    ({1: {"active": [0, 5], "inactive": [3], "finish_time": 10}}, "1.inactive"),
    ({1: {"active": [0], "inactive": [-3], "finish_time": 10}}, "1.inactive[0]"),
    ({1: {"active": [5], "inactive": [3], "finish_time": 10}}, "1.inactive[0]"),
    ({1: {"active": [0, 2], "inactive": [5, 8], "finish_time": 10}}, "1.active[1]"),
    ({1: {"active": [0], "inactive": [3]}}, "1.finish_time"),
    ({1: {"active": ["x"], "inactive": [3], "finish_time": 10}}, "1.active[0]"),
    ({1: [0, 3]}, "1"),
    ([1, 2], "pickle"),
    ({1: _Evil()}, "pickle"),
    # bounded expansion: a microsecond period replayed over a day, a trace of 1e300 s
    ({1: {"active": [0], "inactive": [5e-7], "finish_time": 1e-6}, 2: {"active": [0], "inactive": [9],
                                                                       "finish_time": 86400}}, "1.finish_time"),
    ({1: {"active": [0], "inactive": [3], "finish_time": 1e300}}, "finish_time"),
])
def test_malformed_fedscale_names_client_and_field(tmp_path, data, field):
    path = tmp_path / "behave.pkl"
    path.write_bytes(pickle.dumps(data))
    with pytest.raises(InputError) as e:
        load_fedscale(path)
    assert e.value.where == str(path) and e.value.field == field


# ---------------------------------------------------------------- FLASH

FLASH = {
    "d1": {"model": "SM-G9", "messages": "\n".join([
        "2020-01-28 08:00:00\tscreen_on",
        "2020-01-28 07:59:00\t57.0%",  # logs are not always in order
        "2020-01-28 08:05:00\tscreen_off",
        "2020-01-28 08:05:00\tscreen_lock",
        "2020-01-28 22:00:00\tbattery_charged_on",
        "2020-01-28 22:00:00\twifi",
        "2020-01-29 07:00:00\tbattery_charged_off",
        "2020-01-29 07:00:00\t4G",
    ]) + "\n"},
    "d2": {"messages": "2020-01-27 23:30:00\tbattery_low\n2020-01-28 00:10:00\tBATTERY_CHARGED_ON\n"},
}


def test_flash_import_replays_events_into_states(tmp_path):
    path = _write(tmp_path, "state_traces.json", json.dumps(FLASH))
    trace = load_flash(path)
    day = DAY_S
    assert trace.sessions == {}  # FLASH logs no apps
    assert trace.duration_s == 3 * day  # midnight of 2020-01-27 to the end of 2020-01-29
    h = 3600.0
    assert [(s.time_s, s.screen_on, s.charging, s.battery_pct, s.network) for s in trace.states_of("d1")] == [
        (day + 7 * h + 59 * 60, False, False, 57.0, "wifi"),
        (day + 8 * h, True, False, 57.0, "wifi"),
        (day + 8 * h + 5 * 60, False, False, 57.0, "wifi"),
        (day + 22 * h, False, True, 57.0, "wifi"),
        (2 * day + 7 * h, False, False, 57.0, "cellular"),
    ]
    assert trace.availability_windows("d1") == [(day + 22 * h, 2 * day + 7 * h)]
    assert [(s.time_s, s.charging, s.battery_pct, s.network) for s in trace.states_of("d2")] == [
        (23.5 * h, False, 15.0, "none"), (day + 10 * 60, True, 15.0, "none")]


@pytest.mark.parametrize("messages, reason", [
    ("2020-01-28 08:00:00\tscreen_on\n2020-01-28 08:01:00\tdance", "line 2: unknown event 'dance'"),
    ("2020-01-28 8:00\tscreen_on", "line 1: bad time"),
    ("2020-01-28 08:00:00 screen_on", "line 1: expected 'YYYY-mm-dd HH:MM:SS<TAB>event'"),
    ("2020-01-28 08:00:00\t120.0%", "line 1: battery level out of range"),
    ("2020-01-28 08:00:00\tabc%", "line 1: bad battery level"),
])
def test_malformed_flash_names_device_and_line(tmp_path, messages, reason):
    path = _write(tmp_path, "state_traces.json", json.dumps({"dev9": {"messages": messages}}))
    with pytest.raises(InputError) as e:
        load_flash(path)
    assert e.value.where == str(path) and e.value.field == "dev9.messages" and reason in e.value.reason


def test_malformed_flash_json_and_entries(tmp_path):
    with pytest.raises(InputError) as e:
        load_flash(_write(tmp_path, "a.json", '{"d1": {"messages": "x"},\n oops}'))
    assert e.value.field == "json" and e.value.line == 2
    with pytest.raises(InputError) as e:
        load_flash(_write(tmp_path, "b.json", json.dumps({"d1": {"msgs": ""}})))
    assert e.value.field == "d1.messages"


@pytest.mark.parametrize("edit, needle", [
    (lambda d: _edit_line(d / "sessions.csv", 2, lambda l: l.rsplit(",", 1)[0] + ",1e308"), "load_scale: 1e+308 is above 100"),
    (lambda d: _drop_user_states(d, "u000"), "'u000' has sessions but no rows in states.csv"),
    (lambda d: (d / "states.csv").open("a").write("u000,1e300,0,1,50,wifi\n"), "more than 3650 (ten years)"),
])
def test_a_trace_that_cannot_be_simulated_is_one_line(edit, needle, tmp_path):
    import shutil

    from swansim.apps.traces import load_trace
    from swansim.errors import InputError

    d = tmp_path / "t"
    shutil.copytree(TRACES_DIR / "examples", d)
    (d / "manifest.json").unlink()
    edit(d)
    with pytest.raises(InputError, match=re.escape(needle)) as e:
        load_trace(d)
    assert "\n" not in str(e.value)


def _edit_line(path, line, fn):
    text = path.read_text()
    path.write_text(_replace_line(text, line, fn(text.splitlines()[line - 1])))


def _drop_user_states(d, user):
    path = d / "states.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(l for l in lines if not l.startswith(user + ",")) + "\n")
