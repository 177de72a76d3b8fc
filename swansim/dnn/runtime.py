"""Runtime profiles: the software stack that runs a model (PyTorch with OpenMP, an ncnn-like engine).

A runtime profile is a TOML file under ``swansim/dnn/runtimes/``. It says how the stack turns
a layer into work on cores: per op class and core family an efficiency (fraction of the
core's peak FLOP rate), how each phase is split over threads (per sample, per channel, per
element chunk, or not at all), what a parallel region costs to fork and join, how long a
waiting thread spins before it sleeps, what waking a sleeping thread costs, and what it costs
to move cache lines between cores when consecutive regions split the data differently. Every
number has a provenance string in the ``sources`` table next to it ("calibrated: ..." or
"assumption: ..."); the loader refuses a number without one, and names the file and the field
on any error.

Fields (all per runtime; ``<fam>`` is a core family, ``<op>`` an op class):
  partition                 "static" (equal chunks, the slowest core sets the pace) or "dynamic"
  grain_elements            elementwise regions at or below this many elements run on one thread
  dispatch_instructions     serial work on the calling thread per op call (framework overhead)
  fork_instructions         fork/join of a region: [base, per extra thread] on the master
                            (team start, the two barrier futex_wake calls); a worker pays one
                            per-thread share
  futex_wake_instructions   the waker's cost per sleeping thread it wakes (futex_wake, IPI)
  spin_iterations           a waiting thread polls this many times, then sleeps (futex_wait)
  cross_cluster_factor      barrier line latencies are this much longer when a team spans core families
  switch_instructions       re-pinning and resizing the pool, per migrated thread
  per_sample_ops            op classes whose GEMM runs once per sample (PyTorch's slow_conv2d):
                            weights larger than a core's L2 are re-read for every sample
  grouped_conv              "per_group" (a loop of single-group convolutions) or "native"
  grouped_bwd_passes        element passes over the whole input per group in backward
  resident_dram_fraction    share of bytes that reach DRAM when a tensor fits the L3
  [families]                core family -> uarch name fragments (others: default_family)
  [family.<fam>]            wake_latency_s, line_latency_cycles, line_transfer_cycles,
                            stream_bytes_per_cycle, spin_iteration_cycles
  [ops.<op>]                peak ("gemm"/"vector"), split.<phase>, regions, efficiency.<fam>
  [[fit.param]]             optional: what the calibration fits, with its prior and bounds:
                            name, set (dotted paths of the fields set to the value), prior,
                            bounds = [lo, hi], sigma_log (prior width), source (of the prior
                            and the bounds), optionally starts (more start values for the
                            search). The fields' values are the fitted ones; the loader
                            refuses a value outside its bounds. ``[fit]`` also records the
                            objective of the committed fit (a drift check).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from swansim.checks import is_number
from swansim.errors import InputError
from swansim.hw.sourced import SourcedTable, read_toml

RUNTIME_DIR = Path(__file__).resolve().parent / "runtimes"
OP_CLASSES = ("conv", "depthwise", "pointwise", "linear", "pool", "batchnorm", "activation",
              "shuffle", "add", "concat", "optimizer")
PHASES = ("fwd", "bwd_input", "bwd_weight", "update")
SPLITS = ("batch", "channels", "elements", "serial")
FAMILY_FIELDS = ("wake_latency_s", "line_latency_cycles", "line_transfer_cycles",
                 "stream_bytes_per_cycle", "spin_iteration_cycles")
_PROVENANCE = re.compile(r"^(calibrated|assumption|measured|derived|source)\b")
_PROVENANCE_RULE = "every number needs a provenance: 'calibrated: <figure>' or 'assumption: <reason>'"


@dataclass(frozen=True)
class FamilyParams:
    """What a core family (in-order little, out-of-order big, wide out-of-order) does differently."""

    wake_latency_s: float          # a sleeping thread runs again: IPI, idle-state exit, schedule-in
    line_latency_cycles: float     # one cache line from another core (barrier flags and counters)
    line_transfer_cycles: float    # per line when a core pulls a block of lines another core wrote
    stream_bytes_per_cycle: float  # what one core can stream from L3/DRAM
    spin_iteration_cycles: float   # one poll of the barrier word while spinning


@dataclass(frozen=True)
class OpParams:
    """How the runtime runs one op class."""

    peak: str                      # "gemm" or "vector": which peak efficiency applies to
    efficiency: dict[str, float]   # core family -> fraction of that peak
    split: dict[str, str]          # phase -> batch | channels | elements | serial
    regions: str                   # "one" region per op call, or "per_group"


@dataclass(frozen=True)
class BlasParams:
    """The runtime's BLAS thread pool (OpenBLAS built with its own pthreads server, as Swan's
    PyTorch was): GEMMs above ``mt_threshold_mnk`` (M*N*K) run split equally over the pool - the
    calling thread and its workers - one call at a time, paced by the slowest member; a worker
    then polls for ``spin_s`` before it sleeps. The pool holds one thread per CPU the process may
    use when the library starts, at most ``max_threads``; for a pinned choice, ``pinned_pool``:
    "choice" (the choice's cores) or "process" (every CPU of the process's cpuset).
    ``per_call``: each of a region's calls (one per sample under ``per_sample_ops``) also pays
    the pool's fork and join, and calls made by several OpenMP threads at once take turns on the
    library's lock through futex wake-ups (`TrainingJob._blas_calls`)."""

    enabled: bool
    mt_threshold_mnk: float
    spin_s: float
    max_threads: int
    pinned_pool: str
    per_call: bool = False


