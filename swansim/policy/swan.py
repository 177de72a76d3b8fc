"""Swan (Singapuram et al., arXiv 2206.04687), as the paper describes it.

- Monitoring: take a training request on only while the phone is idle (nobody uses it); decline
  training while the battery is above 35 C; accept it while charging or above a minimum battery
  level. A request taken on an idle phone runs on when the owner comes back, under the
  adaptation below; the next request waits until the phone is idle again.
- Exploration: only while the phone is idle (screen off, no foreground app) and discharging,
  each training request runs one not-yet-explored execution choice for a few of its batches;
  those batches are real training (they count in time and energy) and the last one is the
  choice's profile (latency and energy; its per-layer latencies too, for `swan-layer`).
- Selection: the fastest explored choice. The explored choices in the paper's cost order form
  a ladder; a choice that costs more than an explored cheaper one without being faster or more
  energy-efficient is pruned from it, and the ladder ends at the fastest choice.
- Adaptation, per mini-batch (the paper's Fig. 4b control loop): a batch that takes more than
  1.1x the profiled latency of the choice it ran on means the owner's apps compete for the
  cores: step one rung down the ladder (a cheaper choice) and note the time ("grade_time").
  Otherwise, once 2 minutes have passed since that last step down, step one rung up - at every
  such batch (a step up does not reset the time), so Swan climbs back one rung a batch until
  a batch is slowed again or it is on the fastest choice. A request's first batch and the
  first after a change of choice are not checked (`SwanParams.grace_batches`): they pay a new
  process's or a migration's start-up, which no profile contains.

Where the paper is silent the choice made is a named parameter marked ``assumption``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping, Sequence

from swansim.checks import is_number
from swansim.dnn.choices import Choice, Plan
from swansim.errors import InputError
from swansim.policy.base import Policy, register
from swansim.policy.view import BatchStats, PhoneState, PolicyView


def _param(default, source: str):
    return field(default=default, metadata={"source": source})


@dataclass(frozen=True)
class SwanParams:
    """Every threshold Swan uses, with its source."""

    max_battery_temp_c: float = _param(
        35.0, "paper (monitoring): decline training while the battery is above 35 C")
    min_battery_pct: float = _param(
        20.0, "assumption: the paper trains 'when charging or above a minimum battery level' without a "
              "figure; Android's 'battery not low' job constraint (JobInfo.setRequiresBatteryNotLow) turns "
              "false at config_lowBatteryWarningLevel (15 %) and true again 5 points above it "
              "(config_lowBatteryCloseWarningBump), so background work resumes at 20 %")
    slowdown_factor: float = _param(
        1.1, "paper (adaptation): a batch over 1.1x its profiled latency steps one choice down")
    step_up_after_s: float = _param(
        120.0, "paper (adaptation, Fig. 4b): 2 minutes after the last step down, step one choice up a batch")
    explore_batches: int = _param(
        2, "assumption: the paper profiles a choice 'on a few batches'; the first batch on a new choice "
           "pays the re-pinning, cold caches and the clock ramp of its cores, so two batches and the "
           "second as the profile")
    costliest_first: bool = _param(
        True, "assumption: the paper does not say in which order choices are explored; the fastest explored "
              "choice trains the rest of every request, so exploring the costliest (most capable) choices "
              "first shortens the time spent on slow choices")
    idle_requests_only: bool = _param(
        True, "paper (monitoring, sec. 4.1): Swan decides on a training request on 'whether it has completed its "
              "execution choice exploration and the device being idle'; read here as: a request that arrives while "
              "the owner uses the phone (screen on or an app in front) is declined, and one taken on an idle phone "
              "runs to its end under the adaptation (Fig. 4b's loop checks only the battery). The paper's Table 3 "
              "measures Swan's training under PCMark, so training does meet the owner. false: the other reading "
              "(idleness needed only to explore), requests taken whenever the battery allows")
    grace_batches: int = _param(
        1, "assumption: the first batch after a change of choice pays the migration and the new cores' clock "
           "ramp, and the first of a request the new training process's thread pools and the clocks' ramp from "
           "idle; the profile (a warm batch) contains neither, so neither is held against it")

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(f.default, bool):
                if not isinstance(v, bool):
                    raise InputError("policy", f.name, f"expected true or false, got {v!r}")
                continue
            if not is_number(v) or v != v or v in (float("inf"), float("-inf")):
                raise InputError("policy", f.name, f"expected a finite number, got {v!r}")
        if self.slowdown_factor < 1.0:
            raise InputError("policy", "slowdown_factor", f"must be at least 1, got {self.slowdown_factor}")
        if self.step_up_after_s < 0:
            raise InputError("policy", "step_up_after_s", f"must not be negative, got {self.step_up_after_s}")
        if not isinstance(self.explore_batches, int) or self.explore_batches < 1:
            raise InputError("policy", "explore_batches", f"must be a positive integer, got {self.explore_batches!r}")
        if not isinstance(self.grace_batches, int) or self.grace_batches < 0:
            raise InputError("policy", "grace_batches", f"must be a non-negative integer, got {self.grace_batches!r}")
        if not 0.0 <= self.min_battery_pct <= 100.0:
            raise InputError("policy", "min_battery_pct", f"must be in 0..100, got {self.min_battery_pct}")


@dataclass(frozen=True)
class Profile:
    """What exploration measured for one choice (all from real training batches)."""

    latency_s: float
    energy_j: float
    layer_s: Mapping[tuple[int, str], float]   # (layer, phase) -> latency on this choice
    enter_s: float     # what the first batch on the choice cost more than the profiled one (>= 0)


def profile_of(runs: Sequence[BatchStats]) -> Profile:
    """The profile of a choice from its exploration batches: the last one, and how much more the
    first one took (the cost of switching into the choice, as measured)."""
    last = runs[-1]
    layer_s: dict[tuple[int, str], float] = {}
    for ls in last.layers:
        key = (ls.layer, ls.phase)
        layer_s[key] = layer_s.get(key, 0.0) + ls.latency_s
    enter = max(0.0, runs[0].latency_s - last.latency_s) if len(runs) > 1 else 0.0
    return Profile(last.latency_s, last.energy_j, layer_s, enter)


def decline_reason(state: PhoneState, p: SwanParams, request: bool = False) -> str | None:
    """Why Swan's monitoring declines now (None: it goes on); ``request``: a new request arrives."""
    why = decline_kind(state, p, request)
    if why == "battery_hot":
        return f"battery {state.battery_temp_c:.1f} C > {p.max_battery_temp_c:g} C"
    if why == "battery_low":
        return f"battery {state.battery_pct:.1f} % < {p.min_battery_pct:g} % and not charging"
    if why == "owner_active":
        return "the owner is using the phone"
    return None


