"""The phone's owner: app models, frame/jank accounting, the Work-like benchmark, training interference."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swansim.apps.appmodels import (APP_TABLE_PATH, App, AppStreams, FramePipeline, Vsync, app_streams,
                                    load_app_table, play_trace, scalar_speed)
from swansim.apps.traces import CATEGORIES, Session, Trace
from swansim.apps.ux import FROZEN_FRAME_MS, SLOW_FRAME_MS, UxRecorder, frame_table, jank_pct, jank_summary, slowdown
from swansim.apps.workbench import animation_stretch_s, score, score_drop_pct, script, task_times
from swansim.cli import main as cli_main
from swansim.device import Device, DeviceConfig
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.kernel.placement import WakeupPlacement, place_for_throughput
from swansim.runs.scenarios import (DenseLoad, TrainingBackground, app_jank, reference_times,
                               run_workbench)

PIXEL3 = Catalogue.load().device("pixel3")

LIGHT_APPS = ("messaging", "browsing", "audio")


@pytest.fixture(scope="module")
def table():
    return load_app_table()


def _pixel3(**kw) -> Device:
    return Device(PIXEL3, DeviceConfig(screen_on=True, **kw))


# ---------------------------------------------------------------- the table


def test_table_has_every_category_nice_values_and_tasks(table):
    assert set(table.categories) == set(CATEGORIES)
    # Android: top app's UI thread and RenderThread boosted to -10 (ActivityManagerService).
    assert table.android.ui_nice == -10 and table.android.render_nice == -10
    assert {t.name for t in table.tasks} == {"web_browsing", "writing", "photo_editing",
                                             "data_manipulation", "video_editing"}
    for m in table.categories.values():
        assert m.workers <= 2, "apps use 1-2 threads besides UI and render (Gao et al., ISPASS'15)"


def test_table_refuses_a_figure_without_source_or_out_of_range(tmp_path: Path):
    text = APP_TABLE_PATH.read_text()
    no_source = text.replace('ui_minstr_per_frame = "assumption: a list/keyboard frame', 'x = "', 1)
    (tmp_path / "a.toml").write_text(no_source)
    with pytest.raises(InputError, match=r"categories\.messaging\.sources\.ui_minstr_per_frame"):
        load_app_table(tmp_path / "a.toml")
    bad = text.replace("frame_sigma = 0.3\n", "frame_sigma = 30\n", 1)
    (tmp_path / "b.toml").write_text(bad)
    with pytest.raises(InputError, match=r"categories\.messaging\.frame_sigma"):
        load_app_table(tmp_path / "b.toml")
    for i, (old, new, field) in enumerate([("passes = 25\n", "passes = 0\n", r"benchmark\.passes"),
                                           ("passes = 25\n", "passes = 2.5\n", r"benchmark\.passes"),
                                           ('passes = "derived: UL', 'x = "derived: UL', r"benchmark\.sources\.passes"),
                                           ("[benchmark]\n", "[benchmarks]\n", r"benchmark")]):
        (tmp_path / f"c{i}.toml").write_text(text.replace(old, new, 1))
        with pytest.raises(InputError, match=field):
            load_app_table(tmp_path / f"c{i}.toml")


# ---------------------------------------------------------------- ux metrics


def test_android_frame_thresholds():
    period = 1 / 60
    rows = [("a", 0.0, period, 0, 0, 0, 0.015),       # on time
            ("a", 1.0, period, 0, 0, 0, 1.0162),      # on time (16.2 ms < 16.67) but slow (> 16 ms)
            ("a", 2.0, period, 0, 0, 0, 2.0170),      # janky and slow
            ("a", 3.0, period, 0, 0, 0, 3.8)]         # frozen
    f = frame_table([(a, v, v + p, *rest) for a, v, p, *rest in rows])
    assert f["janky"].tolist() == [False, False, True, True]
    assert f["slow"].tolist() == [False, True, True, True]
    assert f["frozen"].tolist() == [False, False, False, True]
    assert SLOW_FRAME_MS == 16.0 and FROZEN_FRAME_MS == 700.0
    s = jank_summary(f, by=None).iloc[0]
    assert s["frames"] == 4 and s["jank_pct"] == 50.0 and s["slow_pct"] == 75.0 and s["frozen_pct"] == 25.0


def test_deadline_is_one_refresh_period():
    for hz in (60, 90, 120):
        dev = Device(replace(PIXEL3, display_refresh_hz=hz))
        rec = UxRecorder()
        pipe = FramePipeline(dev.env, dev.sched, "a", dev.sched.spawn("ui"), dev.sched.spawn("rt"),
                             scalar_speed(dev.spec), Vsync(hz), rec)
        proc = dev.env.process(pipe.frame(1e6, 1e6))
        dev.env.run(until=proc)
        dev.run(1.0)
        f = rec.frames()
        assert len(f) == 1
        assert f["deadline_s"].iloc[0] - f["vsync_s"].iloc[0] == pytest.approx(1 / hz)


def test_slowdown_and_score():
    alone = pd.DataFrame({"task": ["a", "b"], "time_s": [1.0, 2.0]})
    loaded = pd.DataFrame({"task": ["a", "b"], "time_s": [2.0, 2.0]})
    sd = slowdown(loaded, alone).set_index("task")["slowdown"]
    assert sd["a"] == 2.0 and sd["b"] == 1.0
    assert score({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}) == pytest.approx(1000.0)
    assert score({"a": 2.0, "b": 4.0}, {"a": 1.0, "b": 2.0}) == pytest.approx(500.0)
    assert score({"a": 2.0, "b": 2.0}, {"a": 1.0, "b": 2.0}) == pytest.approx(1000 / math.sqrt(2))
    assert score_drop_pct(1000.0, 750.0) == 25.0


# ---------------------------------------------------------------- light apps, no training


@pytest.mark.parametrize("category", LIGHT_APPS)
def test_light_apps_jank_under_one_percent_on_pixel3(category):
    frames, summary = app_jank(PIXEL3, DeviceConfig(), category, None, duration_s=60.0)
    assert len(frames) > 20
    assert summary["jank_pct"].iloc[0] < 1.0


# ---------------------------------------------------------------- common random numbers


class _Recorded:
    """A random generator that keeps what it drew."""

    def __init__(self, rng):
        self._rng, self.drawn = rng, []

    def __getattr__(self, name):
        draw = getattr(self._rng, name)

        def recorded(*a, **kw):
            x = draw(*a, **kw)
            self.drawn.append((name, float(x)))
            return x
        return recorded


def _messaging_inputs(beside: str, seconds: float = 20.0):
    """What the messaging app drew (per stream) and the frames it made, with ``beside`` running."""
    table = load_app_table()
    dev = _pixel3(seed=7)
    if beside == "dense load":
        DenseLoad(8, nice=-10)(dev)
    rec = UxRecorder()
    if beside == "another app":
        App(dev.env, dev.sched, dev.spec, table.categories["game3d"], table.android, rec, 7, name="game").start()
    app = App(dev.env, dev.sched, dev.spec, table.categories["messaging"], table.android, rec, 7, name="messaging")
    app.streams = AppStreams(*(_Recorded(getattr(app.streams, k)) for k in ("bursts", "frames", "workers")))
    app.start()
    dev.run(seconds)
    frames = rec.frames()
    return {k: getattr(app.streams, k).drawn for k in ("bursts", "frames", "workers")}, frames[frames["app"] == "messaging"]


@pytest.mark.parametrize("beside", ["dense load", "another app"])
def test_an_app_draws_the_same_input_whatever_runs_beside_it(beside):
    """Common random numbers: bursts, per-frame work and worker jobs of an app depend only on the
    seed and its name. What runs beside it changes when its frames finish, not what they are."""
    alone, alone_frames = _messaging_inputs("nothing")
    loaded, loaded_frames = _messaging_inputs(beside)
    for kind in ("bursts", "frames", "workers"):
        a, b = alone[kind], loaded[kind]
        n = min(len(a), len(b))
        assert n > 0 and a[:n] == b[:n], kind            # the same draws, in the same order
    assert not alone_frames["done_s"].reset_index(drop=True).equals(loaded_frames["done_s"].reset_index(drop=True))


def test_app_streams_are_keyed_by_seed_and_name():
    def first(seed, name):
        return app_streams(seed, name).frames.random()
    assert first(1, "messaging") == first(1, "messaging")
    assert len({first(1, "messaging"), first(2, "messaging"), first(1, "browsing")}) == 3
    s = app_streams(1, "messaging")
    assert len({s.bursts.random(), s.frames.random(), s.workers.random()}) == 3


# ---------------------------------------------------------------- frame accounting


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(category=st.sampled_from(CATEGORIES), seed=st.integers(0, 2**16),
       stop_s=st.floats(0.5, 12.0), load_scale=st.floats(0.3, 8.0))
def test_every_frame_is_counted_once(category, seed, stop_s, load_scale):
    dev = Device(PIXEL3, DeviceConfig(seed=seed, screen_on=True))
    table = load_app_table()
    rec = UxRecorder()
    app = App(dev.env, dev.sched, dev.spec, table.categories[category], table.android, rec, seed,
              load_scale=load_scale).start()
    dev.run(stop_s)
    app.stop()
    dev.run(stop_s + 2.0)                           # nothing of the stopped app may finish later
    pipe = app.pipeline
    f = rec.frames()
    assert pipe.in_flight == 0
    assert pipe.started == pipe.recorded + pipe.abandoned == len(f) + pipe.abandoned
    assert f["vsync_s"].is_unique and f["vsync_s"].is_monotonic_increasing
    assert (f["done_s"] <= stop_s + 1e-9).all()
    assert (f["ui_start_s"] >= f["vsync_s"] - 1e-9).all()
    assert (f["ui_done_s"] >= f["ui_start_s"]).all() and (f["render_start_s"] >= f["ui_done_s"]).all()
    assert (f["done_s"] >= f["render_start_s"]).all()
    assert (f["render_start_s"].iloc[1:].to_numpy() >= f["done_s"].iloc[:-1].to_numpy() - 1e-9).all()
    hz = dev.spec.display_refresh_hz
    assert ((f["vsync_s"] * hz - (f["vsync_s"] * hz).round()).abs() < 1e-6).all()


def _steady_animation_jank(n_frames: int, ui_instr: float, render_instr: float, load: int, same_core: bool):
    """Jank share of ``n_frames`` identical frames with ``load`` dense threads on the app's cores."""
    dev = Device(PIXEL3, DeviceConfig(governor="performance"))
    ui = dev.sched.spawn("ui", (4,), -10)
    rt = dev.sched.spawn("rt", (4,) if same_core else (5,), -10)
    if load:
        DenseLoad(load, cpus=(4,) if same_core else (4, 5))(dev)
    rec = UxRecorder()
    pipe = FramePipeline(dev.env, dev.sched, "a", ui, rt, scalar_speed(dev.spec), Vsync(60), rec)

    def animate():
        for _ in range(n_frames):
            yield from pipe.frame(ui_instr, render_instr)
        yield from pipe.idle()

    dev.env.run(until=dev.env.process(animate()))
    f = rec.frames()
    assert len(f) == n_frames
    return jank_pct(f)