@dataclass(frozen=True)
class NnpackParams:
    """NNPACK's convolutions (PyTorch's ``_nnpack_spatial_convolution``), taken for every
    convolution of the ``ops`` classes - each group of a grouped one too - when the batch has at
    least ``min_batch`` samples. The forward pass runs on NNPACK's own pthreadpool (the calling
    thread and its workers, as many as the job's first NNPACK call had threads), whose waiting
    threads poll ``spin_iterations`` times (at the family's cycles per poll) before they sleep;
    the backward pass is a serial loop over the batch on the calling thread (its GEMMs on the BLAS
    pool when large enough). Not modelled: NNPACK's own arithmetic (Winograd or FFT tiles at
    stride 1, implicit GEMM when strided); a forward region's work stays slow_conv2d's."""

    enabled: bool
    min_batch: int
    ops: tuple[str, ...]
    spin_iterations: float


@dataclass(frozen=True)
class FitParam:
    """One fitted quantity: the fields it sets, its prior and its plausible bounds."""

    name: str
    targets: tuple[str, ...]       # dotted paths, e.g. "family.inorder.wake_latency_s"
    prior: float
    lo: float
    hi: float
    sigma_log: float
    source: str
    starts: tuple[float, ...] = ()  # extra start values of the search (e.g. documented regimes)


@dataclass(frozen=True)
class Runtime:
    name: str
    title: str
    path: Path
    partition: str
    grain_elements: float
    dispatch_instructions: float
    fork_base_instructions: float
    fork_per_thread_instructions: float
    futex_wake_instructions: float
    spin_iterations: float
    cross_cluster_factor: float
    switch_instructions: float
    grouped_conv: str
    grouped_bwd_passes: float
    resident_dram_fraction: float
    per_sample_ops: tuple[str, ...]
    families: dict[str, tuple[str, ...]]
    default_family: str
    family: dict[str, FamilyParams]
    ops: dict[str, OpParams]
    fit_params: tuple[FitParam, ...] = ()
    fit_info: dict | None = None
    blas: BlasParams | None = None   # None: GEMMs run on the calling thread (no BLAS pool)
    nnpack: NnpackParams | None = None   # None: no convolution takes NNPACK

    @property
    def trains(self) -> bool:
        """Do its ops define the backward phases? (ncnn's, an inference engine's, do not.)"""
        return all("bwd_input" in op.split for op in self.ops.values() if "fwd" in op.split)

    def family_of(self, uarch: str) -> str:
        """The core family of a uarch name (by fragment, e.g. "cortex-a55" -> "inorder")."""
        u = uarch.lower()
        for fam, fragments in self.families.items():
            if any(f in u for f in fragments):
                return fam
        return self.default_family

    def spin_budget_cycles(self, fam: str) -> float:
        """How long (core cycles) a waiting thread of family ``fam`` spins before it sleeps."""
        return self.spin_iterations * self.family[fam].spin_iteration_cycles


