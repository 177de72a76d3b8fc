"""The command line: every command runs; every bad input is one line `where: field: reason`, exit
code 2, no traceback, before any simulation starts.

Bad inputs run in-process (`swansim.cli.main`) with the simulation entry points replaced by a
tripwire: a check that comes too late trips it instead of running minutes of simulation.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swansim.cli import main

REPO = Path(__file__).resolve().parents[1]
SDM845 = (REPO / "device_profiles" / "socs" / "sdm845.toml").read_text()
EXAMPLES = REPO / "traces" / "examples"


class WorkStarted(BaseException):
    """Raised by the tripwire: a simulation, a process pool or a trace synthesis began."""


@contextlib.contextmanager
def tripwire():
    def trip(*_a, **_kw):
        raise WorkStarted
    # a module that binds `synthesize` by name must be imported before the patch, or it would
    # keep the tripwire for the rest of the session
    import swansim.federated.population  # noqa: F401
    with mock.patch("simpy.Environment.run", trip), mock.patch("swansim.apps.synth.synthesize", trip), \
            mock.patch("swansim.pool.ProcessPoolExecutor", trip):
        yield


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """``swansim argv`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:   # only --help and --version exit through argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc: int, err: str, where: str | None = None) -> None:
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("swansim: error: ") and lines[0].count(": ") >= 3, lines[0]
    if where is not None:
        assert lines[0].startswith(f"swansim: error: {where}: "), lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Files and directories the bad inputs point at."""
    d = tmp_path_factory.mktemp("inputs")
    (d / "a-file.txt").write_text("not a directory\n")
    (d / "a-dir").mkdir()
    (d / "binary.toml").write_bytes(b"\x00\x01\xff\xfe\x80 binary")
    (d / "typo.toml").write_text(SDM845.replace("l3_kib = 2048\n", "l3_kib = 2048\ndram_latancy_ns = 500\n"))
    trace = d / "trace"
    shutil.copytree(EXAMPLES, trace)
    return {"file": str(d / "a-file.txt"), "dir": str(d / "a-dir"), "binary": str(d / "binary.toml"),
            "typo": str(d / "typo.toml"), "trace": str(trace), "missing": str(d / "no-such-thing"),
            "unwritable": "/proc/swansim-test/out"}


# ---------------------------------------------------------------------------------------------
# Every case of issue 13, and a few more, as explicit cases: (argv, where the error points)

CASES = [
    # tracebacks before: output paths
    ("landscape --out {dir}", "--out"),
    ("landscape --out {file}/x.csv", "--out"),
    ("landscape --out {unwritable}/x.csv", "--out"),
    ("landscape --out ''", "--out"),
    ("traces synth --out {file}", "--out"),
    ("traces synth --out {unwritable}", "--out"),
    ("thermal --out {file}", "--out"),
    ("thermal --out {unwritable}", "--out"),
    ("demo --out {file}", "--out"),
    ("demo --out {unwritable}", "--out"),
    ("ux --out {file}", "--out"),
    ("ux --out ''", "--out"),
    # tracebacks before: files in the wrong shape
    ("profiles validate {dir}", "{dir}"),
    ("profiles validate {binary}", "{binary}"),
    ("profiles validate {missing}", "{missing}"),
    ("traces show {trace}/sessions.csv", "{trace}/sessions.csv"),
    ("traces show {missing}", "{missing}"),
    ("traces show {file}", "{file}"),
    # tracebacks before: numbers
    ("thermal --minutes nan", "--minutes"),
    ("thermal --minutes inf", "--minutes"),
    ("thermal --minutes 0", "--minutes"),
    ("thermal --minutes -3", "--minutes"),
    ("thermal --sample-s 0", "--sample-s"),
    ("thermal --sample-s nan", "--sample-s"),
    ("demo --thermal-minutes 0", "--thermal-minutes"),
    ("demo --thermal-minutes nan", "--thermal-minutes"),
    # accepted silently before
    ("landscape --batch 0", "--batch"),
    ("landscape --classes 0", "--classes"),
    ("profiles validate {typo}", "{typo}"),
    ("profiles --root {missing} list", "{missing}"),
    ("profiles --root {file} validate", "{file}"),
    ("thermal --devices ''", "--devices"),
    ("thermal --devices ,,", "--devices"),
    ("thermal --devices pixel3,pixel3", "--devices"),
    ("ux --light-s -1", "--light-s"),
    ("ux --warmup-s nan", "--warmup-s"),
    ("ux --devices ''", "--devices"),
    ("ux --models ''", "--models"),
    # misleading before
    ("landscape --warmup -1", "--warmup"),
    ("landscape --batches 0", "--batches"),
    ("landscape --device nokia3310", "--device"),
    ("landscape --input 3x0x2", "--input"),
    ("landscape --input 3x224", "--input"),
    ("landscape --input axbxc", "--input"),
    ("profiles show nokia3310", "profiles show"),
    ("thermal --devices nokia3310", "--devices"),
    ("demo --device nokia3310", "--device"),
    # runaway before
    ("landscape --batch 100000000", "--batch"),
    ("landscape --input 3x100000x100000", "--input"),
    ("landscape --batch 4096", "--batch"),
    ("landscape --input 3x4096x4096 --batch 1", "--batch"),
    ("traces synth --users 1000000000 --out {dir}/t", "--users"),
    ("traces synth --users 1000 --days 365 --out {dir}/t", "--users"),
    ("thermal --minutes 100000", "--minutes"),
    # unknown names, negative seeds and jobs, malformed options
    ("landscape --model resnet", "--model"),
    ("landscape --runtime tensorflow", "--runtime"),
    ("landscape --mode fly", "--mode"),
    ("landscape --batch abc", "--batch"),
    ("landscape --jobs 0", "--jobs"),
    ("thermal --governor turbo", "--governor"),
    ("thermal --thermal-governor none", "--thermal-governor"),
    ("thermal --seed -1", "--seed"),
    ("ux --placement anywhere", "--placement"),
    ("ux --passes 0", "--passes"),
    ("ux --seeds 0", "--seeds"),
    ("ux --models resnet9000", "--models"),
    ("demo --seed -1", "--seed"),
    ("demo --jobs -2", "--jobs"),
    ("traces synth --out {dir}/t --days 0", "--days"),
    ("traces synth --out {dir}/t --seed -1", "--seed"),
    ("traces synth", "traces synth"),
    ("frobnicate", "command"),
    ("landscape --frobnicate", "command line"),
]


def _argv(template: str, files: dict[str, str]) -> list[str]:
    import shlex
    return shlex.split(template.format(**files))


@pytest.mark.parametrize("template, where", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_before_any_work(template, where, files, tmp_path, monkeypatch):
    if "{unwritable}" in template and not Path("/proc").is_dir():
        pytest.skip("needs /proc for a directory nobody can create")
    monkeypatch.chdir(tmp_path)
    with tripwire():
        rc, _, err = run_main(_argv(template, files))
    assert_one_line_error(rc, err, where.format(**files))
    assert not any(tmp_path.iterdir()), "a bad input wrote output"


def test_messages_say_where_once_and_why(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with tripwire():
        for argv, line in [
            (["landscape", "--input", "3x0x2"], "--input: '3x0x2': height must be from 1 to 4096, got 0"),
            (["landscape", "--warmup", "-1"], "--warmup: -1: must be an integer from 0 to 100"),
            (["landscape", "--device", "pixle3"], "--device: 'pixle3': unknown profile (did you mean 'pixel3'?)"),
            (["profiles", "validate", files["typo"]],
             f"{files['typo']}: dram_latancy_ns: unknown field (did you mean 'dram_latency_ns'?)"),
            (["thermal", "--out", files["file"]], f"--out: {files['file']}/thermal: {files['file']} is a file"),
            (["profiles", "validate", str(EXAMPLES / "sessions.csv")], f"{EXAMPLES / 'sessions.csv'}: <syntax>: not valid TOML"),
            (["traces", "show", files["file"]], f"{files['file']}: path: not a directory"),
        ]:
            rc, _, err = run_main(argv)
            assert rc == 2 and err.startswith(f"swansim: error: {line}"), err


def test_a_header_only_trace_has_no_sessions_not_a_nan_median(tmp_path):
    for name in ("sessions.csv", "states.csv"):
        header = (EXAMPLES / name).read_text().splitlines()[0]
        (tmp_path / name).write_text(header + "\n")
    rc, out, err = run_main(["traces", "show", str(tmp_path)])
    assert rc == 0 and "nan" not in out and "no sessions" in out, out + err


def test_a_traceback_is_left_for_bugs(monkeypatch):
    """Only InputError is turned into a one-line error; a bug still shows where it is."""
    import swansim.cli.traces as traces_cli
    monkeypatch.setattr(traces_cli, "_summary", lambda trace: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["traces", "show", str(EXAMPLES)])


def test_one_line_error_from_a_fresh_process():
    r = subprocess.run([sys.executable, "-m", "swansim", "profiles", "show", "nokia3310"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("swansim: error: profiles show: 'nokia3310': unknown profile") and "pixel3" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("script, args, message", [
    ("baseline_landscape.py", ["--devices", "nokia3310"], "--devices: 'nokia3310': unknown profile"),
    ("fleet_tta.py", ["--tasks", "resnet35", "--out", "unused"], "--tasks: 'resnet35': unknown task"),
    ("fleet_tta.py", ["--rounds", "pape", "--out", "unused"], "--rounds: 'pape': not a number of rounds or 'paper'"),
    ("fleet_tta.py", ["--bogus"], "command line: arguments: unrecognized arguments: --bogus"),
    ("policy_speedup.py", ["--jobs", "two"], "--jobs: 'two': not an integer"),
    ("ux_raise.py", ["--devices", "nokia3310"], "--devices: 'nokia3310': unknown profile"),
    ("where_threads_run.py", ["--choice", "48"], "--choice: '48': cpus must be distinct and below 8 on pixel3"),
    ("calibrate_runtime.py", ["--placement", "walt-bogus"], "--placement: 'walt-bogus': unknown placement"),
    ("thermal_throttling.py", ["0.1"], "--minutes: 0.1: must be a finite number of minutes from 0.5 to 600"),
    ("wake_sweep.py", ["--background", "4,4"], "--background: '4,4': give THREADS,PERIOD_MS,BURST_US"),
    ("wake_sweep.py", ["--runtime", "nosuch"], "--runtime: runtime: unknown runtime 'nosuch'"),
    ("wake_sweep.py", ["--loops", "macro"], "--loops: 'macro': not one of 'chunked', 'repeats'"),
    ("macro_check.py", ["--runtime", "nosuch"], "--runtime: runtime: unknown runtime 'nosuch'"),
    ("wake_sweep.py", ["--background", "4,0,100"],
     "--background period: 0.0: must be a finite number of milliseconds from 0.1 to 10000"),
])
def test_an_experiment_scripts_bad_input_is_one_line(script, args, message, tmp_path):
    r = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "experiments" / script), *args],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith(f"{script}: error: {message}")
    assert len(r.stderr.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


@pytest.mark.parametrize("script", sorted([*(Path(__file__).parents[1] / "experiments").glob("*.py"),
                                           *(Path(__file__).parents[1] / "benchmarks").glob("bench_*.py")]),
                         ids=lambda p: p.name)
def test_every_script_refuses_an_option_it_does_not_have(script, tmp_path):
    """A mistyped option must not be ignored while the script runs for minutes (two once were)."""
    r = subprocess.run([sys.executable, str(script), "--no-such-option"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == f"{script.name}: error: command line: arguments: unrecognized " \
                                             "arguments: --no-such-option\n"
    assert not any(tmp_path.iterdir())


def test_a_sensitivity_resume_refuses_rows_from_other_code(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("device,model,variant,choice,kind,latency_s,energy_j\npixel3,resnet34,reference,4,pinned,1,1\n")
    before = rows.read_bytes()
    r = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "experiments" / "fidelity_sensitivity.py"),
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "rows.csv: fingerprint: computed by other code" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and rows.read_bytes() == before


# ---------------------------------------------------------------------------------------------
# Fuzzing: random bad values for random options of every command


def _bad_ints(lo: int, hi: int):
    return st.one_of(st.integers(max_value=lo - 1).map(str), st.integers(min_value=hi + 1, max_value=10**30).map(str),
                     st.sampled_from(["", "abc", "1.5", "nan", "1e3", "0x10", "--", " "]))


def _bad_floats(lo: float, hi: float):
    return st.one_of(st.sampled_from(["nan", "inf", "-inf", "NaN", "", "abc", "1,5", "1e999"]),
                     st.floats(max_value=lo, exclude_max=True, allow_nan=False).map(repr),
                     st.floats(min_value=hi, exclude_min=True, allow_nan=False).map(repr))


def _bad_names(known: tuple[str, ...], alphabet=st.characters(codec="utf-8")):
    return st.text(alphabet, max_size=12).filter(lambda s: s not in known)


def _bad_lists(known: tuple[str, ...]):
    item = _bad_names(known, st.characters(codec="utf-8", exclude_characters=",")).filter(str.strip)
    return st.one_of(st.sampled_from(["", ",", ",,", " , "]),
                     st.sampled_from(known).map(lambda n: f"{n},{n}"),
                     st.lists(item, min_size=1, max_size=3).map(",".join))


PROFILES = ("pixel3", "galaxy-s10e", "sdm845", "rk3588-board")
BAD_OUT = st.sampled_from(["{file}", "{file}/sub", "{unwritable}", ""])
BAD_INPUT = st.one_of(st.tuples(*[st.integers(-5, 10**6)] * 3).filter(
    lambda t: min(t) < 1 or t[0] > 64 or max(t[1:]) > 4096).map(lambda t: "x".join(map(str, t))),
    st.text(max_size=10).filter(lambda s: not re.fullmatch(r"\d+x\d+x\d+", s) and not s.startswith("-")))

# command -> {option: strategy of bad values}; options not drawn keep their (valid) defaults
BAD = {
    ("landscape",): {
        "--device": _bad_names(PROFILES), "--model": _bad_names(("resnet34",)), "--runtime": _bad_names(("pytorch",)),
        "--mode": _bad_names(("train", "infer")), "--batch": _bad_ints(1, 4096), "--classes": _bad_ints(1, 100_000),
        "--input": BAD_INPUT, "--batches": _bad_ints(1, 100), "--warmup": _bad_ints(0, 100),
        "--jobs": _bad_ints(1, 1024), "--out": st.sampled_from(["{dir}", "{file}/x.csv", "", "{unwritable}/x"]),
    },
    ("thermal",): {
        "--devices": _bad_lists(PROFILES), "--minutes": _bad_floats(0.5, 600.0), "--sample-s": _bad_floats(0.01, 15.0),
        "--governor": _bad_names(("schedutil",)), "--thermal-governor": _bad_names(("step_wise", "power_allocator")),
        "--seed": _bad_ints(0, 2**32 - 1), "--jobs": _bad_ints(1, 1024), "--out": BAD_OUT,
    },
    ("ux",): {
        "--devices": _bad_lists(PROFILES), "--models": _bad_lists(("resnet34", "mobilenet_v2")),
        "--passes": _bad_ints(1, 100), "--warmup-s": _bad_floats(0.0, 3600.0), "--light-s": _bad_floats(0.0, 3600.0),
        "--placement": _bad_names(("wakeup", "eas", "throughput")), "--seed": _bad_ints(0, 2**32 - 1),
        "--seeds": _bad_ints(1, 1000), "--jobs": _bad_ints(1, 1024), "--out": BAD_OUT,
    },
    ("demo",): {
        "--device": _bad_names(PROFILES), "--seed": _bad_ints(0, 2**32 - 1),
        "--thermal-minutes": _bad_floats(0.5, 600.0), "--jobs": _bad_ints(1, 1024), "--out": BAD_OUT,
    },
    ("traces", "synth"): {
        "--users": _bad_ints(1, 100_000), "--days": _bad_ints(1, 3650), "--seed": _bad_ints(0, 2**32 - 1),
        "--out": BAD_OUT,
    },
}


def _all_profiles() -> tuple[str, ...]:
    from swansim.hw.profile import Catalogue
    cat = Catalogue.load()
    return tuple(cat.devices) + tuple(cat.socs)


# commands whose one argument is positional: a bad value for it
BAD_POSITIONAL = {
    ("profiles", "show"): _bad_names(_all_profiles()),
    ("profiles", "validate"): st.text(max_size=16).filter(lambda s: not s.startswith("-")),
    ("traces", "show"): st.text(max_size=16).filter(lambda s: not s.startswith("-") and s.strip("./") != "traces"),
}


@st.composite
def bad_command(draw):
    command = draw(st.sampled_from(sorted(BAD) + sorted(BAD_POSITIONAL)))
    if command in BAD_POSITIONAL:
        return [*command, "--", draw(BAD_POSITIONAL[command])]
    options = BAD[command]
    chosen = draw(st.permutations(sorted(options)))[:draw(st.integers(1, 3))]
    argv = list(command)
    for opt in chosen:
        argv += [f"{opt}={draw(options[opt])}"]   # "=": a value may start with "-"
    if command == ("traces", "synth") and "--out" not in chosen:
        argv.append("--out={dir}/t")
    return argv


FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(argv=bad_command())
def test_fuzz_bad_options_are_one_line_errors_before_any_work(argv, files, tmp_path_factory):
    for key, path in files.items():
        argv = [a.replace("{" + key + "}", path) for a in argv]
    cwd = tmp_path_factory.mktemp("cwd")
    with tripwire(), contextlib.chdir(cwd):
        rc, _, err = run_main(argv)
    assert_one_line_error(rc, err)
    assert not any(cwd.iterdir()), "a bad input wrote output"


def _mutations(text: str):
    """A valid file, with one line dropped, duplicated, or one value replaced by junk."""
    lines = text.splitlines()
    junk = st.one_of(st.text(max_size=8), st.sampled_from(["nan", "inf", "-1", "1e30", '"x"', "[]", "true", "",
                                                           "[1, 2]", "0"]))
    return st.one_of(
        st.integers(0, len(lines) - 1).map(lambda i: lines[:i] + lines[i + 1:]),
        st.integers(0, len(lines) - 1).map(lambda i: lines[:i + 1] + lines[i:]),
        st.tuples(st.integers(0, len(lines) - 1), junk).map(
            lambda t: lines[:t[0]] + [re.sub(r"([=,]\s*)[^,=]*$", lambda m: m.group(1) + t[1], lines[t[0]], count=1)]
            + lines[t[0] + 1:]),
    ).map(lambda ls: "\n".join(ls) + "\n")


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["profile", "sessions.csv", "states.csv", "manifest.json", "bytes"]))
def test_fuzz_file_contents_load_or_fail_in_one_line(data, kind, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    if kind == "profile":
        (d / "p.toml").write_text(data.draw(_mutations(SDM845)))
        argv = ["profiles", "validate", str(d / "p.toml")]
    elif kind == "bytes":
        (d / "p.toml").write_bytes(data.draw(st.binary(max_size=200)))
        argv = ["profiles", "validate", str(d / "p.toml")]
    else:
        for name in ("sessions.csv", "states.csv", "manifest.json"):
            text = (EXAMPLES / name).read_text()
            if name == kind:
                text = data.draw(_mutations("\n".join(text.splitlines()[:40])))
            (d / name).write_text(text)
        argv = ["traces", "show", str(d)]
    rc, out, err = run_main(argv)
    assert rc in (0, 2) and "Traceback" not in err, err
    if rc == 2:
        assert_one_line_error(rc, err)


# ---------------------------------------------------------------------------------------------
# Every command runs, with tiny arguments


def test_profiles_list_shows_every_soc_and_phone():
    rc, out, _ = run_main(["profiles", "list"])
    assert rc == 0
    for name in ("sdm845", "sm8150", "sm8250", "sm8350", "gs101", "mt8183", "msm8998", "kirin970",
                 "sm8550", "dimensity9300", "rk3588", "pixel3", "galaxy-s10e", "galaxy-tab-s6",
                 "oneplus8", "mi10", "pixel6"):
        assert f"\n{name} " in out


def test_validate_all_profiles():
    rc, out, _ = run_main(["profiles", "validate"])
    assert rc == 0 and out.startswith("ok: ")


def test_malformed_profile_is_one_line_exit_2(tmp_path):
    head, tail = SDM845.split('name = "big"', 1)   # drop the big cluster's OPP table
    tail = "\n".join(line for line in tail.splitlines() if not line.startswith("opp_freq_mhz"))
    bad = tmp_path / "bad.toml"
    bad.write_text(head + 'name = "big"' + tail)
    rc, _, err = run_main(["profiles", "validate", str(bad)])
    assert_one_line_error(rc, err, str(bad))
    assert "clusters[1].opp_freq_mhz" in err and "OPP table" in err


def test_landscape_command(tmp_path):
    out = tmp_path / "l" / "resnet18.csv"
    rc, stdout, err = run_main(["landscape", "--model", "resnet18", "--batch", "2", "--input", "1x32x32",
                                "--no-mixed", "--batches", "1", "--warmup", "0", "--jobs", "1", "--out", str(out)])
    assert rc == 0, err
    df = pd.read_csv(out, dtype={"choice": str})
    assert list(df["choice"]) == ["0", "01", "012", "0123", "4", "45", "456", "4567", "01234567/t4"]
    assert (df["latency_s"] > 0).all() and (df["energy_j"] > 0).all()
    assert df.loc[df["kind"] == "default", "speedup"].iloc[0] == 1.0
    manifest = json.loads((out.parent / "resnet18.manifest.json").read_text())
    assert list(manifest["files"]) == ["resnet18.csv"] and manifest["seed"] == 0 and manifest["config"]["batch"] == 2
    assert "4567" in stdout


def test_thermal_command(tmp_path):
    rc, stdout, err = run_main(["thermal", "--out", str(tmp_path), "--devices", "pixel3", "--minutes", "0.5",
                                "--jobs", "1"])
    assert rc == 0, err
    out = tmp_path / "thermal"
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["load"]) == ["big", "little"] and (summary["sustained_gflops"] > 0).all()
    assert not any("wall" in c for c in summary.columns)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 0 and "wall_s" in manifest and manifest["profiles_sha256"]
    assert set(manifest["files"]) == {p.name for p in out.iterdir()} - {"manifest.json"}
    assert "last 0.25 min" in stdout


def test_traces_commands(tmp_path):
    rc, stdout, err = run_main(["traces", "synth", "--users", "3", "--days", "2", "--seed", "4", "--out",
                                str(tmp_path / "t")])
    assert rc == 0, err
    assert "3 users x 2 days" in stdout
    rc, shown, _ = run_main(["traces", "show", str(tmp_path / "t")])
    assert rc == 0 and shown.splitlines()[-1] == stdout.splitlines()[-1]
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert manifest["seed"] == 4 and list(manifest["files"]) == ["sessions.csv", "states.csv"] and "git_commit" in manifest
    for name, digest in manifest["sha256"].items():   # full digests of what is there
        assert digest == hashlib.sha256((tmp_path / "t" / name).read_bytes()).hexdigest()


@pytest.fixture
def small_demo(monkeypatch):
    """The demo's pipeline (landscapes, throttling, Work-like score, tables, plots, manifest) with
    its heavy runs made small: one Fig. 2 model at batch 2 without mixed choices, and the Work-like
    score without a background. A full demo takes minutes; `make demo` runs it."""
    import functools

    import swansim.runs.demo as demo
    monkeypatch.setattr(demo, "FIG2_TASKS", ("resnet34",))
    monkeypatch.setattr(demo, "landscape_frame", functools.partial(demo.landscape_frame, batch=2, mixed=False,
                                                                    batches=1, warmup=0))
    monkeypatch.setattr(demo, "UX_BACKGROUNDS", demo.UX_BACKGROUNDS[:1])

    def tiny_fleet(cfg, out, jobs, progress):
        from swansim.federated.local import run_policy_fleet
        from swansim.federated.fleet import FleetConfig

        small = FleetConfig(model="resnet34", policies=("swan", "pytorch-default"), clients=48, per_round=4,
                            rounds=2, seed=cfg.seed, devices=(("pixel3", 1.0),), trace_days=2)
        return run_policy_fleet(small, out, jobs, progress=progress)[0]

    monkeypatch.setattr(demo, "_fleet", tiny_fleet)


def test_demo_command_writes_what_its_manifest_lists_and_reruns_byte_identical(small_demo, tmp_path):
    runs = []
    for name in ("a", "b"):
        rc, stdout, err = run_main(["demo", "--out", str(tmp_path / name), "--thermal-minutes", "0.5", "--jobs", "1",
                                    "--policy-s", "10"])
        assert rc == 0, err
        runs.append(tmp_path / name / "demo")
    a, b = runs
    manifest = json.loads((a / "manifest.json").read_text())
    assert {f.split("/")[0] for f in manifest["files"]} == {p.name for p in a.iterdir()} - {"manifest.json"}
    assert {"landscape-resnet34.csv", "landscapes.png", "thermal-big.png", "thermal-summary.csv", "ux.csv",
            "policies.csv", "fleet/summary.csv", "fleet.png", "fleet/batch-memo.pkl",
            "fleet/checkpoints/swan.log"} <= set(manifest["files"])
    assert manifest["seed"] == 0 and manifest["git_commit"] is not None and "wall_s" in manifest
    assert "sdm845" in " ".join(manifest["profiles_sha256"])
    for f in manifest["files"]:
        if not f.endswith("manifest.json"):   # a manifest says when it was written
            assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert " 1000 " in stdout and "e+03" not in stdout


@pytest.mark.parametrize("argv, where", [
    (["run", "--seed", "12345678901234567890123"], "--seed"),                   # the seed rule of every command
    (["compare", "--seed", "12345678901234567890123"], "--seed"),
    (["compare", "--policies", "swan,bogus"], "--policies"),                  # named as the user spelled it
    (["compare", "--devices", "pixel3,PIXEL3"], "--devices"),
    (["run", "--device", "PIXEL3"], "--device"),
    (["compare", "--set", "ambient_c=25,25"], "--set"),                       # a value swept twice
    (["run", "--set", "ambient_c=25", "--set", "ambient_c=30"], "--set"),     # a field set twice
    (["run", "--perfetto", ""], "--perfetto"),                               # no silent 'no trace'
    (["fleet", "--devices", "pixel3:x"], "--devices"),                       # a weight that is no number
    (["fleet", "--devices", "nokia3310"], "--devices"),                      # the config's own checks, named
    (["fleet", "--devices", "pixel3,pixel3:2"], "--devices"),                # as the option
    (["fleet", "--devices", ","], "--devices"),
    (["run", "--runtime", "ncnn"], "--runtime"),                             # an inference engine does not train
    (["landscape", "--runtime", "ncnn"], "--runtime"),                       # (--mode infer: it may)
    (["fleet", "--runtime", "ncnn"], "--runtime"),
    (["compare", "--runtime", "ncnn"], "--runtime"),
    (["ux", "--runtime", "nosuch"], "--runtime"),
    (["landscape", "--runtime", "no/such/file.toml"], "--runtime"),
    (["fleet", "--runtime", "nosuch"], "--runtime"),
    (["fleet", "--runtime", "no/such/file.toml"], "--runtime"),
])
def test_one_rule_per_input_before_any_work(argv, where, tmp_path):
    with tripwire():
        rc, _, err = run_main(argv + ["--out", str(tmp_path / "o")])
    assert_one_line_error(rc, err, where)
    assert not (tmp_path / "o").exists()


def test_the_fleets_phone_mix_is_an_option():
    """``--devices NAME[:WEIGHT],...`` is the config's (profile, weight) pairs, a weight 1 if left out."""
    from swansim.cli import build_parser
    from swansim.cli.common import config_from
    from swansim.federated.fleet import FleetConfig

    args = build_parser().parse_args(["fleet", "--devices", "pixel3, galaxy-s10e:2.5", "--out", "x"])
    assert config_from(args, FleetConfig).devices == (("pixel3", 1.0), ("galaxy-s10e", 2.5))
    assert config_from(build_parser().parse_args(["fleet", "--out", "x"]), FleetConfig).devices == ()


# What a profile file may not say, --set may not say either (the loader reads it again).
SET_REFUSED = ["thermal.polling_idle_ms=0", "ambient_c=1e308", "soc.leakage_doubling_c=0",
               "soc.clusters.little.cpus[0]=7", "soc.dram_bandwidth_gbps=0", "soc.clusters.big.capacity_dmips_mhz=0",
               "soc.clusters.big.opp_freq_mhz[1]=100", "ambient_c=-300", "display_refresh_hz=0",
               "soc.clusters.little.capacity_dmips_mhz=4096", "thermal.trip_c[0]=inf"]


@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.parametrize("setting", SET_REFUSED)
def test_set_goes_through_the_profile_loader(command, setting, tmp_path):
    with tripwire():
        rc, _, err = run_main([command, "--set", setting, "--out", str(tmp_path / "o")])
    assert_one_line_error(rc, err, "--set")
    assert setting.split("=")[0] in err
    assert not (tmp_path / "o").exists()


def test_a_differently_cased_name_is_suggested():
    with tripwire():
        rc, _, err = run_main(["run", "--device", "PIXEL3"])
    assert rc == 2 and "did you mean 'pixel3'" in err


def test_the_trace_may_not_be_a_file_the_run_writes(tmp_path):
    out = tmp_path / "d"
    for name in ("batches.csv", "manifest.json"):
        with tripwire():
            rc, _, err = run_main(["run", "--out", str(out), "--perfetto", str(out / name)])
        assert_one_line_error(rc, err, "--perfetto")
    assert not out.exists()   # refused before anything was created
    with tripwire():   # a refused trace path creates no output directory
        rc, _, err = run_main(["run", "--out", str(out), "--perfetto", str(tmp_path / "t") + "/"])
    assert_one_line_error(rc, err, "--perfetto")
    assert not out.exists()


def test_the_api_takes_numpy_seeds_and_names_as_a_string(tmp_path):
    import numpy as np

    import swansim
    from swansim.errors import InputError

    with tripwire(), pytest.raises(WorkStarted):   # accepted: the work begins
        swansim.run("pixel3", "resnet34", "pytorch-default", duration_s=1, seed=np.int64(3), progress=False)
    with pytest.raises(InputError, match=r"^swansim\.run\(trace=\.\.\.\)"):
        swansim.run("pixel3", "resnet34", "swan", duration_s=1, trace=123, progress=False)
    with tripwire(), pytest.raises(WorkStarted):   # "pixel3" is one device, not six
        swansim.compare(devices="pixel3", models="resnet34", policies="pytorch-default", duration_s=1, ux=False)
    for devices in ("pixel3,galaxy-s10e:2", {"pixel3": 1, "galaxy-s10e": 2}, [("pixel3", 1), ("galaxy-s10e", 2)]):
        with tripwire(), pytest.raises(WorkStarted):   # the fleet's phone mix as the command line takes it, or as data
            swansim.fleet(devices=devices, rounds=1, out=tmp_path / "f", progress=False)
    with pytest.raises(InputError, match=r"^swansim\.fleet\(devices=\.\.\.\): pixel3:two: "):
        swansim.fleet(devices="pixel3:two", out=tmp_path / "g", progress=False)


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                  st.text(max_size=6), st.lists(st.integers(), max_size=2), st.tuples(st.text(max_size=3)))


@FUZZ
@given(data=st.data())
def test_fuzz_api_fleet_keywords_are_one_line_errors_or_accepted(data, tmp_path_factory):
    """Any value for any `FleetConfig` keyword of `swansim.fleet`: one InputError (no
    TypeError, no traceback from deep inside) before any work, or the work starts."""
    from dataclasses import fields

    import swansim
    from swansim.errors import InputError
    from swansim.federated.fleet import FleetConfig

    name = data.draw(st.sampled_from([f.name for f in fields(FleetConfig)]))
    value = data.draw(_JUNK)
    out = tmp_path_factory.mktemp("api") / "o"
    with tripwire():
        try:
            swansim.fleet(out=out, progress=False, **{name: value})
        except InputError as e:
            assert len(str(e).splitlines()) == 1
            assert not out.exists()
        except WorkStarted:
            pass


@pytest.mark.parametrize("call, kwargs, keyword", [
    ("run", dict(duration_s=-1), "swansim.run(duration_s=...)"),
    ("run", dict(duration_s=10, bench_at_s=-5), "swansim.run(bench_at_s=...)"),
    ("run", dict(overrides=(("ambient_c", "999"),)), "swansim.run(overrides=...)"),
    ("compare", dict(devices="pixel3,pixel3"), "swansim.compare(devices=...)"),
    ("compare", dict(policies=["swan", "bogus"]), "swansim.compare(policies=...)"),
    ("compare", dict(sets={"ambient_c": [1e308]}), "swansim.compare(sets=...)"),
])
def test_an_api_error_names_the_keyword_not_the_option(call, kwargs, keyword):
    import swansim
    from swansim.errors import InputError

    with tripwire(), pytest.raises(InputError) as e:
        getattr(swansim, call)(**kwargs, progress=False)
    assert str(e.value).startswith(keyword + ": ") and "--" not in str(e.value).split(":")[0]


@pytest.mark.parametrize("argv, where", [
    # two 300-value sweeps: 180,000 runs of 6 h, refused by its total, not validated one by one
    (["compare", "--set", "ambient_c=" + ",".join(str(20 + i / 10) for i in range(300)),
      "--set", "base_power_mw=" + ",".join(str(200 + i) for i in range(300)), "--duration", "21600"], "--duration"),
    (["fleet", "--clients", "100000", "--per-round", "100000", "--rounds", "10000", "--local-steps", "1000"],
     "fleet config"),
])
def test_the_total_work_is_bounded_before_any_work(argv, where, tmp_path):
    with tripwire():
        rc, _, err = run_main(argv + ["--out", str(tmp_path / "o")])
    assert_one_line_error(rc, err, where)
    assert "--no-limit" in err and "more work than the bound" in err


def test_no_limit_lifts_the_bound():
    from dataclasses import replace

    from swansim.errors import InputError
    from swansim.hw.profile import Catalogue
    from swansim.runs.compare import CompareConfig

    big = CompareConfig(policies=("pytorch-default",), duration_s=6 * 3600.0, sets=(("ambient_c", ("25", "26", "27")),))
    with pytest.raises(InputError, match="no-limit"):
        big.check(Catalogue.load())
    assert len(replace(big, no_limit=True).check(Catalogue.load())) == 3


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    """A write that fails half-way (a full disk) leaves the previous file, no partial one, and
    one line naming the file."""
    from swansim.errors import InputError
    from swansim.results import atomic, write_csv

    target = tmp_path / "t.csv"
    write_csv(pd.DataFrame({"a": [1, 2]}), target)
    before = target.read_bytes()
    with pytest.raises(InputError, match="t.csv.*No space left"):
        with atomic(target) as tmp:
            tmp.write_text("a\n1\n")              # half written, then the disk is full
            raise OSError(28, "No space left on device")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_full_disk_is_one_line_and_keeps_the_complete_files(tmp_path, monkeypatch):
    """`traces synth` whose second table hits a full disk: exit 2, one line, the first table
    complete, nothing half written."""
    import swansim.apps.traces as T

    real = T.write_states
    monkeypatch.setattr(T, "write_states", lambda states, path: _full_write(real, states, path))
    out = tmp_path / "t"
    rc, _, err = run_main(["traces", "synth", "--users", "2", "--days", "1", "--out", str(out), "--quiet"])
    assert_one_line_error(rc, err)
    assert "No space left" in err
    assert (out / "sessions.csv").read_text().startswith("user_id,")
    assert not (out / "states.csv").exists() and not list(out.glob(".*partial"))


def _full_write(real, states, path):
    """``real`` writes the table, then the disk is full before it is renamed into place."""
    from swansim.results import atomic

    with atomic(path) as tmp:
        real(states, tmp)
        raise OSError(28, "No space left on device")


def test_ctrl_c_stops_the_pool_at_once_with_one_line_and_no_process_left(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during a pooled command:
    exit 130 within seconds, one line, no traceback, no worker left running."""
    import os
    import signal
    import time

    cmd = [sys.executable, "-c", "import sys; from swansim.cli import main; sys.exit(main(sys.argv[1:]))",
           "thermal", "--devices", "pixel3,galaxy-s10e,oneplus8,mi10", "--minutes", "300", "--no-plots",
           "--out", str(tmp_path / "o"), "--jobs", "2", "--quiet"]
    # as a terminal starts it: Ctrl-C at its default (a suite run in the background of a
    # non-interactive shell inherits it ignored, and so would the command)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4.0)                          # the pool is up and simulating (a run takes ~15 s of CPU)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)       # an impatient second Ctrl-C changes nothing
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10.0
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == ["swansim: interrupted; files already complete are kept, none is half written"]
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # nothing of the group is left
        os.killpg(proc.pid, 0)
