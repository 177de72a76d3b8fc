"""Runtime profiles: the software stack that runs a model (PyTorch with OpenMP, an ncnn-like engine).

A runtime profile is a TOML file under ``swansim/dnn/runtimes/``. It says how the stack turns
a layer into work on cores: per op class and core family an efficiency (fraction of the
core's peak FLOP rate), how each phase is split over threads (per sample, per channel, per
element chunk, or not at all), what a parallel region costs to fork and join, how long idle
worker threads spin before they sleep, what a woken worker pays, and what it costs to move
cache lines between cores when small work is split. Every number has a provenance string in
the ``sources`` table next to it ("calibrated: ..." or "assumption: ..."); the loader refuses
a number without one, and names the file and the field on any error.

Fields (all per runtime; ``<fam>`` is a core family, ``<op>`` an op class):
  partition                 "static" (equal chunks, the slowest core sets the pace) or "dynamic"
  grain_elements            elementwise regions at or below this many elements run on one thread
  dispatch_instructions     serial work on the calling thread per op call (framework overhead)
  fork_instructions         fork/join of a region: [base, per extra thread], on every member
  cross_cluster_factor      fork/join multiplier when a team spans clusters
  spin_budget_cycles        an idle worker busy-waits this long, then sleeps (futex)
  switch_instructions       re-pinning and resizing the pool, per migrated thread
  grouped_conv              "per_group" (a loop of single-group convolutions) or "native"
  grouped_bwd_passes        element passes over the whole input per group in backward
  resident_dram_fraction    share of bytes that reach DRAM when a tensor fits the L3
  [families]                core family -> uarch name fragments (others: default_family)
  [family.<fam>]            sync_scale, wake_latency_s, line_transfer_cycles, stream_bytes_per_cycle
  [ops.<op>]                peak ("gemm"/"vector"), split.<phase>, regions, efficiency.<fam>
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swansim.errors import InputError

RUNTIME_DIR = Path(__file__).resolve().parent / "runtimes"
OP_CLASSES = ("conv", "depthwise", "pointwise", "linear", "pool", "batchnorm", "activation",
              "shuffle", "add", "concat", "optimizer")
PHASES = ("fwd", "bwd_input", "bwd_weight", "update")
SPLITS = ("batch", "channels", "elements", "serial")
FAMILY_FIELDS = ("sync_scale", "wake_latency_s", "line_transfer_cycles", "stream_bytes_per_cycle")


@dataclass(frozen=True)
class FamilyParams:
    """What a core family (in-order little, out-of-order big) does differently."""

    sync_scale: float              # fork/join cycles multiplier (atomics, line ping-pong)
    wake_latency_s: float          # a sleeping worker's core leaves its idle state
    line_transfer_cycles: float    # stall per cache line fetched from another core
    stream_bytes_per_cycle: float  # what one core can stream from L3/DRAM


@dataclass(frozen=True)
class OpParams:
    """How the runtime runs one op class."""

    peak: str                      # "gemm" or "vector": which peak efficiency applies to
    efficiency: dict[str, float]   # core family -> fraction of that peak
    split: dict[str, str]          # phase -> batch | channels | elements | serial
    regions: str                   # "one" region per op call, or "per_group"


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
    cross_cluster_factor: float
    spin_budget_cycles: float
    switch_instructions: float
    grouped_conv: str
    grouped_bwd_passes: float
    resident_dram_fraction: float
    families: dict[str, tuple[str, ...]]
    default_family: str
    family: dict[str, FamilyParams]
    ops: dict[str, OpParams]

    def family_of(self, uarch: str) -> str:
        """The core family of a uarch name (by fragment, e.g. "cortex-a55" -> "inorder")."""
        u = uarch.lower()
        for fam, fragments in self.families.items():
            if any(f in u for f in fragments):
                return fam
        return self.default_family

    def supports(self, phase: str) -> bool:
        return all(phase in op.split for name, op in self.ops.items() if name != "optimizer") \
            if phase != "update" else "update" in self.ops["optimizer"].split


# ---------------------------------------------------------------------------------------------


class _Reader:
    """Reads fields of one TOML table and names file and field on failure."""

    def __init__(self, data: Any, path: Path, prefix: str, sources: dict | None):
        if not isinstance(data, dict):
            raise InputError(path, prefix or "<root>", "expected a table")
        self.data, self.path, self.prefix = data, path, prefix
        self.sources = data.get("sources", {}) if sources is None else sources
        if not isinstance(self.sources, dict):
            raise InputError(path, self.f("sources"), "expected a table of field = \"provenance\"")

    def f(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def err(self, key: str, reason: str) -> InputError:
        return InputError(self.path, self.f(key), reason)

    def get(self, key: str):
        if key not in self.data:
            raise self.err(key, "missing required field")
        return self.data[key]

    def num(self, key: str, lo: float, hi: float) -> float:
        v = self.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.err(key, f"expected a number, got {v!r}")
        if not lo <= v <= hi:
            raise self.err(key, f"{v} is outside {lo}..{hi}")
        src = self.sources.get(key)
        if not isinstance(src, str) or not re.match(r"^(calibrated|assumption|measured|derived|source)\b", src.strip()):
            raise InputError(self.path, self.f(f"sources.{key}"),
                             "every number needs a provenance: 'calibrated: <figure>' or 'assumption: <reason>'")
        return float(v)

    def str(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        v = self.get(key)
        if not isinstance(v, str) or not v:
            raise self.err(key, f"expected a non-empty string, got {v!r}")
        if choices and v not in choices:
            raise self.err(key, f"{v!r} is not one of {', '.join(choices)}")
        return v

    def sub(self, key: str) -> "_Reader":
        return _Reader(self.get(key), self.path, self.f(key), None)


def load_runtime(name_or_path: str | Path) -> Runtime:
    """Load a runtime profile by name ("pytorch", "ncnn") or path, validating every field."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = RUNTIME_DIR / f"{name_or_path}.toml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in RUNTIME_DIR.glob("*.toml")))
            raise InputError("runtime", "name", f"unknown runtime {str(name_or_path)!r} (known: {known})")
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(path, "<file>", "no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(path, "<syntax>", f"not valid TOML: {e}") from None
    r = _Reader(data, path, "", None)
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
            sync_scale=t.num("sync_scale", 0.1, 100),
            wake_latency_s=t.num("wake_latency_s", 0, 0.1),
            line_transfer_cycles=t.num("line_transfer_cycles", 0, 1e5),
            stream_bytes_per_cycle=t.num("stream_bytes_per_cycle", 0.05, 256))
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
            split[phase] = split_t.str(phase, SPLITS)
        eff_t = t.sub("efficiency")
        # Winograd and other fast kernels beat the FLOP count of the plain op: efficiency > 1 is allowed.
        eff = {fam: eff_t.num(fam, 1e-4, 8.0) for fam in fam_params}
        ops[op] = OpParams(peak=t.str("peak", ("gemm", "vector")), efficiency=eff, split=split,
                           regions=t.str("regions", ("one", "per_group")))
    fork = r.get("fork_instructions")
    if not (isinstance(fork, list) and len(fork) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in fork)):
        raise r.err("fork_instructions", f"expected [base, per extra thread] >= 0, got {fork!r}")
    if not isinstance(r.sources.get("fork_instructions"), str):
        raise InputError(path, "sources.fork_instructions",
                         "every number needs a provenance: 'calibrated: <figure>' or 'assumption: <reason>'")
    return Runtime(
        name=r.str("name"), title=r.str("title"), path=path,
        partition=r.str("partition", ("static", "dynamic")),
        grain_elements=r.num("grain_elements", 1, 1e9),
        dispatch_instructions=r.num("dispatch_instructions", 0, 1e8),
        fork_base_instructions=float(fork[0]), fork_per_thread_instructions=float(fork[1]),
        cross_cluster_factor=r.num("cross_cluster_factor", 1, 100),
        spin_budget_cycles=r.num("spin_budget_cycles", 0, 1e10),
        switch_instructions=r.num("switch_instructions", 0, 1e9),
        grouped_conv=r.str("grouped_conv", ("per_group", "native")),
        grouped_bwd_passes=r.num("grouped_bwd_passes", 0, 64),
        resident_dram_fraction=r.num("resident_dram_fraction", 0, 1),
        families=families, default_family=default_family, family=fam_params, ops=ops,
    )


# ---------------------------------------------------------------------------------------------
# Writing fitted values back (the calibration): edit the file's text in place so that its
# comments and layout survive; a value and its provenance change together.


def set_value(text: str, section: str, key: str, value: float | list, source: str) -> str:
    """Replace ``key = ...`` in ``[section]`` ("" = root) and its line in the section's sources."""
    text = _replace_in_section(text, section, key, _fmt(value))
    src_section = f"{section}.sources" if section else "sources"
    return _replace_in_section(text, src_section, key, '"' + source.replace('"', "'") + '"')


def _fmt(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return f"{float(value):.4g}" if abs(value) < 1e5 else f"{float(value):.4e}"


def _replace_in_section(text: str, section: str, key: str, rendered: str) -> str:
    lines = text.split("\n")
    current = ""
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("[") and s.endswith("]") and not s.startswith("[["):
            current = s[1:-1].strip()
            continue
        if current == section and re.match(rf'^\s*"?{re.escape(key)}"?\s*=', line):
            lines[i] = f"{key} = {rendered}"
            return "\n".join(lines)
    raise KeyError(f"{section or '<root>'}.{key} not found")
