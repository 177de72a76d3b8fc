"""Execution choices: which cores a training job uses and with how many threads.

An execution choice (the Swan paper's "core combination") is a set of cpus plus a thread
count. Identical cores are interchangeable, so per cluster only prefixes matter: the paper's
Pixel 3 choices are 0, 01, 012, 0123, 4, 45, 456, 4567, and SoCs with a prime core add 7, 47,
457. Mixed big+little sets are enumerated too, flagged ``kind="mixed"``: they always lose to
their big-core subset (little cores straggle) and the landscape shows why.

The cost order says how much a choice takes from the phone's owner (paper, section 4): more
cores of a type cost more, any big-core choice costs more than any little-only one, a choice
with the prime core costs more than one with other big cores only; mixed sets cost most.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Iterable

from swansim.errors import InputError
from swansim.hw.profile import SocSpec

KINDS = ("little", "big", "prime", "mixed", "default")
_KIND_RANK = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True)
class Choice:
    """A set of cpus and a thread count; ``pinned`` threads get one cpu each.

    Assumption: the paper pins "the training process" to a core set with sched_setaffinity,
    which leaves its threads free within the set; one cpu per thread is this model's reading
    (pinning the set instead moves the Pixel 3's normalised Fig. 2 latencies by at most 0.012
    and energies by at most 0.063, in a what-if).

    ``pinned=False`` is PyTorch's default: the threads may run anywhere in ``cpus`` and the
    kernel places them.
    """

    cpus: tuple[int, ...]
    threads: int
    kind: str = "big"
    pinned: bool = True

    def __post_init__(self):
        cpus = tuple(sorted(set(self.cpus)))
        object.__setattr__(self, "cpus", cpus)
        if not cpus or any(c < 0 for c in cpus):
            raise ValueError(f"a choice needs cpu ids >= 0, got {self.cpus!r}")
        if self.threads < 1:
            raise ValueError(f"a choice needs at least one thread, got {self.threads}")
        if self.pinned and self.threads != len(cpus):
            raise ValueError("a pinned choice has one thread per cpu")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def label(self) -> str:
        sep = "-" if max(self.cpus) >= 10 else ""
        base = sep.join(str(c) for c in self.cpus)
        return base if self.pinned else f"{base}/t{self.threads}"

    def __str__(self) -> str:
        return self.label

    def thread_cpus(self, soc: SocSpec) -> tuple[int, ...]:
        """Where each thread is expected to run: thread 0 (the master) on the fastest core.

        Pinned: one cpu each, fastest first. Unpinned: the kernel spreads busy threads over
        the fastest allowed cores (capacity-aware placement), wrapping when oversubscribed.
        """
        key = (self, soc.name, soc.path, tuple(c.capacity for c in soc.clusters))   # a swept profile differs
        got = _THREAD_CPUS.get(key)
        if got is None:
            order = sorted(self.cpus, key=lambda c: (-soc.cluster_of(c).capacity, c))
            got = _THREAD_CPUS[key] = tuple(order[i % len(order)] for i in range(self.threads))
        return got

    def clusters(self, soc: SocSpec) -> set[str]:
        return {soc.cluster_of(c).name for c in self.thread_cpus(soc)}


_THREAD_CPUS: dict[tuple, tuple[int, ...]] = {}   # (choice, soc, its capacities) -> placement


def _prefixes(cpus: Iterable[int]) -> list[tuple[int, ...]]:
    cpus = tuple(cpus)
    return [cpus[:i] for i in range(1, len(cpus) + 1)]


def enumerate_choices(soc: SocSpec, mixed: bool = True) -> list[Choice]:
    """The paper's choice space for ``soc``, generalised, in cost order (cheapest first).

    Per capacity tier its prefixes (`SocSpec.tiers`: clusters of one capacity form one tier,
    e.g. RK3588's two A76 domains give 4, 45, 456, 4567); on SoCs with a prime core
    (`SocSpec.prime`) that tier is "prime" and is also combined with prefixes of the tier below
    (SD865: 7, 47, 457, 4567). With ``mixed``: fastest full set plus one little core, all little
    plus one fastest-tier core, and all cores.
    """
    ranked = soc.ranked_clusters
    little = ranked[0]
    out: dict[tuple[int, ...], Choice] = {}

    def add(cpus, kind):
        cpus = tuple(sorted(cpus))
        if cpus not in out:
            out[cpus] = Choice(cpus, len(cpus), kind)

    for p in _prefixes(little.cpus):
        add(p, "little" if len(ranked) > 1 else "big")
    tiers = soc.tiers
    has_prime = soc.prime is not None
    for i, tier in enumerate(tiers):
        kind = "prime" if has_prime and i == len(tiers) - 1 else "big"
        for p in _prefixes(tier):
            add(p, kind)
    if has_prime:
        prime, below = tiers[-1], tiers[-2]
        for p in _prefixes(below):
            add(prime + p, "prime")
    if mixed and len(ranked) > 1:
        fast = tuple(cpu for tier in tiers for cpu in tier)
        if has_prime:
            fast = tiers[-1] + tiers[-2]
        add(fast + little.cpus[:1], "mixed")
        add(little.cpus + tiers[-1][:1], "mixed")
        add(tuple(range(soc.n_cpus)), "mixed")
    return sorted(out.values(), key=cost_key)


def cost_key(choice: Choice) -> tuple:
    """Sort key of the paper's cost order: kind, then number of cores, then label."""
    return (_KIND_RANK[choice.kind], len(choice.cpus), choice.label)


def pytorch_default(soc: SocSpec) -> Choice:
    """PyTorch's default, Swan's baseline: as many threads as big cores, no affinity."""
    return Choice(tuple(range(soc.n_cpus)), len(soc.big_cpus), "default", pinned=False)


def little_one(soc: SocSpec) -> Choice:
    """One thread pinned to the first little core: training that takes least from the owner."""
    return Choice((soc.little.cpus[0],), 1, "little" if len(soc.clusters) > 1 else "big")


def top_one(soc: SocSpec) -> Choice:
    """One thread pinned to the first core of the top-capacity cluster: where Swan settles for
    the depthwise models (experiments/policy_speedup.py: the Pixel 3's core 4, SD855/865's 7)."""
    top = soc.ranked_clusters[-1]
    return Choice((top.cpus[0],), 1, "prime" if soc.prime is not None else "big")


def parse_choice(label: str, soc: SocSpec) -> Choice:
    """A choice from its label ("4567", or "0-1-10" on SoCs with ten or more cpus)."""
    try:
        cpus = tuple(int(x) for x in (label.split("-") if "-" in label else label))
    except ValueError:
        raise InputError("choice", "label", f"{label!r} is not a list of cpu ids") from None
    if any(c >= soc.n_cpus for c in cpus) or len(set(cpus)) != len(cpus):
        raise InputError("choice", "label", f"{label!r}: cpus must be distinct and below {soc.n_cpus}")
    for known in enumerate_choices(soc):
        if known.cpus == tuple(sorted(cpus)):
            return known
    return Choice(cpus, len(cpus), "mixed" if len({soc.cluster_of(c).name for c in cpus}) > 1 else "big")


@dataclass(frozen=True)
class Plan:
    """An execution choice per layer for forward and for backward (and the optimizer step).

    Plans key memo tables (the batch model), so the set of choices and the hash - which would
    walk every layer - are computed once per plan."""

    fwd: tuple[Choice, ...]
    bwd: tuple[Choice, ...]
    update: Choice

    @classmethod
    def uniform(cls, choice: Choice, n_layers: int) -> "Plan":
        """One choice for every layer: one object per (choice, layers), hashed once."""
        return _uniform(cls, choice, n_layers)

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.fwd, self.bwd, self.update))
        return h

    def __getstate__(self) -> dict:
        # the cached hash depends on the process's string hashing: never carried to another
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "choices", "single")}

    @cached_property
    def choices(self) -> frozenset[Choice]:
        return frozenset((*self.fwd, *self.bwd, self.update))

    @cached_property
    def single(self) -> Choice | None:
        """The one choice of a uniform plan (None for a per-layer one)."""
        c = self.update
        return c if all(x is c or x == c for x in (*self.fwd, *self.bwd)) else None

    @property
    def label(self) -> str:
        return self.single.label if self.single is not None else "per-layer"

    def choice_at(self, layer: int, phase: str) -> Choice:
        """The choice a layer's phase ("fwd", "bwd" or "update") runs on."""
        return self.fwd[layer] if phase == "fwd" else self.update if phase == "update" else self.bwd[layer]


@lru_cache(maxsize=4096)
def _uniform(cls: type[Plan], choice: Choice, n_layers: int) -> Plan:
    plan = cls((choice,) * n_layers, (choice,) * n_layers, choice)
    plan.__dict__.update(choices=frozenset((choice,)), single=choice)
    return plan