# ---------------------------------------------------------------------------------------------
# Dotted paths: how the calibration names a field ("dispatch_instructions", "fork_instructions[1]",
# "family.inorder.wake_latency_s", "ops.conv.efficiency.ooo").

_TOP_PATHS = ("grain_elements", "dispatch_instructions", "futex_wake_instructions", "spin_iterations",
              "cross_cluster_factor", "switch_instructions", "grouped_bwd_passes", "resident_dram_fraction")


def get_path(rt: Runtime, path: str) -> float:
    parts = path.split(".")
    if path == "fork_instructions[0]":
        return rt.fork_base_instructions
    if path == "fork_instructions[1]":
        return rt.fork_per_thread_instructions
    if len(parts) == 1 and path in _TOP_PATHS:
        return getattr(rt, path)
    if len(parts) == 3 and parts[0] == "family" and parts[1] in rt.family and parts[2] in FAMILY_FIELDS:
        return getattr(rt.family[parts[1]], parts[2])
    if len(parts) == 4 and parts[0] == "ops" and parts[1] in rt.ops and parts[2] == "efficiency" \
            and parts[3] in rt.ops[parts[1]].efficiency:
        return rt.ops[parts[1]].efficiency[parts[3]]
    raise KeyError(path)


def with_paths(rt: Runtime, values: dict[str, float]) -> Runtime:
    """A copy of ``rt`` with the fields at the given dotted paths replaced."""
    top: dict[str, float] = {}
    fam = {k: dict(vars(v)) for k, v in rt.family.items()}
    eff = {k: dict(v.efficiency) for k, v in rt.ops.items()}
    for path, v in values.items():
        get_path(rt, path)  # raises on an unknown path
        parts = path.split(".")
        if path == "fork_instructions[0]":
            top["fork_base_instructions"] = v
        elif path == "fork_instructions[1]":
            top["fork_per_thread_instructions"] = v
        elif len(parts) == 1:
            top[path] = v
        elif parts[0] == "family":
            fam[parts[1]][parts[2]] = v
        else:
            eff[parts[1]][parts[3]] = v
    families = {k: FamilyParams(**v) for k, v in fam.items()}
    ops = {k: replace(o, efficiency=eff[k]) for k, o in rt.ops.items()}
    return replace(rt, **top, family=families, ops=ops)


# ---------------------------------------------------------------------------------------------


# What a command's --runtime takes, wherever a runtime trains (run, compare, ux, fleet).
TRAINING_RUNTIME_HELP = ("the runtime it trains with: a shipped profile's name (swansim/dnn/runtimes) or a .toml "
                         "file, e.g. a copy with figures changed (a sensitivity study)")


def checked_runtime(value: Any, where: str, field: str = "runtime") -> Runtime:
    """``value`` as a runtime: a shipped profile's name or a .toml file, every field checked;
    else one InputError at ``where`` (an unknown name, a missing file, a file's bad field)."""
    if not isinstance(value, (str, Path)) or not str(value):
        raise InputError(where, field, f"expected a runtime's name or a .toml path, got {value!r}")
    try:
        return load_runtime(value)
    except InputError as e:   # a name's error is about the name; a file's names the file and its field
        raise InputError(where, field, e.reason if e.where == "runtime" else str(e)) from None


