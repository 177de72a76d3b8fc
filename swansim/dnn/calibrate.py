"""Calibration of runtime profiles on published figures: the data, the objective and the fit.

Targets (nothing else is fitted), transcribed in ``experiments/calibration/`` (see its README):
  * ``pytorch`` (training, batch 16): Swan paper Fig. 1 (per-core 512x512 fp32 matmul on
    SD865/SD855/SD845 little/big/prime) sets the GEMM (``linear``) efficiency per core family
    in closed form; Fig. 2a/2b (Pixel 3, normalised latency/energy/power of 4567, 4, 0123, 0
    for ResNet-34 and ShuffleNetV2-x2) set the mechanism parameters by a MAP fit.
  * ``ncnn`` (inference, batch 1, benchncnn's input): the ncnn benchmark rows (Tencent/ncnn
    benchmark/README.md, benchncnn) for the SoCs that have profiles, big cluster, 1 and 4 threads.

The predictions are the simulation's, exactly what users see: the residual functions live
above the device (swansim.runs.calibration) and hand this module a ``residual_fn``.

What is fitted, from which prior and within which plausible bounds is data: the runtime
TOML's ``[[fit.param]]`` tables (each with the source of its prior and bounds). The fit always
starts from those priors, so a re-run reproduces the committed values.

The fit is a maximum a-posteriori estimate in log space: squared log residuals over each
figure's reading uncertainty, plus a log-normal prior per parameter (so a parameter the
figures cannot see stays at its prior), plus the paper's selection as one-sided soft
constraints (its fastest choice beats every other prefix choice, its least-energy choice
every choice including mixed ones, the choice it normalises latency to is the slowest prefix
choice). The optimiser is a bounded coordinate search (a coarse scan, then golden section per
parameter, a few sweeps): numpy only, deterministic; every trial it makes is remembered, so
a point it comes back to costs nothing.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from swansim.dnn.models import DEFAULT_INPUT
from swansim.dnn.runtime import FitParam, Runtime, _replace_in_section, get_path, set_path, set_value, with_paths
from swansim.hw.profile import Catalogue

DATA_DIR = Path(__file__).resolve().parents[2] / "experiments" / "calibration"
FIG1_CSV = DATA_DIR / "swan_fig1.csv"
FIG2_CSV = DATA_DIR / "swan_fig2.csv"
NCNN_CSV = DATA_DIR / "ncnn_benchmark.csv"

SWAN_GOVERNOR = "schedutil"   # the Pixel 3's default cpufreq governor

# ncnn benchmark model names -> zoo names (rows of other models are skipped: not in the zoo)
NCNN_MODELS = {"squeezenet": "squeezenet1_1", "mobilenet": "mobilenet", "mobilenet_v2": "mobilenet_v2",
               "shufflenet_v2": "shufflenet_v2_x1_0", "resnet18": "resnet18", "alexnet": "alexnet",
               "vgg16": "vgg16", "resnet50": "resnet50"}
# What benchncnn feeds each model (Tencent/ncnn benchmark/benchncnn.cpp: ncnn::Mat(227, 227, 3)
# for squeezenet and alexnet, (224, 224, 3) for the others; ImageNet's 1000 classes), batch 1.
# Given explicitly: a model that is also a Swan task (mobilenet_v2) would otherwise be built at
# its task's input and classes (swansim.dnn.tasks).
NCNN_INPUT = {"squeezenet1_1": (3, 227, 227), "alexnet": (3, 227, 227)}   # others: DEFAULT_INPUT
NCNN_CLASSES = 1000

SELECTION_SIGMA = 0.01   # a 1% violation of the paper's ordering costs as much as one sigma
SELECTION_MARGIN = 0.03  # ... and "beats" means by at least 3% (an ordering that holds by less
                         # would flip with the reading error of the figure)
READ_ABS = 0.01          # figures are read to about +-0.01 of the normalised scale
READ_REL = 0.05          # and +-5% of the value
# Assumption: the model's structural error per normalised Fig. 2 point (a mechanism model of a
# phone it has never seen run, ~25% in log terms), added in quadrature to the reading error so
# that one point the mechanisms cannot reach does not bend every other one.
MODEL_SIGMA = 0.25


def reading_sigma(value: float, model: float = 0.0) -> float:
    """Log-space uncertainty of a value read off a figure (plus a model discrepancy)."""
    return math.sqrt(READ_REL ** 2 + (READ_ABS / value) ** 2 + model ** 2)


# -- the data ----------------------------------------------------------------------------------


def _rows(path: Path) -> list[dict]:
    """A CSV with '#' comment lines (the source notes) above its header."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.lstrip().startswith("#")))