@settings(max_examples=30, deadline=None)
@given(n_frames=st.integers(2, 30), ui=st.floats(1e5, 60e6), render=st.floats(0.0, 60e6),
       loads=st.lists(st.integers(0, 6), min_size=2, max_size=3, unique=True), same_core=st.booleans())
def test_jank_grows_with_background_load_on_the_same_cores(n_frames, ui, render, loads, same_core):
    """A steady animation: load on the app's cores never lowers jank below the idle phone's.

    (A UI thread with no work at all is left out: two frames then start in one vsync period
    and the second waits for the first's render, a jank that any delay of the UI thread - a
    new thread queued a virtual slice behind a dense one - avoids. Between two loads it need
    not grow: whether a waking UI thread preempts a dense thread
    depends on their vruntimes, so one more dense thread can shift a frame into a turn that
    suits it; and for irregular frames a slower UI thread may slip to the next vsync, by which
    time the previous frame has rendered, and its frame is on time.)
    """
    alone = _steady_animation_jank(n_frames, ui, render, 0, same_core)
    assert all(_steady_animation_jank(n_frames, ui, render, k, same_core) >= alone for k in loads if k)


# ---------------------------------------------------------------- placement


def test_wakeup_placement_keeps_running_threads_and_prefers_idle_big_cores():
    dev = _pixel3()
    dev.sched.placement = WakeupPlacement()
    train = [dev.sched.spawn(f"t{i}", None, 0) for i in range(4)]
    for t in train:
        dev.sched.run(t, 1e12, scalar_speed(dev.spec))
    dev.run(0.01)
    assert sorted(t.cpu for t in train) == [4, 5, 6, 7]        # idle big cores first
    ui = dev.sched.spawn("ui", None, -10)
    dev.sched.run(ui, 1e9, scalar_speed(dev.spec))
    dev.run(0.02)
    assert sorted(t.cpu for t in train) == [4, 5, 6, 7]        # a waking thread evicts nobody
    assert ui.cpu in (0, 1, 2, 3)                              # it takes an idle (little) core