def training_runtime(value: Any, where: str, field: str = "runtime") -> Runtime:
    """`checked_runtime`, and one that trains (not an inference-only runtime)."""
    rt = checked_runtime(value, where, field)
    if not rt.trains:
        raise InputError(where, field, f"{value}: an inference-only runtime (no backward phases): training needs "
                                       "a backward pass")
    return rt


def runtime_digest(name_or_path: str | Path) -> str:
    """What a memo or a checkpoint must add to its identity for this runtime: nothing for a
    shipped profile, named (its file is among those `batchmodel.code_fingerprint` hashes), and
    a file's content digest for a .toml path (a variant the user wrote: the same path edited
    is another runtime)."""
    import hashlib

    path = Path(name_or_path)
    if path.suffix != ".toml":
        return ""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def load_runtime(name_or_path: str | Path) -> Runtime:
    """Load a runtime profile by name ("pytorch", "ncnn") or path, validating every field."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = RUNTIME_DIR / f"{name_or_path}.toml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in RUNTIME_DIR.glob("*.toml")))
            raise InputError("runtime", "name", f"unknown runtime {str(name_or_path)!r} (known: {known})")
    data = read_toml(path)
    r = SourcedTable(data, path, "", provenance=_PROVENANCE, rule=_PROVENANCE_RULE)
    fam_t = r.sub("families")
    families = {}
    for fam, frags in fam_t.data.items():
        if fam == "sources":
            continue
        if not isinstance(frags, list) or not all(isinstance(x, str) and x for x in frags):
            raise fam_t.err(fam, "expected a list of uarch name fragments")
        families[fam] = tuple(x.lower() for x in frags)
    default_family = r.str("default_family")
    fam_params = {}
    fp_t = r.sub("family")
    for fam in (*families, default_family):
        t = fp_t.sub(fam)
        fam_params[fam] = FamilyParams(
            wake_latency_s=t.num("wake_latency_s", 0, 0.1),
            line_latency_cycles=t.num("line_latency_cycles", 0, 1e4),
            line_transfer_cycles=t.num("line_transfer_cycles", 0, 1e4),
            stream_bytes_per_cycle=t.num("stream_bytes_per_cycle", 0.05, 256),
            spin_iteration_cycles=t.num("spin_iteration_cycles", 0.1, 1000))
    ops = {}
    ops_t = r.sub("ops")
    for op in OP_CLASSES:
        t = ops_t.sub(op)
        split_t = t.sub("split")
        split = {}
        for phase, v in split_t.data.items():
            if phase == "sources":
                continue
            if phase not in PHASES:
                raise split_t.err(phase, f"unknown phase; expected one of {', '.join(PHASES)}")
            split[phase] = split_t.str(phase, choices=SPLITS)
        eff_t = t.sub("efficiency")
        # Winograd, fp16 and other fast kernels beat the fp32 FLOP count of the plain op:
        # efficiency > 1 is allowed.
        eff = {fam: eff_t.num(fam, 1e-4, 8.0) for fam in fam_params}
        ops[op] = OpParams(peak=t.str("peak", choices=("gemm", "vector")), efficiency=eff, split=split,
                           regions=t.str("regions", choices=("one", "per_group")))
    fork = r.get("fork_instructions")
    if not (isinstance(fork, list) and len(fork) == 2 and all(is_number(x) and x >= 0 for x in fork)):
        raise r.err("fork_instructions", f"expected [base, per extra thread] >= 0, got {fork!r}")
    r.need_source("fork_instructions")
    pso = r.get("per_sample_ops")
    if not (isinstance(pso, list) and all(x in OP_CLASSES for x in pso)):
        raise r.err("per_sample_ops", f"expected a list of op classes ({', '.join(OP_CLASSES)}), got {pso!r}")
    r.need_source("per_sample_ops")
    rt = Runtime(
        name=r.str("name"), title=r.str("title"), path=path,
        partition=r.str("partition", choices=("static", "dynamic")),
        grain_elements=r.num("grain_elements", 1, 1e9),
        dispatch_instructions=r.num("dispatch_instructions", 0, 1e8),
        fork_base_instructions=float(fork[0]), fork_per_thread_instructions=float(fork[1]),
        futex_wake_instructions=r.num("futex_wake_instructions", 0, 1e7),
        spin_iterations=r.num("spin_iterations", 0, 1e10),
        cross_cluster_factor=r.num("cross_cluster_factor", 1, 100),
        switch_instructions=r.num("switch_instructions", 0, 1e9),
        grouped_conv=r.str("grouped_conv", choices=("per_group", "native")),
        grouped_bwd_passes=r.num("grouped_bwd_passes", 0, 64),
        resident_dram_fraction=r.num("resident_dram_fraction", 0, 1),
        per_sample_ops=tuple(pso),
        families=families, default_family=default_family, family=fam_params, ops=ops,
    )
    params, info = _fit_spec(data.get("fit"), path, rt)
    return replace(rt, fit_params=params, fit_info=info, blas=_blas(r) if "blas" in data else None,
                   nnpack=_nnpack(r) if "nnpack" in data else None)


def with_blas(rt: Runtime, **changes) -> Runtime:
    """``rt`` with its BLAS pool's fields changed (e.g. ``enabled=True``, ``spin_s=0``)."""
    if rt.blas is None:
        raise InputError(rt.path, "blas", "this runtime has no [blas] table")
    return replace(rt, blas=replace(rt.blas, **changes))


