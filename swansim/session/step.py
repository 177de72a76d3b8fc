"""A policy's side of one mini-batch, the same on every path that trains a phone.

Before the batch the policy admits the phone's state or declines it (`Policy.accept` before a
request's first batch, `Policy.admit` before the others; a decline is counted by reason and
ends the request in flight); it plans the batch from a `PolicyView`; after it, it
observes the batch's measurements (`BatchStats`). The full simulation (`PolicyDriver`) and the
fast-forward a fleet client runs (`FastForwardDriver`) differ only in how a batch is measured.

A batch is *quiet* - worth profiling - when the phone was idle and discharging at its start and
nothing (screen, app, charger) changed until its end. Its energy is counted above the phone's
idle floor (`Platform.idle_floor_w`: screen off, no charger loss), read before training starts.
"""
from __future__ import annotations

from functools import lru_cache

from swansim.dnn.choices import Choice, Plan, enumerate_choices, pytorch_default
from swansim.dnn.tasks import build_task
from swansim.hw.profile import SocSpec
from swansim.policy.base import DECLINE_REASONS, Policy
from swansim.policy.view import BatchStats, History, LayerStat, ModelInfo, PhoneState, PolicyView


@lru_cache(maxsize=None)
def model_info(model: str) -> ModelInfo:
    """What a policy may know of a Swan task: its layers' names and operators."""
    graph = build_task(model)
    return ModelInfo(model, tuple(layer.name for layer in graph.layers), tuple(layer.op for layer in graph.layers))


def is_quiet(state: PhoneState, changed: bool) -> bool:
    """A batch worth profiling: idle and discharging at its start (``state``), no change of
    screen, app or charger before its end."""
    return state.idle and not state.charging and not changed


_CHOICES: dict[int, tuple[SocSpec, tuple[Choice, ...]]] = {}


def _choices(soc: SocSpec) -> tuple[Choice, ...]:
    """`enumerate_choices(soc)`, built once per SoC object (a fleet makes a step per request;
    the entry keeps its SoC alive, so an id is never reused under it)."""
    got = _CHOICES.get(id(soc))
    if got is None or got[0] is not soc:
        if len(_CHOICES) >= 64:
            _CHOICES.clear()
        got = _CHOICES[id(soc)] = (soc, tuple(enumerate_choices(soc, mixed=True)))
    return got[1]


class PolicyStep:
    """A policy on one phone, batch by batch: admission (declines counted by reason), the
    plan, the observation; the request counters; the batches it observed (``stats``)."""

    def __init__(self, policy: Policy, soc: SocSpec, model: str, request: int = 0):
        self.policy = policy
        self.choices = _choices(soc)
        self.default_choice = pytorch_default(soc)
        self.info = model_info(model)
        self.stats: list[BatchStats] = []
        self._history = History(self.stats)
        self.request, self.in_request = request, 0
        # admission checks refused, by reason (`policy.base.DECLINE_REASONS`)
        self.declines = dict.fromkeys(DECLINE_REASONS, 0)

    def admit(self, state: PhoneState) -> bool:
        """The policy's `accept` before a request's first batch, its `admit` before the others."""
        if (self.policy.accept(state) if self.in_request == 0 else self.policy.admit(state)):
            return True
        why = self.policy.why_declined(state)
        self.declines[why if why in self.declines else "other"] += 1
        if self.in_request:    # a declined request is dropped; training resumes with a new one
            self.end_request()
        return False

    def plan(self, state: PhoneState, batch: int) -> Plan:
        return self.policy.plan(PolicyView(self.choices, self.default_choice, self.info, state, batch, self.request,
                                           self.in_request, self._history))

    def observe(self, batch: int, plan: Plan, state: PhoneState, start_s: float, latency_s: float,
                net_energy_j: float, layers: tuple[LayerStat, ...], quiet: bool) -> BatchStats:
        """The batch's measurements to the policy; counts it in the request."""
        stats = BatchStats(batch, self.request, self.in_request, plan, start_s, latency_s, net_energy_j, layers,
                           state, quiet)
        self.stats.append(stats)
        self.policy.observe(stats)
        self.in_request += 1
        return stats

    def end_request(self) -> None:
        self.request, self.in_request = self.request + 1, 0