def test_wakeup_placement_does_not_trap_apps_on_a_fast_clocked_little_cluster():
    """One little core busy at top clock: the app still goes to a big core (capacity_orig)."""
    for placement, big_expected in ((WakeupPlacement(), True), (place_for_throughput, False)):
        dev = _pixel3()
        dev.sched.placement = placement
        DenseLoad(1, cpus=(0,))(dev)
        dev.run(1.0)                                           # the little cluster ramps to fmax
        ui = dev.sched.spawn("ui", None, -10)
        dev.sched.run(ui, 5e9, scalar_speed(dev.spec))
        dev.run(1.1)
        assert (ui.cpu >= 4) == big_expected                   # throughput placement is trapped


def test_capacity_aware_placement_wakes_a_busy_thread_onto_a_big_core():
    """EAS fits_capacity: a thread that has been keeping a big core busy does not fit a little
    core, so when it wakes with every big core taken it shares one; a light thread takes an
    idle little core, as under WakeupPlacement (which sends both to little cores)."""
    for placement, shares_big in (("eas", True), ("wakeup", False)):
        dev = _pixel3(placement=placement)
        speed = scalar_speed(dev.spec)
        threads = [dev.sched.spawn(f"t{i}", None, 0) for i in range(4)]
        for t in threads:
            dev.sched.run(t, 1e12, speed)
        dev.run(0.3)                            # ten PELT half-lives on a big core each
        worker = threads[0]
        if placement == "eas":
            assert dev.sched.placement.utilisation(worker, dev.now_s) > 0.8
        dev.sched.stop(worker)
        dev.run(0.3005)
        hog = dev.sched.spawn("hog", None, 0)   # takes the big core the worker left
        dev.sched.run(hog, 1e12, speed)
        dev.run(0.301)
        light = dev.sched.spawn("light", None, 0)
        dev.sched.run(light, 1e9, speed)
        dev.sched.run(worker, 1e12, speed)      # wakes ~1 ms later: its utilisation barely decayed
        dev.run(0.302)
        assert (worker.cpu >= 4) == shares_big, placement
        assert light.cpu < 4, placement