def with_nnpack(rt: Runtime, **changes) -> Runtime:
    """``rt`` with its NNPACK fields changed (e.g. ``enabled=True``)."""
    if rt.nnpack is None:
        raise InputError(rt.path, "nnpack", "this runtime has no [nnpack] table")
    return replace(rt, nnpack=replace(rt.nnpack, **changes))


def nnpack_backward(rt: Runtime) -> Runtime:
    """``rt`` as a job whose convolutions take NNPACK runs its backward pass: their input and
    weight gradients serial on the calling thread (`NnpackParams`)."""
    ops = dict(rt.ops)
    for op in rt.nnpack.ops:
        ops[op] = replace(ops[op], split={**ops[op].split, "bwd_input": "serial", "bwd_weight": "serial"})
    return replace(rt, ops=ops)


def _nnpack(r: SourcedTable) -> NnpackParams:
    """The optional [nnpack] table (see `NnpackParams`)."""
    t = r.sub("nnpack")
    ops = t.get("ops")
    if not (isinstance(ops, list) and ops and all(x in OP_CLASSES for x in ops)):
        raise t.err("ops", f"expected a list of op classes ({', '.join(OP_CLASSES)}), got {ops!r}")
    t.need_source("ops")
    return NnpackParams(t.bool("enabled"), t.int("min_batch", 1, 10**6), tuple(ops),
                        t.num("spin_iterations", 0, 1e10))


def _blas(r: SourcedTable) -> BlasParams:
    """The optional [blas] table (see `BlasParams`)."""
    t = r.sub("blas")
    return BlasParams(t.bool("enabled"), t.num("mt_threshold_mnk", 0, 1e12), t.num("spin_s", 0, 60),
                      t.int("max_threads", 1, 256), t.str("pinned_pool", choices=("choice", "process")),
                      t.bool("per_call", default=False))