def read_fig1(path: Path = FIG1_CSV) -> list[tuple[str, str, float]]:
    """Swan Fig. 1: (SoC profile, cluster name, ms) per core type."""
    return [(r["soc"], r["cluster"], float(r["matmul_ms"])) for r in _rows(path)]


def read_fig2(path: Path = FIG2_CSV) -> dict[str, dict[str, dict[str, float]]]:
    """Swan Fig. 2a/2b: model -> metric -> choice -> value normalised to the worst choice."""
    out: dict = {}
    for r in _rows(path):
        out.setdefault(r["model"], {}).setdefault(r["metric"], {})[r["choice"]] = float(r["value"])
    return out


@dataclass(frozen=True)
class NcnnRow:
    soc: str
    model: str
    threads: int
    ms: float

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """The input benchncnn runs the model at (`NCNN_INPUT`)."""
        return NCNN_INPUT.get(self.model, DEFAULT_INPUT)


def read_ncnn(cat: Catalogue, path: Path = NCNN_CSV) -> list[NcnnRow]:
    """Rows of the ncnn benchmark file whose SoC has a profile and whose model is in the zoo."""
    rows = []
    for r in _rows(path):
        model = NCNN_MODELS.get(r["model"])
        if model is None or r["soc"] not in cat.socs or r["cluster"] != "big":
            continue
        rows.append(NcnnRow(r["soc"], model, int(r["num_threads"]), float(r["avg_ms"])))
    return rows


# -- residuals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Residual:
    figure: str
    point: str
    target: float
    predicted: float
    sigma_log: float

    @property
    def log_error(self) -> float:
        return math.log(self.predicted / self.target)


def fig1_efficiency(cat: Catalogue, rt: Runtime, fig1=None) -> tuple[dict[str, float], list[Residual]]:
    """GEMM efficiency per core family from Fig. 1 in closed form (geometric mean), + residuals."""
    logs: dict[str, list[float]] = {}
    points = []
    flops = 2.0 * 512 ** 3
    for soc_name, cluster, ms in (fig1 or read_fig1()):
        soc = cat.socs[soc_name]
        c = next(c for c in soc.clusters if c.name == cluster)
        fam = rt.family_of(c.uarch)
        achieved = flops / (ms / 1000.0) / (c.fmax_mhz * 1e6 * c.gemm_flop_per_cycle)
        logs.setdefault(fam, []).append(math.log(achieved))
        points.append((soc_name, cluster, ms, fam, c))
    eff = {fam: math.exp(float(np.mean(v))) for fam, v in logs.items()}
    res = []
    for soc_name, cluster, ms, fam, c in points:
        pred = flops / (c.fmax_mhz * 1e6 * c.gemm_flop_per_cycle * eff[fam]) * 1000.0
        res.append(Residual("Swan Fig. 1", f"{soc_name} {cluster} ({fam}) matmul ms", ms, pred, READ_REL))
    return eff, res


def selection(name: str, figs: dict, metrics: dict, prefix: Sequence[str], mixed: Sequence[str]) -> list[Residual]:
    """The paper's ordering of ``name``'s choices as one-sided residuals (zero when it holds with
    the margin): its fastest choice beats every other prefix choice, the slowest is slower than
    every prefix choice, its least-energy choice beats every choice, mixed ones included."""
    out = []
    lat, en = metrics["latency"], metrics["energy"]
    fastest = min(figs["latency"], key=figs["latency"].get)
    slowest = max(figs["latency"], key=figs["latency"].get)
    frugal = min(figs["energy"], key=figs["energy"].get)

    def beat(point, a, b):   # a must be below b by the margin
        ratio = a / b / (1.0 - SELECTION_MARGIN)
        out.append(Residual("Swan selection", point, 1.0, max(ratio, 1.0), SELECTION_SIGMA))

    for label in prefix:
        if label != fastest:
            beat(f"{name} latency {fastest} < {label}", lat[fastest], lat[label])
        if label != slowest:
            beat(f"{name} latency {label} < {slowest}", lat[label], lat[slowest])
    for label in (*prefix, *mixed):
        if label != frugal:
            beat(f"{name} energy {frugal} < {label}", en[frugal], en[label])
    return out


# -- the fit -------------------------------------------------------------------------------------