def decline_kind(state: PhoneState, p: SwanParams, request: bool = False) -> str | None:
    """The kind of reason (`policy.base.DECLINE_REASONS`) Swan's monitoring declines for, the
    battery first, or None. During a request only the battery counts; a new request (``request``)
    also needs an idle phone (`SwanParams.idle_requests_only`)."""
    if state.battery_temp_c is not None and state.battery_temp_c > p.max_battery_temp_c:
        return "battery_hot"
    if not state.charging and state.battery_pct is not None and state.battery_pct < p.min_battery_pct:
        return "battery_low"
    if request and p.idle_requests_only and not state.idle:
        return "owner_active"
    return None


def ladder_of(profiles: Mapping[Choice, Profile], order: Sequence[Choice]) -> tuple[list[Choice], list[Choice]]:
    """(ladder, pruned) over the explored choices, ``order`` being the cost order (cheapest first).

    A choice is pruned when a cheaper explored choice is at least as fast and at least as
    energy-efficient; the ladder is the rest, cut after the fastest (its top).
    """
    explored = [c for c in order if c in profiles]
    kept, pruned = [], []
    for i, c in enumerate(explored):
        p = profiles[c]
        if any(profiles[d].latency_s <= p.latency_s and profiles[d].energy_j <= p.energy_j for d in explored[:i]):
            pruned.append(c)
        else:
            kept.append(c)
    if not kept:
        return [], pruned
    top = min(range(len(kept)), key=lambda i: (profiles[kept[i]].latency_s, i))
    return kept[:top + 1], pruned


