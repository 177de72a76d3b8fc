"""The calibration's predictions: the simulation itself, as users see it.

Every predicted point is a `swansim.batchmodel.simulate_batch` run - the same function behind
landscapes, policies and the fleet - so the fit and what users see cannot disagree. A trial
of the fit runs its points over a process pool that lives as long as the fit (its workers
keep their model graphs between trials).

  * `Fig2`: Swan paper Fig. 2a/2b on the Pixel 3 (PyTorch training, batch 16, schedutil, the
    paper's prefix choices and the mixed ones), normalised as the paper normalises, plus the
    paper's selection as one-sided constraints (`swansim.dnn.calibrate.selection`).
  * `Ncnn`: the ncnn benchmark rows (inference, batch 1, benchncnn's input, threads on the big
    cores, every core at its top clock: benchncnn's loops keep the cores busy, an assumption).
  * `sustained_fig2_metrics`: Fig. 2 measured over sustained training, throttling included (a
    diagnostic of the measurement protocol, not fitted on).
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

from swansim.batchmodel import BatchCost, BatchKey, BatchModel, FastForward, simulate_batch
from swansim.device import Device
from swansim.dnn import calibrate as cal
from swansim.dnn.choices import Choice, enumerate_choices, parse_choice
from swansim.dnn.runtime import Runtime
from swansim.dnn.tasks import FIG2_TASKS
from swansim.hw.profile import Catalogue
from swansim.kernel.placement import AUTO
from swansim.pool import run_all

FIG2_DEVICE = "pixel3"


def _simulate(key: BatchKey, rt: Runtime) -> BatchCost:
    return simulate_batch(key, runtime=rt, record_layers=False)


def relevant(rt: Runtime, families: set[str], ops: set[str]) -> tuple:
    """What of ``rt`` a simulation can read when its threads run on cores of ``families`` and
    its model has op classes ``ops``: the global figures, those families' figures, those ops'
    efficiencies for those families. Two runtimes equal here give the same simulation."""
    top = tuple(getattr(rt, f) for f in rt.__dataclass_fields__
                if f not in ("family", "ops", "fit_params", "fit_info", "path", "families"))
    fam = tuple((f, rt.family[f]) for f in sorted(families))
    eff = tuple((o, rt.ops[o].peak, tuple(sorted(rt.ops[o].split.items())),
                 tuple(rt.ops[o].efficiency.get(f) for f in sorted(families))) for o in sorted(ops))
    return top, fam, eff


class _Points:
    """A set of batch keys simulated together for a runtime (over a pool when one is given).

    A trial of the fit changes one figure at a time: a point whose simulation cannot read
    that figure (`relevant`) keeps its cost from an earlier trial.
    """

    def __init__(self, cat: Catalogue, keys: Sequence[BatchKey], pool: ProcessPoolExecutor | None = None):
        self.keys, self.pool = list(keys), pool
        self._reads = []
        for k in self.keys:
            soc = cat.device(k.device).soc
            choices = (k.plan,) if isinstance(k.plan, Choice) else tuple(k.plan.choices)
            cpus = {c for ch in choices for c in (ch.cpus if not ch.pinned else ch.thread_cpus(soc))}
            graph = _graph_ops(k.model, k.mode, k.input_shape)
            self._reads.append(({soc.cluster_of(c).uarch for c in cpus}, graph))
        self._memo: dict[tuple, BatchCost] = {}

    def costs(self, rt: Runtime) -> list[BatchCost]:
        ids = [(k, relevant(rt, {rt.family_of(u) for u in uarchs}, ops))
               for k, (uarchs, ops) in zip(self.keys, self._reads)]
        todo = [i for i, key in enumerate(ids) if key not in self._memo]
        got = run_all(_simulate, [(self.keys[i], rt) for i in todo], jobs=1, progress=False, pool=self.pool)
        for i, c in zip(todo, got):
            self._memo[ids[i]] = c
        return [self._memo[key] for key in ids]


def _graph_ops(model: str, mode: str, input_shape) -> set[str]:
    """The op classes a model's batch runs (the optimizer, concat and add come with any training)."""
    from swansim.dnn.tasks import build_task

    ops = {layer.op for layer in build_task(model, input_shape=input_shape, mode=mode).layers}
    return ops | ({"optimizer", "concat", "add"} if mode == "train" else {"concat"})


