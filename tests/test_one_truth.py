"""One definition per concept, used by every path.

The core classes (little, big, prime; capacity), the Swan tasks (model, input, classes, batch)
and the warm-up before the owner's benchmark each have one home; landscape, ux, demo, thermal,
the calibration and the batch model read them there. The checks are behavioural (what each
path builds equals what the home says) and structural (no other module spells the figures).
"""
import ast
from pathlib import Path

import pytest

import swansim
from swansim.device import DeviceConfig
from swansim.dnn.choices import Choice, little_one, pytorch_default, top_one
from swansim.dnn.tasks import FIG2_TASKS, SWAN_BATCH, SWAN_TASKS, build_task
from swansim.hw.profile import Catalogue
from swansim.runs import scenarios, thermal, ux
from swansim.runs.calibration import Fig2, Ncnn
from swansim.dnn import calibrate as cal

CAT = Catalogue.load()
SRC = Path(swansim.__file__).parent


@pytest.mark.parametrize("name", sorted(CAT.devices))
def test_core_classes_come_from_the_soc(name):
    soc = CAT.device(name).soc
    ranked = soc.ranked_clusters
    assert [c.capacity for c in ranked] == sorted(c.capacity_dmips_mhz * c.fmax_mhz for c in soc.clusters)
    assert soc.little is ranked[0]
    assert pytorch_default(soc).threads == len(soc.big_cpus)
    assert thermal.load_cpus(CAT.device(name), "big") == list(soc.big_cpus)
    assert thermal.load_cpus(CAT.device(name), "little") == list(soc.little.cpus)
    assert little_one(soc).cpus == (soc.little.cpus[0],)
    # the single core Swan settles on for the depthwise models: the top cluster's first
    assert top_one(soc).cpus == (ranked[-1].cpus[0],)
    assert top_one(soc).cpus[0] in (soc.prime.cpus if soc.prime is not None else soc.big_cpus or soc.little.cpus)


def test_every_path_builds_the_swan_tasks_from_one_table():
    for model, t in SWAN_TASKS.items():
        g = build_task(model)
        assert (g.batch, tuple(g.input_shape), g.num_classes) == (SWAN_BATCH, t.input_shape, t.num_classes)
    fig2 = Fig2(CAT)
    for key in fig2.keys:
        assert key.model in FIG2_TASKS and key.input_shape is None and key.batch is None   # -> build_task
    bg = scenarios.TrainingBackground("mobilenet_v2")
    assert bg.model in SWAN_TASKS
    assert set(ux.UxConfig().models) <= set(SWAN_TASKS)
    rows = cal.read_ncnn(CAT)
    for key, row in zip(Ncnn(CAT, rows).keys, rows):
        assert isinstance(key.plan, Choice) and key.plan.cpus == CAT.socs[row.soc].big_cpus
        # benchncnn's own input, never a Swan task's (mobilenet_v2 trains at 3x112x112, 600 classes)
        assert key.num_classes == 1000
        assert key.input_shape == ((3, 227, 227) if row.model in ("squeezenet1_1", "alexnet") else (3, 224, 224))
    assert any(row.model in SWAN_TASKS for row in rows)   # the case the explicit input is for


def test_one_warmup_for_the_owners_benchmark():
    import inspect

    for fn in (scenarios.run_workbench, scenarios.work_score, scenarios.app_jank):
        assert inspect.signature(fn).parameters["warmup_s"].default == scenarios.WARMUP_S
    assert ux.UxConfig().warmup_s == scenarios.WARMUP_S


def test_one_length_for_the_owners_benchmark(monkeypatch):
    """Every path that runs the Work-like benchmark without being told how long runs the app
    table's passes of its script (a run as long as PCMark's Work test)."""
    import inspect

    from swansim.apps import appmodels, workbench
    from swansim.runs.compare import CompareConfig
    from swansim.session import phone

    assert appmodels.load_app_table().passes == 25
    for fn in (scenarios.run_workbench, scenarios.work_score, scenarios.fig3_drop_pct, scenarios.reference_times):
        assert inspect.signature(fn).parameters["passes"].default is None
    assert ux.UxConfig().passes is None and CompareConfig().bench_passes is None
    assert phone.RunConfig().bench_passes is None
    seen = []

    def script(tasks, seed=0, passes=1):
        seen.append(passes)
        return workbench.script(tasks, seed, 1)

    monkeypatch.setattr(scenarios, "script", script)
    monkeypatch.setattr(phone, "script", script)
    scenarios.run_workbench(CAT.device("pixel3"), DeviceConfig(), None)
    phone.run_policy(phone.RunConfig(device="pixel3", policy="idle-charging-only", duration_s=None, bench_at_s=1.0),
                     subtract_background=False)
    assert seen == [25, 25]


