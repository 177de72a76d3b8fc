"""The one registry type, and a policy added from outside swansim through entry points."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from swansim.errors import InputError
from swansim.registry import Registry


def test_registry_lists_gets_and_names_the_nearest():
    r: Registry[int] = Registry("widget")
    r.register("alpha", 1)

    @r.register("beta")
    def beta():
        return 2

    assert r.names() == ("alpha", "beta") and "alpha" in r and r["alpha"] == 1 and r.get("beta") is beta
    assert list(r) == ["alpha", "beta"] and len(r) == 2
    with pytest.raises(InputError) as e:
        r.get("alpah", "--widget")
    assert e.value.where == "--widget" and "did you mean 'alpha'" in e.value.reason and "alpha, beta" in e.value.reason
    r.register("alpha", 1)              # the same object again: harmless
    with pytest.raises(ValueError, match="registered twice"):
        r.register("alpha", 3)


def test_every_plug_in_family_is_a_registry():
    from swansim.cli import COMMANDS
    from swansim.dnn.models import MODELS
    from swansim.kernel.cpufreq import GOVERNORS
    from swansim.kernel.placement import PLACEMENTS
    from swansim.kernel.thermal_gov import THERMAL_GOVERNORS
    from swansim.policy import POLICIES

    assert list(COMMANDS)[:3] == ["demo", "profiles", "thermal"] and "fleet" in COMMANDS
    for reg in (MODELS, GOVERNORS, PLACEMENTS, THERMAL_GOVERNORS, POLICIES, COMMANDS):
        assert isinstance(reg, Registry) and len(reg) >= 3


# A researcher's package: one module and the metadata pip would install for it.
_PLUGIN = '''
from swansim.policy import Policy


class Mine(Policy):
    """Every batch on the phone's last execution choice."""

    def plan(self, view):
        return view.uniform(view.choices[-1])
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("site")
    (root / "mine_policy.py").write_text(textwrap.dedent(_PLUGIN))
    info = root / "mine_policy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mine-policy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[swansim.policies]\nmine = mine_policy:Mine\nbroken = mine_policy:Nope\n")
    return str(root)


def _python(code: str, path: str, tmp_path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_policy_from_another_package_runs_in_run_compare_and_fleet(plugin_path, tmp_path):
    """Installed beside swansim (a distribution on the path with a ``swansim.policies`` entry
    point), the policy is listed by `run --help` and `swansim.policies()`, and runs in
    `compare` and the fleet with no edit to swansim; a plug-in that fails to load is named."""
    out = _python(textwrap.dedent('''
        import contextlib, io, json
        import swansim
        from swansim.cli import main
        from swansim.errors import InputError
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                main(["run", "--help"])
            except SystemExit:
                pass
        from swansim.dnn.choices import enumerate_choices
        from swansim.hw.profile import Catalogue
        last = list(enumerate_choices(Catalogue.load().device("pixel3").soc, mixed=True))[-1].label
        df = swansim.compare(["pixel3"], ["resnet34"], ["mine"], duration_s=20, ux=False, jobs=1, progress=False)
        res = swansim.fleet("resnet34", policies="mine", clients=48, per_round=4, rounds=1,
                            devices=(("pixel3", 1.0),), trace_days=2, out="fleet", jobs=1, progress=False)
        try:
            swansim.run("pixel3", "resnet34", "broken", duration_s=1, progress=False)
            broken = ""
        except InputError as e:
            broken = str(e)
        print(json.dumps({"help": buf.getvalue(), "listed": list(swansim.policies()["name"]),
                          "batches": int(df["batches"].iloc[0]), "plan": df["final_plan"].iloc[0], "last": last,
                          "fleet": list(res.summary["policy"]), "broken": broken}))
    '''), plugin_path, tmp_path)
    got = json.loads(out.strip().splitlines()[-1])
    assert "mine" in got["help"] and "mine" in got["listed"] and "broken" not in got["listed"]
    assert got["batches"] > 0 and got["plan"] == got["last"]
    assert got["fleet"] == ["mine"]
    assert "broken" in got["broken"] and "could not be loaded" in got["broken"] and "Nope" in got["broken"]