def _fit_spec(fit: Any, path: Path, rt: Runtime) -> tuple[tuple[FitParam, ...], dict | None]:
    """The optional [fit] table: [[fit.param]] entries (prior, bounds, source) and the fit record."""
    if fit is None:
        return (), None
    if not isinstance(fit, dict):
        raise InputError(path, "fit", "expected a table")
    entries = fit.get("param", [])
    if not isinstance(entries, list):
        raise InputError(path, "fit.param", "expected an array of tables [[fit.param]]")
    out = []
    seen: set[str] = set()
    for i, e in enumerate(entries):
        where = f"fit.param[{i}]"
        if not isinstance(e, dict):
            raise InputError(path, where, "expected a table")
        name = e.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(path, f"{where}.name", "expected a non-empty string")
        where = f"fit.param[{name!r}]"
        targets = e.get("set")
        if not (isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets)):
            raise InputError(path, f"{where}.set", "expected a list of dotted field paths")
        b = e.get("bounds")
        if not (isinstance(b, list) and len(b) == 2 and all(is_number(x) for x in b)
                and 0 < b[0] < b[1]):
            raise InputError(path, f"{where}.bounds", f"expected [lo, hi] with 0 < lo < hi, got {b!r}")
        prior, sigma, source = e.get("prior"), e.get("sigma_log"), e.get("source")
        if not is_number(prior) or not b[0] <= prior <= b[1]:
            raise InputError(path, f"{where}.prior", f"expected a number within the bounds {b}, got {prior!r}")
        if not is_number(sigma) or not sigma > 0:
            raise InputError(path, f"{where}.sigma_log", f"expected a positive number, got {sigma!r}")
        if not isinstance(source, str) or not _PROVENANCE.match(source.strip()):
            raise InputError(path, f"{where}.source", "the prior and bounds need a provenance: 'source: ...' or 'assumption: <reason>'")
        for t in targets:
            if t in seen:
                raise InputError(path, f"{where}.set", f"{t} is set by two fit parameters")
            seen.add(t)
            try:
                v = get_path(rt, t)
            except KeyError:
                raise InputError(path, f"{where}.set", f"no such field {t!r}") from None
            if not b[0] * (1 - 1e-9) <= v <= b[1] * (1 + 1e-9):
                raise InputError(path, t, f"value {v:g} is outside the plausible bounds {b} of fit parameter {name!r}")
        starts = e.get("starts", [])
        if not (isinstance(starts, list) and all(is_number(x)
                                                 and b[0] <= x <= b[1] for x in starts)):
            raise InputError(path, f"{where}.starts", f"expected a list of values within the bounds {b}, got {starts!r}")
        out.append(FitParam(name, tuple(targets), float(prior), float(b[0]), float(b[1]), float(sigma), source,
                            tuple(float(x) for x in starts)))
    info = {k: v for k, v in fit.items() if k != "param"}
    return tuple(out), info


# ---------------------------------------------------------------------------------------------
# Writing fitted values back (the calibration): edit the file's text in place so that its
# comments and layout survive; a value and its provenance change together.


def set_value(text: str, section: str, key: str, value: float | list, source: str | None) -> str:
    """Replace ``key = ...`` in ``[section]`` ("" = root) and its line in the section's sources."""
    text = _replace_in_section(text, section, key, _fmt(value))
    if source is None:
        return text
    src_section = f"{section}.sources" if section else "sources"
    return _replace_in_section(text, src_section, key, '"' + source.replace('"', "'") + '"')


def set_path(text: str, path: str, value: float, source: str, rt: Runtime) -> str:
    """Write one fitted field given by its dotted path (fork_instructions as the pair)."""
    if path.startswith("fork_instructions["):
        pair = [round(rt.fork_base_instructions), round(rt.fork_per_thread_instructions)]
        return set_value(text, "", "fork_instructions", pair, source)
    section, _, key = path.rpartition(".")
    return set_value(text, section, key, value, source)


def _fmt(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace('"', "'") + '"'
    return f"{float(value):.4g}" if abs(value) < 1e5 else f"{float(value):.4e}"


def _replace_in_section(text: str, section: str, key: str, rendered: str) -> str:
    lines = text.split("\n")
    current = ""
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            current = s.strip("[]").strip()
            continue
        if current == section and re.match(rf'^\s*"?{re.escape(key)}"?\s*=', line):
            lines[i] = f"{key} = {rendered}"
            return "\n".join(lines)
    raise KeyError(f"{section or '<root>'}.{key} not found")