def test_a_run_and_the_batch_model_boot_the_same_kernel():
    """PyTorch's default on the OnePlus 8 depends on the kernel (WALT and core_ctl put the
    unpinned team on the little cores, 3.5 s a ResNet-34 batch against 0.4 s on 4567): the
    policy runs and the batch model (landscape, fleet) must agree on it (within 3%: threads
    sharing a core take CFS turns, so a batch's latency moves with the turns' phase at its
    start, a few 24 ms turns in 3.5 s)."""
    from swansim.batchmodel import BatchKey, simulate_batch
    from swansim.session.phone import RunConfig, run_policy

    soc = CAT.device("oneplus8").soc
    cost = simulate_batch(BatchKey("oneplus8", "resnet34", pytorch_default(soc)), record_layers=False)
    r = run_policy(RunConfig(device="oneplus8", model="resnet34", policy="pytorch-default", duration_s=12.0),
                   subtract_background=False)
    assert r.batches["latency_s"].iloc[1:].mean() == pytest.approx(cost.latency_s, rel=0.03)


def _literals(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
            yield tuple(e.value for e in node.elts)


def test_no_other_module_spells_the_figures():
    """Task input shapes live in dnn/tasks.py; capacity-dmips-mhz is read in hw/profile.py only."""
    shapes = {t.input_shape for t in SWAN_TASKS.values()}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        if rel != "dnn/tasks.py":
            assert not shapes & set(_literals(tree)), f"{rel} spells a Swan task's input shape"
        if rel not in ("hw/profile.py", "cli/profiles.py"):
            assert ".capacity_dmips_mhz" not in text, f"{rel} ranks cores its own way"


# Layers, low to high (DESIGN.md): a module may import its own layer and those below, never above.
_LAYERS = [
    {"errors", "checks", "registry", "options", "pool"},
    {"hw"}, {"kernel"}, {"dnn", "apps", "results", "plots"}, {"device"}, {"batchmodel", "policy"}, {"session"}, {"federated"},
    {"runs"}, {"api"}, {"cli"}, {"__init__", "__main__"},
]
_RANK = {name: i for i, layer in enumerate(_LAYERS) for name in layer}


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def test_dependencies_point_downward():
    """Every import of a swansim module, at module level or inside a function, goes to the
    module's own layer or one below it."""
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        own = _RANK[rel.parts[0].removesuffix(".py")]
        for name in _imports(ast.parse(path.read_text())):
            parts = name.split(".")
            if parts[0] != "swansim" or len(parts) == 1:
                continue
            assert _RANK[parts[1]] <= own, f"{rel.as_posix()} reaches up to {name}"


@pytest.mark.parametrize("construct, home", [
    ("PolicyView(", "session/step.py"), ("BatchStats(", "session/step.py"), ("ModelInfo(", "session/step.py"),
    ("App(", "apps/appmodels.py"), ("charging_loss_w -", "hw/platform.py"),
])
def test_the_step_the_owners_app_and_the_idle_floor_have_one_home(construct, home):
    """The per-batch step (the view a policy plans from, what it observes, what it knows of the
    model), an owner's app and the idle floor a batch's energy is counted above are built in
    one place, which every driver calls."""
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel != home and not rel.startswith("policy/"):
            code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
            assert f" {construct}" not in code and f"({construct}" not in code and f"={construct}" not in code, \
                f"{rel} builds {construct[:-1]} itself"


def test_one_default_device():
    """The default phone is written once per config and the CLI takes it from there."""
    from swansim.hw.profile import DEFAULT_DEVICE
    from swansim.runs.compare import CompareConfig
    from swansim.runs.demo import DemoConfig
    from swansim.runs.landscape import LandscapeConfig
    from swansim.session.phone import RunConfig

    assert RunConfig().device == LandscapeConfig().device == DemoConfig().device == DEFAULT_DEVICE
    assert CompareConfig().devices == (DEFAULT_DEVICE,)
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel not in ("__init__.py", "hw/profile.py", "runs/scenarios.py", "runs/ux.py", "runs/calibration.py"):
            assert 'default="pixel3"' not in path.read_text() and '= "pixel3"' not in path.read_text(), rel


def test_one_reader_of_sourced_toml():
    """Profiles, runtime profiles and the app models are read by `hw.sourced` alone: one rule for
    sources, one way to name a file and a field in an error."""
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel != "hw/sourced.py":
            assert "tomllib" not in path.read_text(), f"{rel} reads TOML itself"