def objective(residuals: list[Residual], params: Sequence[FitParam], theta: np.ndarray) -> float:
    data = sum((r.log_error / r.sigma_log) ** 2 for r in residuals)
    prior = np.array([math.log(p.prior) for p in params])
    sig = np.array([p.sigma_log for p in params])
    return data + float(np.sum(((theta - prior) / sig) ** 2))


def runtime_at(rt: Runtime, params: Sequence[FitParam], theta: Sequence[float]) -> Runtime:
    return with_paths(rt, {t: math.exp(v) for p, v in zip(params, theta) for t in p.targets})


def current_objective(rt: Runtime, residual_fn: Callable[[Runtime], list[Residual]]) -> float:
    """The objective at the runtime's current (committed) values."""
    params = rt.fit_params
    theta = np.array([math.log(get_path(rt, p.targets[0])) for p in params])
    return objective(residual_fn(rt), params, theta)


def fit(rt: Runtime, residual_fn: Callable[[Runtime], list[Residual]], params: Sequence[FitParam] | None = None,
        sweeps: int = 3, tol: float = 0.02, grid: int = 9,
        log: Callable[[str], None] = print) -> tuple[Runtime, dict, float]:
    """Bounded coordinate search in log space from the priors; (fitted runtime, values, objective).

    Per parameter and sweep: ``grid`` points across its bounds, then golden section to ``tol``
    (log units) around the best. A parameter with ``starts`` (e.g. the two documented libgomp
    spin regimes) opens one more search per listed value, from the priors with that value;
    the best end point wins.
    """
    params = list(params if params is not None else rt.fit_params)
    prior = np.array([math.log(p.prior) for p in params])
    inits = [prior]
    for i, p in enumerate(params):
        for x in p.starts:
            if not math.isclose(x, p.prior):
                th = prior.copy()
                th[i] = math.log(x)
                inits.append(th)
    seen: dict[tuple, float] = {}

    def f(th: np.ndarray) -> float:
        key = tuple(np.round(th, 12))
        if key not in seen:
            seen[key] = objective(residual_fn(runtime_at(rt, params, th)), params, th)
        return seen[key]

    best_theta, best = None, math.inf
    for n, theta in enumerate(inits):
        if len(inits) > 1:
            log(f"  start {n + 1}/{len(inits)}: " + (", ".join(f"{p.name} {math.exp(v):.4g}" for p, v, v0 in zip(params, theta, prior) if v != v0)
                                                      or "the priors"))
        theta, obj = _coordinate_search(params, f, theta, sweeps, tol, grid, log)
        if obj < best:
            best_theta, best = theta, obj
    log(f"  {len(seen)} trials")
    values = {p.name: math.exp(v) for p, v in zip(params, best_theta)}
    return runtime_at(rt, params, best_theta), values, best


def _coordinate_search(params, f, theta, sweeps, tol, grid, log):
    theta = theta.copy()
    best = f(theta)
    log(f"  objective at the start {best:.2f}")
    gr = (math.sqrt(5) - 1) / 2
    for sweep in range(sweeps):
        before = best
        for i, p in enumerate(params):
            lo, hi = math.log(p.lo), math.log(p.hi)

            def at(x):
                th = theta.copy()
                th[i] = x
                return f(th)

            # a coarse scan of the whole range (the landscape has regimes, e.g. threads that
            # sleep between regions or not), then golden section around the best point
            points = list(np.linspace(lo, hi, grid))
            scores = [at(x) for x in points]
            j = int(np.argmin(scores))
            step = (hi - lo) / (grid - 1)
            a, b = max(lo, points[j] - step), min(hi, points[j] + step)
            c, d = b - gr * (b - a), a + gr * (b - a)
            fc, fd = at(c), at(d)
            while b - a > tol:
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - gr * (b - a)
                    fc = at(c)
                else:
                    a, c, fc = c, d, fd
                    d = a + gr * (b - a)
                    fd = at(d)
            x, fx = (c, fc) if fc < fd else (d, fd)
            if scores[j] < fx:
                x, fx = points[j], scores[j]
            if fx < best:
                theta[i], best = x, fx
        log(f"  sweep {sweep + 1}: objective {best:.2f}")
        if before - best < 1e-3:
            break
    return theta, best


def summarise(residuals: list[Residual]) -> list[tuple[str, int, float, float, str]]:
    """Per figure: (figure, n, median |error| %, worst |error| %, worst point)."""
    out = []
    for fig in dict.fromkeys(r.figure for r in residuals):
        rs = [r for r in residuals if r.figure == fig]
        errs = [abs(r.predicted / r.target - 1.0) * 100 for r in rs]
        worst = max(range(len(rs)), key=lambda i: errs[i])
        out.append((fig, len(rs), float(np.median(errs)), errs[worst], rs[worst].point))
    return out