# ---------------------------------------------------------------- the Work-like benchmark


@given(late_ms=st.lists(st.floats(-10.0, 100.0), max_size=20))
def test_an_animation_is_stretched_one_vsync_per_started_period_of_lateness(late_ms):
    period = 1 / 60
    rows = [("wb", 1.0 + i, 1.0 + i + period, 0, 0, 0, 1.0 + i + period + x / 1e3) for i, x in enumerate(late_ms)]
    rows.append(("other", 0.0, period, 0, 0, 0, 1.0))           # another app's frame: not counted
    want = period * sum(math.ceil(x / 1e3 / period - 1e-9) for x in late_ms if x / 1e3 > 1e-9)
    assert animation_stretch_s(rows, "wb", period) == pytest.approx(want, abs=1e-12)


def test_script_is_fixed_by_seed(table):
    a, b, c = script(table.tasks, seed=3), script(table.tasks, seed=3), script(table.tasks, seed=4)
    assert a == b and a != c
    assert len(script(table.tasks, seed=3, passes=2)) == 2 * len(a)


# The benchmark's behaviour is tested over one pass of its script (a full-length run, as long as
# PCMark's Work test, is 25 passes: experiments run that).
ONE = 1


def test_benchmark_alone_scores_1000_against_itself():
    ref = reference_times("pixel3", ONE)
    r = run_workbench(PIXEL3, DeviceConfig(), None, passes=ONE, reference=ref)
    assert r.score == pytest.approx(1000.0)
    assert set(r.tasks["task"]) == set(ref.index)
    assert r.frames["janky"].mean() < 0.01


