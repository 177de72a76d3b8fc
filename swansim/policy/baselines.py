"""Baselines: one fixed execution choice each, and their admission rules.

- ``pytorch-default``: the paper's baseline ("state of the art"): PyTorch's default thread
  count (the number of big cores), no affinity, the kernel's default placement. It always
  admits, like a training script started by hand.
- ``all-cores``: one thread pinned to every core.
- ``little-only``: one thread pinned to every core of the little cluster (training that keeps
  off the cores the owner's apps prefer).
- ``eas``: PyTorch's default threads, unpinned, on a kernel booted with energy-aware placement
  (``kernel.sched`` "eas": a waking thread only considers cores its utilisation fits). The
  later version of the paper compares with Linux's EAS.
- ``idle-charging-only``: PyTorch's default, admitted only while the phone charges with the
  screen off and no app in the foreground (Google's FL eligibility, Bonawitz et al., MLSys'19;
  its unmetered-network condition does not affect where training runs).
- ``oracle``: the fastest static choice for this phone and model with perfect knowledge: the
  runner hands it the true batch latency of every choice (measured by simulation, never
  through the view); it admits like Swan. An upper bound for ``swan``'s speed on an idle phone.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from swansim.dnn.choices import Choice, Plan
from swansim.errors import InputError
from swansim.policy.base import Policy, register
from swansim.policy.swan import SwanParams, decline_kind
from swansim.policy.view import PhoneState, PolicyView


class Static(Policy):
    """One plan for every batch, chosen from the phone's choices on the first batch."""

    def __init__(self):
        super().__init__()
        self._plan: Plan | None = None

    @classmethod
    def pick(cls, choices: Sequence[Choice], default: Choice) -> Choice:
        """The one choice, from the phone's ``choices`` (cost order) and PyTorch's ``default``."""
        raise NotImplementedError

    @classmethod
    def likely_choices(cls, choices, default) -> tuple[Choice, ...]:
        return (cls.pick(choices, default),)

    def choose(self, view: PolicyView) -> Choice:
        return self.pick(view.choices, view.default_choice)

    def plan(self, view: PolicyView) -> Plan:
        if self._plan is None:
            self._plan = view.uniform(self.choose(view))
            self.decide(view.state.time_s, view.batch, "select", self._plan.label)
        return self._plan

    def steady(self, state: PhoneState, plan: Plan, latency_s: float) -> bool:
        return plan == self._plan


@register("pytorch-default")
class PytorchDefault(Static):
    """PyTorch's default, the paper's baseline: as many threads as big cores, no affinity."""

    @classmethod
    def pick(cls, choices, default) -> Choice:
        return default


@register("all-cores")
class AllCores(Static):
    """Every core, one pinned thread each."""

    @classmethod
    def pick(cls, choices, default) -> Choice:
        return max(choices, key=lambda c: len(c.cpus))


@register("little-only")
class LittleOnly(Static):
    """Every little core, one pinned thread each: the least a run takes from the owner's apps."""

    @classmethod
    def pick(cls, choices, default) -> Choice:
        # a single-cluster SoC has no little kind: its whole cluster
        little = [c for c in choices if c.kind == "little"] or [c for c in choices if c.kind == choices[0].kind]
        return max(little, key=lambda c: len(c.cpus))


@register("eas")
class Eas(PytorchDefault):
    """PyTorch's default placed by Linux's Energy-Aware Scheduling (the later version's comparison)."""

    placement = "eas"


@register("idle-charging-only")
class IdleChargingOnly(PytorchDefault):
    """PyTorch's default, training only while the phone is idle and charging (classic FL eligibility)."""

    def admit(self, state: PhoneState) -> bool:
        return state.charging and state.idle

    def why_declined(self, state: PhoneState) -> str:
        return "not_charging" if not state.charging else "owner_active"


@register("oracle")
class Oracle(Static):
    """The best static choice, knowing every choice's true latency up front."""

    needs_oracle = True

    @classmethod
    def likely_choices(cls, choices, default) -> tuple[Choice, ...]:
        return (*choices, default)   # whichever its latencies make the fastest

    def __init__(self, latency_by_choice: Mapping[str, float] | None = None, params: SwanParams | None = None):
        super().__init__()
        if not latency_by_choice:
            raise InputError("oracle", "latency_by_choice", "the oracle needs the true latency of every choice")
        self.latency_by_choice = dict(latency_by_choice)
        self.params = params or SwanParams()

    def accept(self, state: PhoneState) -> bool:
        return decline_kind(state, self.params, request=True) is None

    def admit(self, state: PhoneState) -> bool:
        return decline_kind(state, self.params) is None

    def why_declined(self, state: PhoneState) -> str:
        return decline_kind(state, self.params, request=True) or "other"

    def choose(self, view: PolicyView) -> Choice:
        known = [c for c in (*view.choices, view.default_choice) if c.label in self.latency_by_choice]
        if not known:
            raise InputError("oracle", "latency_by_choice", "no latency for any of this phone's choices")
        return min(known, key=lambda c: self.latency_by_choice[c.label])
