"""The policy interface and the registry of policies by name.

A policy decides whether it takes a training request on (`accept`, before the request's first
batch), before every later mini-batch whether training may go on (`admit`), and where
it runs (`plan`: an execution choice per layer, forward and backward, and one for the update);
after the batch it sees what it measured (`observe`). It reads only the records of
`swansim.policy.view`. A policy that needs the kernel booted with a thread placement other
than the default says so in ``placement`` (the runner reads it when it builds the phone).
Every decision worth explaining goes to ``decisions`` (the run writes them as a table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Sequence

from swansim.dnn.choices import Choice, Plan
from swansim.policy.view import BatchStats, PhoneState, PolicyView
from swansim.registry import Registry


@dataclass(frozen=True)
class Decision:
    """One thing a policy (or the runner, for admission) decided, and why."""

    time_s: float
    batch: int
    kind: str        # e.g. explore, select, prune, step_down, step_up, admit, decline
    plan: str        # the plan's label ("4567", "per-layer", ...) or "-"
    detail: str = ""


class Policy:
    """Base class: always admits; subclasses give `plan` and may override the rest."""

    name: ClassVar[str] = ""
    # Kernel thread placement the phone must boot with (kernel.placement.PLACEMENTS); None: the default.
    placement: ClassVar[str | None] = None
    # The runner hands this policy the true per-choice batch latency (``latency_by_choice``).
    needs_oracle: ClassVar[bool] = False
    # It reads the per-layer times of its batches (``BatchStats.layers``); runners that must keep
    # a policy small (the fleet carries one per client) leave them out for the others.
    needs_layers: ClassVar[bool] = False

    def __init__(self):
        self.decisions: list[Decision] = []
        self.purpose = "train"   # why the last planned batch runs: "train" or "explore"

    @classmethod
    def likely_choices(cls, choices: Sequence[Choice], default: Choice) -> tuple[Choice, ...]:
        """The choices this policy is sure to run on a phone whose ``choices`` (every one, in
        the cost order) and PyTorch's ``default`` are these: what a fleet simulates ahead
        (`federated.local.likely_keys`). Default: every pinned choice and the default."""
        return (*(c for c in choices if c.kind != "mixed"), default)

    def begin(self, state: PhoneState) -> None:
        """A run starts on a (possibly new) phone at ``state.time_s``; learned state is kept."""

    def accept(self, state: PhoneState) -> bool:
        """A training request arrives (a round's check-in, or the next request on the phone): take
        it on? Asked before the request's first batch instead of `admit`; default: what `admit` says."""
        return self.admit(state)

    def admit(self, state: PhoneState) -> bool:
        """Before each later batch of a request: may training go on now?"""
        return True

    def admits(self, state: PhoneState) -> bool:
        """Would `admit` let training go on in ``state``? Asked ahead of time (a stretch's later
        batches, `steady`), so it must leave the policy as it is; default: what `admit` says,
        for a policy whose `admit` keeps nothing."""
        return self.admit(state)

    def why_declined(self, state: PhoneState) -> str:
        """Why ``accept`` or ``admit`` refused ``state``: one of `DECLINE_REASONS` (runs count declines by it)."""
        return "other"

    def plan(self, view: PolicyView) -> Plan:
        raise NotImplementedError

    def observe(self, stats: BatchStats) -> None:
        """A batch finished; ``stats`` is what was measured."""

    def steady(self, state: PhoneState, plan: Plan, latency_s: float) -> bool:
        """Having planned ``plan`` for a batch of a request under way in ``state``: would this
        policy plan it again for the request's later batches, and decide nothing new on
        observing them, as long as each takes ``latency_s``, the owner leaves the phone as in
        ``state`` and it stays admitted? Then a fast-forward may run those batches as one
        stretch (`session.driver.FastForwardDriver`) and hand each to `plan` and `observe` as
        usual. Default False: every batch on its own."""
        return False

    def offer(self) -> dict:
        """What this policy reports to a coordinator of phones of its model ({}: nothing)."""
        return {}

    def adopt(self, shared: dict) -> None:
        """What such a coordinator holds for this phone model (other phones' ``offer``)."""

    def decide(self, time_s: float, batch: int, kind: str, plan: str = "-", detail: str = "") -> None:
        self.decisions.append(Decision(time_s, batch, kind, plan, detail))


# Why a policy refuses to train now, as run and compare tables count it: the battery above the
# policy's temperature limit, the battery below its minimum while discharging, the owner using the
# phone (screen on or an app in front), the phone not charging; anything else.
DECLINE_REASONS = ("battery_hot", "battery_low", "owner_active", "not_charging", "other")

def _named(name: str, cls) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"{cls!r} is not a swansim.policy.Policy subclass")
    cls.name = name


# Every policy by name: the package's own (`swansim.policy` imports its modules, which
# register themselves) and those of installed packages, entry-point group ``swansim.policies``.
POLICIES: Registry[type[Policy]] = Registry("policy", entry_points="swansim.policies", on_register=_named)


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator: make a policy available by ``name`` (``--policy NAME``)."""
    return POLICIES.register(name)


def policy_class(name: str, where: str = "--policy") -> type[Policy]:
    """The policy class called ``name``; an unknown name is an InputError listing the known ones."""
    return POLICIES.get(name, where)


def make_policy(name: str, **kwargs) -> Policy:
    return policy_class(name)(**kwargs)


def policy_names() -> tuple[str, ...]:
    return POLICIES.names()