@pytest.fixture(scope="module")
def pixel3_alone_score():
    return run_workbench(PIXEL3, DeviceConfig(), None, passes=ONE, reference=reference_times("pixel3", ONE)).score


def _drop(bg, base, governor: str = "schedutil") -> float:
    cfg = DeviceConfig(governor=governor)
    r = run_workbench(PIXEL3, cfg, bg, warmup_s=10.0, passes=ONE, reference=reference_times("pixel3", ONE))
    return score_drop_pct(base, r.score)


def test_pytorch_default_resnet34_costs_pixel3_a_double_digit_score_drop(pixel3_alone_score):
    """Swan Fig. 3 (26.7%, the one point the app models' L3 intensity is calibrated on)."""
    assert _drop(TrainingBackground("resnet34", "pytorch-default"), pixel3_alone_score) >= 10.0


def test_the_apps_l3_stake_adds_to_the_drop(table):
    """The app loses by two routes: CPU time (its worker threads take CFS turns with the
    training's, OpenBLAS's spinning workers included; its UI threads wake and preempt) and its
    working set in the shared L3. Taking its L3 stake away leaves a smaller drop. Measured with
    training on one little core, whose CPU time the app hardly needs: under the default the
    CFS turns decide the drop and the L3 share is within a seed's spread
    (experiments/ux_l3_sensitivity.py)."""
    no_l3 = replace(table, memory=replace(table.memory, l2_misses_per_kinstr=0.0))
    cfg = DeviceConfig()
    bg = TrainingBackground("resnet34", "little1")
    ref = task_times(run_workbench(PIXEL3, cfg, None, passes=ONE, table=no_l3).tasks)
    without = score_drop_pct(1000.0, run_workbench(PIXEL3, cfg, bg, 10.0, ONE, table=no_l3, reference=ref).score)
    ref = task_times(run_workbench(PIXEL3, cfg, None, passes=ONE, table=table).tasks)
    with_l3 = score_drop_pct(1000.0, run_workbench(PIXEL3, cfg, bg, 10.0, ONE, table=table, reference=ref).score)
    assert 0.0 < without < with_l3


@pytest.mark.xfail(strict=True, reason="6.0% (9.5% before the little cluster's 576 MHz floor; 1.1% before the "
                                       "runtime was refitted with its BLAS pool): mostly the app's L3 stake "
                                       "(1.7% without it, experiments/ux_l3_sensitivity.py), an assumed figure of the app models")
def test_training_on_one_little_core_costs_little(pixel3_alone_score):
    assert abs(_drop(TrainingBackground("resnet34", "little1"), pixel3_alone_score)) < 5.0


def test_baseline_training_costs_more_than_one_little_core():
    """CPU contention alone: the performance governor takes schedutil's ramp-up out of the comparison."""
    cfg = DeviceConfig(governor="performance")
    base = run_workbench(PIXEL3, cfg, None, passes=ONE, reference=reference_times("pixel3", ONE)).score
    baseline = _drop(TrainingBackground("mobilenet_v2", "pytorch-default"), base, "performance")
    little = _drop(TrainingBackground("mobilenet_v2", "little1"), base, "performance")
    assert baseline > little


def test_load_holding_every_big_core_pushes_the_app_to_little_cores(pixel3_alone_score):
    """What pytorch-default training would cost if it never let go of the big cores: a double-digit drop."""
    assert _drop(DenseLoad(4, cpus=(4, 5, 6, 7)), pixel3_alone_score) >= 10.0
    assert abs(_drop(DenseLoad(1, cpus=(0,)), pixel3_alone_score)) < 5.0