class Fig2(_Points):
    """Fig. 2a/2b residuals of a pytorch runtime on the Pixel 3."""

    def __init__(self, cat: Catalogue, pool: ProcessPoolExecutor | None = None, figures=None,
                 input_shapes: dict | None = None, governor: str = cal.SWAN_GOVERNOR, placement: str = AUTO):
        soc = cat.device(FIG2_DEVICE).soc
        self.figures = figures or cal.read_fig2()
        every = enumerate_choices(soc, mixed=True)
        self.prefix = [c.label for c in every if c.kind != "mixed"]
        self.mixed = [c.label for c in every if c.kind == "mixed"]
        self.models = [m for m in FIG2_TASKS if m in self.figures]
        shapes = input_shapes or {}
        self.points = [(m, label) for m in self.models for label in (*self.prefix, *self.mixed)]
        super().__init__(cat, [BatchKey(FIG2_DEVICE, m, parse_choice(label, soc), governor=governor,
                                        placement=placement, input_shape=shapes.get(m))
                               for m, label in self.points], pool)

    def metrics(self, rt: Runtime) -> dict[str, dict[str, dict[str, float]]]:
        """model -> metric (latency, energy, power) -> choice -> value (s, J above idle, W)."""
        out: dict = {m: {"latency": {}, "energy": {}, "power": {}} for m in self.models}
        for (m, label), c in zip(self.points, self.costs(rt)):
            out[m]["latency"][label] = c.latency_s
            out[m]["energy"][label] = c.net_energy_j
            out[m]["power"][label] = c.net_energy_j / c.latency_s
        return out

    def residuals(self, rt: Runtime) -> list[cal.Residual]:
        metrics = self.metrics(rt)
        out = []
        for name, figs in self.figures.items():
            out += fig2_points(name, figs, metrics[name])
            out += cal.selection(name, figs, metrics[name], self.prefix, self.mixed)
        return out


def fig2_points(name: str, figs: dict, metrics: dict) -> list[cal.Residual]:
    """One model's Fig. 2 points: each metric of each plotted choice over the choice the paper
    normalises that metric to (its 1.00), against the paper's value."""
    fig = "Swan Fig. 2a" if name == "resnet34" else "Swan Fig. 2b"
    out = []
    for metric, target in figs.items():
        ref = max(target, key=target.get)
        for label, value in target.items():
            if label != ref:
                pred = metrics[metric][label] / metrics[metric][ref]
                out.append(cal.Residual(fig, f"{name} {metric} {label}", value, pred,
                                        cal.reading_sigma(value, cal.MODEL_SIGMA)))
    return out


def sustained_fig2_metrics(cat: Catalogue, model: str, labels: Sequence[str], minutes: float,
                           memo: BatchModel | None = None) -> dict[str, dict[str, float]]:
    """Fig. 2's metrics (latency s, energy J above the idle floor, power W) per choice, measured
    the way the paper's energies (from battery drain, background subtracted) had to be: over the
    last minute of ``minutes`` of training from a phone at ambient, its thermal zone and engine
    throttling it (`FastForward` over the batch model). The background is the idle phone's
    floor at ambient. `Fig2` measures the calibration's way instead: one warm-up and
    the measured batches with every node held at ambient."""
    spec = cat.device(FIG2_DEVICE)
    memo = memo or BatchModel()
    floor_w = Device(spec).platform.idle_floor_w
    out: dict = {"latency": {}, "energy": {}, "power": {}}
    for label in labels:
        dev = Device(spec)
        ff = FastForward(dev, memo, BatchKey(FIG2_DEVICE, model, parse_choice(label, spec.soc)))
        recs = []
        while dev.env.now < minutes * 60.0:
            recs += ff.run_batches(1)
        last = [r for r in recs if r.start_s >= (minutes - 1.0) * 60.0] or recs[-1:]
        latency_s = sum(r.latency_s for r in last) / len(last)
        net_j = sum(r.energy_j for r in last) / len(last) - floor_w * latency_s
        out["latency"][label], out["energy"][label], out["power"][label] = latency_s, net_j, net_j / latency_s
    return out


class Ncnn(_Points):
    """ncnn benchmark residuals (inference, batch 1, benchncnn's input - `NcnnRow.input_shape` -, 1000
    classes; big cores)."""

    def __init__(self, cat: Catalogue, rows: Sequence[cal.NcnnRow], pool: ProcessPoolExecutor | None = None):
        self.rows = list(rows)
        self.families = {}
        keys = []
        for r in self.rows:
            soc = cat.socs[r.soc]
            # ncnn's "big": every core outside the little cluster, threads unpinned among them
            keys.append(BatchKey(r.soc, r.model, Choice(soc.big_cpus, r.threads, "big", pinned=False),
                                 runtime="ncnn", governor="performance", mode="infer",
                                 input_shape=r.input_shape, num_classes=cal.NCNN_CLASSES))
            self.families[r.soc] = soc.ranked_clusters[-1].uarch
        super().__init__(cat, keys, pool)

    def residuals(self, rt: Runtime) -> list[cal.Residual]:
        return [cal.Residual("ncnn benchmark", f"{r.soc} ({rt.family_of(self.families[r.soc])}) {r.model} "
                             f"t{r.threads} ms", r.ms, c.latency_s * 1000.0, cal.READ_REL)
                for r, c in zip(self.rows, self.costs(rt))]