def write_back(path: Path, rt_fitted: Runtime, params: Sequence[FitParam], provenance: str,
               objective_value: float | None = None) -> None:
    """Write fitted values into the runtime TOML, each with its provenance, and the fit record."""
    text = Path(path).read_text()
    for p in params:
        for t in p.targets:
            text = set_path(text, t, get_path(rt_fitted, t), provenance, rt_fitted)
    if objective_value is not None:
        text = _replace_in_section(text, "fit", "objective", f"{objective_value:.10g}")
    Path(path).write_text(text)


def write_gemm(path: Path, eff: dict[str, float], ops: Sequence[str], provenance: str) -> str:
    text = Path(path).read_text()
    for op in ops:
        for fam, v in eff.items():
            text = set_value(text, f"ops.{op}.efficiency", fam, v, provenance)
    Path(path).write_text(text)
    return text


# ---------------------------------------------------------------------------------------------
# The ledger and what the README says of it

LEDGER = DATA_DIR / "ledger.csv"
# The README's "How close to the paper" table sits between these lines; it is written from the
# ledger (`closeness_markdown`), and a test checks that the two agree.
README_BEGIN = "<!-- closeness table: written by experiments/calibration_ledger.py from its ledger -->"
README_END = "<!-- end of closeness table -->"
_TITLES = {"Swan Fig. 1": "Swan Fig. 1: one 512x512 fp32 matmul per core type (SD845/855/865)",
           "Swan Fig. 2a": "Swan Fig. 2a: ResNet-34 on the Pixel 3, latency/energy/power per choice",
           "Swan Fig. 2b": "Swan Fig. 2b: ShuffleNetV2 on the Pixel 3, latency/energy per choice",
           "ncnn benchmark": "ncnn benchmark rows (Tencent/ncnn), 1 and 4 threads"}


def read_ledger(path: Path = LEDGER) -> list[dict]:
    """The ledger's rows (figure, point, role, target, predicted, unit, residual) as strings."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def closeness_markdown(rows: Sequence[dict]) -> str:
    """The README's table: per figure and role, how many points, the paper's and the simulated
    range, and the error (median and worst relative error; the Fig. 3 score drops one row each,
    in percentage points). Normalisers (1 by construction) are left out."""
    lines = ["| figure | role | points | paper | simulated | error |", "|---|---|---|---|---|---|"]

    def rng(vals):
        lo, hi = min(vals), max(vals)
        return f"{lo:.3g}" if lo == hi else f"{lo:.3g} to {hi:.3g}"

    for fig in dict.fromkeys(r["figure"] for r in rows):
        for role in ("calibration", "validation"):
            rs = [r for r in rows if r["figure"] == fig and r["role"] == role]
            if not rs:
                continue
            if "points" in rs[0]["unit"]:
                for r in rs:
                    lines.append(f"| {fig}: {r['point'].replace(' with pytorch-default training', '')} (%) | {role} "
                                 f"| 1 | {float(r['target']):.1f} | {float(r['predicted']):.1f} "
                                 f"| {float(r['residual']):+.1f} points |")
                continue
            errs = sorted(abs(float(r["residual"])) for r in rs)
            worst = max(rs, key=lambda r: abs(float(r["residual"])))
            unit = rs[0]["unit"] if len({r["unit"] for r in rs}) == 1 else "normalised"
            lines.append(f"| {_TITLES.get(fig, fig)} ({unit}) | {role} | {len(rs)} "
                         f"| {rng([float(r['target']) for r in rs])} | {rng([float(r['predicted']) for r in rs])} "
                         f"| median {100 * float(np.median(errs)):.0f}%, worst {100 * float(worst['residual']):+.0f}% "
                         f"({worst['point']}) |")
    return "\n".join(lines)


def readme_block(text: str) -> str:
    """The table between the README's markers; a ValueError if they are missing."""
    if README_BEGIN not in text or README_END not in text:
        raise ValueError("the README has no closeness-table markers")
    return text.split(README_BEGIN, 1)[1].split(README_END, 1)[0].strip()


def with_readme_block(text: str, table: str) -> str:
    """``text`` with the table between the markers replaced by ``table``."""
    head, rest = text.split(README_BEGIN, 1)
    return f"{head}{README_BEGIN}\n{table}\n{README_END}{rest.split(README_END, 1)[1]}"