@register("swan")
class Swan(Policy):
    """The paper's engine: explore when idle, run the fastest choice, step down under interference."""

    def __init__(self, params: SwanParams | None = None, **overrides):
        super().__init__()
        self.params = params or SwanParams(**overrides)
        self.profiles: dict[Choice, Profile] = {}
        self.ladder: list[Choice] = []
        self.pruned: set[Choice] = set()
        self.rung = -1
        self._space: tuple[Choice, ...] = ()
        self._n_layers = 0
        self._exploring: Choice | None = None
        self._explore_runs: list[BatchStats] = []
        self._request: int | None = None
        self._explored_in_request = False
        self._last_change_s = 0.0
        self._since_change = 0
        self._admitted: bool | None = None
        self._running: Plan | None = None      # the plan handed out for the batch in flight
        self._shared: dict | None = None       # a coordinator's profiles, taken at the next plan

    # -- monitoring -----------------------------------------------------------------------

    def begin(self, state: PhoneState) -> None:
        self._exploring, self._explore_runs = None, []
        self._request, self._admitted = None, None
        self._last_change_s, self._since_change = state.time_s, 0
        self.rung = len(self.ladder) - 1

    def accept(self, state: PhoneState) -> bool:
        return self._monitor(state, decline_reason(state, self.params, request=True))

    def admit(self, state: PhoneState) -> bool:
        return self._monitor(state, decline_reason(state, self.params))

    def _monitor(self, state: PhoneState, reason: str | None) -> bool:
        ok = reason is None
        if ok != self._admitted:
            self._admitted = ok
            self.decide(state.time_s, -1, "admit" if ok else "decline", "-", reason or "")
        return ok

    def admits(self, state: PhoneState) -> bool:
        return decline_kind(state, self.params) is None

    def why_declined(self, state: PhoneState) -> str:
        return decline_kind(state, self.params, request=True) or "other"

    def can_explore(self, state: PhoneState) -> bool:
        """The paper explores only while the phone is idle and discharging."""
        return state.idle and not state.charging

    # -- sharing (the paper: a coordinator may share finished profiles between phones of a model) --

    def offer(self) -> dict:
        return dict(self.profiles)

    def adopt(self, shared: dict) -> None:
        self._shared = dict(shared)   # as it is now: the coordinator's pool grows afterwards

    def _take_shared(self, t: float, b: int) -> None:
        new = {c: p for c, p in self._shared.items() if c in self._space and c not in self.profiles}
        self._shared = None
        if new:
            self.profiles.update(new)
            self._reselect(t, b, f"{len(new)} profiles from the coordinator")

    # -- planning -------------------------------------------------------------------------

    @classmethod
    def likely_choices(cls, choices, default) -> tuple[Choice, ...]:
        return tuple(c for c in choices if c.kind != "mixed")   # the choice space `plan` explores

    def explore_order(self) -> list[Choice]:
        """Unexplored choices in the order they will be tried."""
        order = [c for c in self._space if c not in self.profiles]
        return order[::-1] if self.params.costliest_first else order

    def plan(self, view: PolicyView) -> Plan:
        if not self._space:
            # the paper's choice space: per-cluster prefixes (mixed big+little sets always lost)
            self._space = self.likely_choices(view.choices, view.default_choice)
            self._n_layers = view.model.n_layers
        t, b = view.state.time_s, view.batch
        if self._shared:
            self._take_shared(t, b)
        if view.request != self._request:
            # an exploration running over a request's end counts as the next request's; the
            # request's first batches are not held against a profile (`grace_batches`)
            self._request, self._explored_in_request = view.request, self._exploring is not None
            self._since_change = 0
        quiet = self.can_explore(view.state)
        if self._exploring is not None and not quiet:
            self._abort(t, b, "the phone is in use or charging")
        if self._exploring is None and not self._explored_in_request and quiet:
            todo = self.explore_order()
            if todo:
                self._exploring, self._explore_runs, self._explored_in_request = todo[0], [], True
                self.decide(t, b, "explore", todo[0].label, f"{len(todo) - 1} more unexplored")
        if self._exploring is not None:
            self.purpose = "explore"
            self._running = view.uniform(self._exploring)
        else:
            self.purpose = "train"
            self._running = self.rung_plan(self.rung)
        return self._running

    def rung_plan(self, rung: int) -> Plan:
        """The plan of a rung of the ladder; before anything is explored, the cheapest choice."""
        if not self.ladder:
            return Plan.uniform(self._space[0], self._n_layers)
        return Plan.uniform(self.ladder[rung], self._n_layers)

    def expected_s(self, plan: Plan) -> float | None:
        """The profiled latency of ``plan`` (None: not profiled)."""
        if len(plan.choices) == 1:
            p = self.profiles.get(next(iter(plan.choices)))
            return p.latency_s if p else None
        return None

    def steady(self, state: PhoneState, plan: Plan, latency_s: float) -> bool:
        """On the ladder's top rung, with nothing to explore now (all explored, one explored in
        this request already, or a phone in use or charging), a batch within the slowdown factor
        of its profile changes nothing (`adapt`): no step down, no step up."""
        if (self._exploring is not None or self._shared or not self.ladder or self.rung != len(self.ladder) - 1
                or plan != self.rung_plan(self.rung)
                or (not self._explored_in_request and self.can_explore(state) and self.explore_order())):
            return False
        expected = self.expected_s(plan)
        return expected is None or latency_s <= self.params.slowdown_factor * expected

    # -- measurements ---------------------------------------------------------------------

    def observe(self, stats: BatchStats) -> None:
        if self._exploring is not None and stats.plan == self._running:
            if not stats.quiet:
                self._abort(stats.start_s, stats.batch, "the phone was used during the batch")
                return
            self._explore_runs.append(stats)
            if len(self._explore_runs) >= self.params.explore_batches:
                choice, self._exploring = self._exploring, None
                self.profiles[choice] = profile_of(self._explore_runs)
                self._since_change = 0   # the next batch migrates back
                self._reselect(stats.start_s + stats.latency_s, stats.batch,
                               f"profiled {choice.label}: {self.profiles[choice].latency_s:.3f} s, "
                               f"{self.profiles[choice].energy_j:.2f} J")
            return
        if stats.plan != self.rung_plan(self.rung) or not self.ladder:
            return
        self._since_change += 1
        self.adapt(stats)

    def adapt(self, stats: BatchStats) -> None:
        """The paper's per-batch adaptation on the ladder."""
        p = self.params
        end_s = stats.start_s + stats.latency_s
        expected = self.expected_s(stats.plan)
        checked = self._since_change > p.grace_batches
        if checked and expected is not None and stats.latency_s > p.slowdown_factor * expected and self.rung > 0:
            self._move(-1, end_s, stats.batch, "step_down",
                       f"{stats.latency_s:.3f} s > {p.slowdown_factor:g} x {expected:.3f} s")
        elif end_s - self._last_change_s >= p.step_up_after_s and self.rung < len(self.ladder) - 1:
            self._move(+1, end_s, stats.batch, "step_up",
                       f"{end_s - self._last_change_s:.0f} s since the last step down")

    def _move(self, step: int, t: float, batch: int, kind: str, detail: str) -> None:
        self.rung += step
        self._since_change = 0
        if step < 0:   # Fig. 4b: grade_time is set where the choice is downgraded only
            self._last_change_s = t
        self.decide(t, batch, kind, self.rung_plan(self.rung).label, detail)

    def _abort(self, t: float, batch: int, why: str) -> None:
        self.decide(t, batch, "explore_abort", self._exploring.label, why)
        self._exploring, self._explore_runs = None, []
        self._since_change = 0

    def _reselect(self, t: float, b: int, detail: str) -> None:
        """Rebuild the ladder after new profiles; stay on the top rung if we were there."""
        was_top = self.rung == len(self.ladder) - 1
        current = self.ladder[self.rung] if self.ladder else None
        before = self.rung_plan(self.rung)
        self.ladder, pruned = ladder_of(self.profiles, self._space)
        self.on_ladder_changed()
        for c in pruned:
            if c not in self.pruned:
                self.pruned.add(c)
                self.decide(t, b, "prune", c.label, "a cheaper choice is as fast and as energy-efficient")
        if was_top or current is None:
            self.rung = len(self.ladder) - 1
        elif current in self.ladder:
            self.rung = self.ladder.index(current)
        else:   # the choice we stepped down to was pruned: the next cheaper rung
            rank = {c: i for i, c in enumerate(self._space)}
            below = [i for i, c in enumerate(self.ladder) if rank[c] <= rank[current]]
            self.rung = below[-1] if below else 0
        after = self.rung_plan(self.rung)
        if after != before:
            self._last_change_s = t
            self.decide(t, b, "select", after.label, detail)

    def on_ladder_changed(self) -> None:
        """Hook for subclasses: the profiles or the ladder changed."""