# ---------------------------------------------------------------- traces and CLI


def test_play_trace_turns_the_screen_on_for_sessions_only():
    sessions = (Session("u", 5.0, 10.0, "messaging"), Session("u", 30.0, 5.0, "game3d", 1.5))
    trace = Trace({"u": sessions}, {}, 60.0)
    dev = _pixel3()
    dev.platform.set_screen(False)
    screen = []
    dev.platform.probes.append(lambda t0, t1, p: screen.append((t0, t1, p.screen_on)))
    player = play_trace(dev, trace, "u")
    dev.run(60.0)
    on_s = sum(t1 - t0 for t0, t1, on in screen if on)
    assert on_s == pytest.approx(15.0)
    assert [a.name.split(":")[1] for a in player.apps] == ["messaging", "game3d"]
    f = player.recorder.frames()
    in_session = ((f["vsync_s"] >= 5) & (f["done_s"] <= 15)) | ((f["vsync_s"] >= 30) & (f["done_s"] <= 35))
    assert in_session.all() and len(f) > 100


def test_cli_ux_writes_scores_tasks_and_jank(tmp_path: Path):
    rc = cli_main(["ux", "--out", str(tmp_path), "--devices", "pixel3", "--models", "mobilenet_v2",
                   "--warmup-s", "2", "--light-s", "5", "--passes", "1", "--no-plots"])
    assert rc == 0
    out = tmp_path / "ux"
    scores = pd.read_csv(out / "work_scores.csv")
    assert list(scores["placement"]) == ["none", "pytorch-default", "little1"]
    assert scores.loc[0, "drop_pct"] == 0.0 and scores.loc[0, "score"] == pytest.approx(1000.0)
    jank = pd.read_csv(out / "light_jank.csv")
    assert set(jank["app"]) == set(LIGHT_APPS)
    assert (out / "work_tasks.csv").exists() and (out / "manifest.json").exists()


def test_cli_ux_seeds_give_a_row_each_and_a_mean_with_its_range(tmp_path: Path):
    rc = cli_main(["ux", "--out", str(tmp_path), "--devices", "pixel3", "--models", "resnet34",
                   "--warmup-s", "2", "--light-s", "0", "--seeds", "2", "--seed", "5", "--passes", "1"])
    assert rc == 0
    out = tmp_path / "ux"
    scores = pd.read_csv(out / "work_scores.csv")
    assert sorted(scores["seed"]) == [5, 5, 5, 6, 6, 6]
    assert list(scores.loc[scores["placement"] == "none", "score"]) == pytest.approx([1000.0, 1000.0])
    drops = pd.read_csv(out / "work_drops.csv").set_index("placement")
    per_seed = scores[scores["placement"] == "pytorch-default"]["drop_pct"]
    row = drops.loc["pytorch-default"]
    assert row["seeds"] == 2 and row["drop_pct"] == pytest.approx(per_seed.mean())
    assert row["drop_min_pct"] == per_seed.min() and row["drop_max_pct"] == per_seed.max()
    assert (out / "work_drop.png").exists()


def test_cli_ux_keeps_finished_runs_when_interrupted(tmp_path: Path, monkeypatch, capsys):
    import swansim.runs.ux as ux_run
    real, calls = ux_run.run_workbench, []

    def interrupted_on_the_second_run(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(ux_run, "run_workbench", interrupted_on_the_second_run)
    rc = cli_main(["ux", "--out", str(tmp_path), "--devices", "pixel3", "--models", "resnet34",
                   "--light-s", "0", "--passes", "1", "--no-plots", "--jobs", "1"])
    assert rc == 130 and "kept" in capsys.readouterr().err
    scores = pd.read_csv(tmp_path / "ux" / "work_scores.csv")
    assert list(scores["placement"]) == ["none"]


def test_cli_ux_refuses_an_unknown_model(tmp_path: Path, capsys):
    assert cli_main(["ux", "--out", str(tmp_path), "--models", "resnet9000"]) == 2
    assert "resnet9000" in capsys.readouterr().err
