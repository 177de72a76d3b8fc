"""Per-layer Swan: an execution choice per layer, forward and backward, by dynamic programming.

Beyond the paper (which picks one choice per model). Exploration, admission and interference
logic are Swan's (`swansim.policy.swan`); what changes is the plan of each rung of the
ladder. A batch is a chain of steps - the forward of layers 0..L-1, the backward (input and
weight gradient) of layers L-1..0, then the optimizer update - and the next batch starts
where this one ended, so the chain is a cycle. The plan minimises

    sum over steps of latency(step, choice) + sum over consecutive steps of switch(a, b)

where both terms come only from what the policy measured: ``latency`` is the step's latency in
the choice's profile batch (a uniform batch on that choice, from exploration), and
``switch(a, b)`` is learned from the per-layer batches the policy ran: at every switch, the gap
between the two layer phases (re-pinning the team) plus what the first phase on ``b`` took over
its profiled latency (waking sleeping threads, pulling data out of other cores' caches, clocks
ramping on cores that were idle). Before any per-layer batch has run, it is ``b``'s entry cost
seen in exploration (how much longer the first batch on ``b`` took than the profile batch).

Rung ``k`` below the top may only use choices that cost no more than the ladder's choice
there (the paper's cost order); the top rung may use every explored choice, pruned ones
included (a choice slower for the whole model can still be faster for some layers). A
per-layer plan is a prediction until it has run: its first quiet batch (past the grace batch)
is its profile and teaches the switching costs, after which the DP plans again. A rung runs
the fastest plan it knows - its uniform choice or a per-layer plan measured faster - or the
DP's newest plan while that is predicted faster still; each plan is tried once, so the policy
settles after a few batches.

Whether a batch of a measured plan is slow (the paper's 1.1x test for interference) is judged
against the plan's mean over all its quiet batches, not against the one batch that selected
it. The rung picks the fastest of several plans, each measured once, so the one it picks tends
to be the one whose batch came out lucky (a winner's curse): on the Pixel 3's ShuffleNetV2 a
plan picked at 1.760 s then ran 1.94 s, over 1.1x of that sample, and the policy stepped down
to a little core at 11 s a batch. Selection stays on the first batch so the policy settles
(re-selecting on the means made it hop between plans within a few % of each other). Our
choice: the paper has one choice per model, profiled once, and does not say this.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from swansim.dnn.choices import Choice, Plan
from swansim.policy.base import register
from swansim.policy.swan import Swan
from swansim.policy.view import BatchStats


def best_chain(costs: np.ndarray, switch: np.ndarray, cyclic: bool = True) -> tuple[float, list[int]]:
    """Minimum of ``sum_i costs[i, x_i] + sum_i switch[x_{i-1}, x_i]`` (plus
    ``switch[x_{n-1}, x_0]`` if ``cyclic``) over assignments ``x``; ``inf`` marks a disallowed
    choice. Returns (total, x). Ties go to the lower index (the cheaper choice)."""
    costs = np.asarray(costs, dtype=float)
    switch = np.asarray(switch, dtype=float)
    n, c = costs.shape
    if n == 0:
        return 0.0, []
    starts = c if cyclic else 1
    # dp[s, b]: best total of steps 0..i with x_0 = s (cyclic) and x_i = b
    dp = np.full((starts, c), np.inf)
    if cyclic:
        dp[np.arange(c), np.arange(c)] = costs[0]
    else:
        dp[0] = costs[0]
    back = np.zeros((n, starts, c), dtype=np.int64)
    for i in range(1, n):
        tot = dp[:, :, None] + switch[None, :, :]
        back[i] = tot.argmin(axis=1)
        dp = np.take_along_axis(tot, back[i][:, None, :], axis=1)[:, 0, :] + costs[i][None, :]
    final = dp + switch.T if cyclic else dp   # final[s, b] closes the cycle b -> s
    s, b = np.unravel_index(int(np.argmin(final)), final.shape)
    total = float(final[s, b])
    if not np.isfinite(total):
        raise ValueError("no allowed choice for some step")
    x = [0] * n
    x[-1] = int(b)
    for i in range(n - 1, 0, -1):
        x[i - 1] = int(back[i, s, x[i]])
    return total, x


def chain_steps(n_layers: int) -> list[tuple[str, int]]:
    """A batch's steps in execution order: ("fwd", i), then ("bwd", i) backwards, then ("update", -1)."""
    return [("fwd", i) for i in range(n_layers)] + [("bwd", i) for i in range(n_layers - 1, -1, -1)] + [("update", -1)]


def step_latency_s(layer_s, step: tuple[str, int]) -> float:
    kind, i = step
    if kind == "fwd":
        return layer_s.get((i, "fwd"), 0.0)
    if kind == "bwd":
        return layer_s.get((i, "bwd_input"), 0.0) + layer_s.get((i, "bwd_weight"), 0.0)
    return sum(v for (_, phase), v in layer_s.items() if phase == "update")


def describe(plan: Plan) -> str:
    """Which choices a plan uses, for how many steps, and how often it switches."""
    seq = [*plan.fwd, *reversed(plan.bwd), plan.update]
    counts = Counter(c.label for c in seq)
    switches = sum(1 for a, b in zip(seq, seq[1:] + seq[:1]) if a != b)
    return ", ".join(f"{k} x{v}" for k, v in counts.most_common()) + f"; {switches} switches"


@register("swan-layer")
class SwanLayer(Swan):
    """Swan with a per-layer plan on every rung of its ladder."""

    needs_layers = True

    def __init__(self, params=None, **overrides):
        super().__init__(params, **overrides)
        self._dp: dict[int, tuple[Plan, float]] = {}        # rung -> (DP plan, predicted latency)
        self._measured: dict[Plan, float] = {}               # per-layer plans, as their first quiet batch ran them
        self._quiet: dict[Plan, tuple[float, int]] = {}      # ... and (sum, number) of all their quiet batches' s
        self._switch_s: dict[tuple[Choice, Choice], list[float]] = {}

    def on_ladder_changed(self) -> None:
        self._dp.clear()

    def steady(self, state, plan: Plan, latency_s: float) -> bool:
        return False   # every batch's layer times feed its plans (`observe`)

    def allowed(self, rung: int) -> list[Choice]:
        """Explored choices a rung may use: all on the top rung, else those no costlier than its choice."""
        rank = {c: i for i, c in enumerate(self._space)}
        top = rung == len(self.ladder) - 1
        return [c for c in self._space if c in self.profiles and (top or rank[c] <= rank[self.ladder[rung]])]

    def switch_s(self, a: Choice, b: Choice) -> float:
        """What switching from ``a`` to ``b`` between two steps costs, as measured: the mean over
        switches from ``a`` to ``b`` seen in per-layer batches, else over all switches seen, else
        ``b``'s exploration entry cost."""
        if a == b:
            return 0.0
        got = self._switch_s.get((a, b))
        if got is None and self._switch_s:
            got = [x for v in self._switch_s.values() for x in v]
        return max(0.0, float(np.mean(got))) if got else self.profiles[b].enter_s

    def layer_plan(self, rung: int) -> tuple[Plan, float]:
        """The DP plan of ``rung`` and its predicted latency."""
        if rung not in self._dp:
            allowed = self.allowed(rung)
            steps = chain_steps(self._n_layers)
            costs = np.array([[step_latency_s(self.profiles[c].layer_s, s) for c in allowed] for s in steps])
            switch = np.array([[self.switch_s(a, b) for b in allowed] for a in allowed])
            total, x = best_chain(costs, switch)
            n = self._n_layers
            fwd = tuple(allowed[x[i]] for i in range(n))
            bwd = tuple(allowed[x[2 * n - 1 - i]] for i in range(n))
            self._dp[rung] = (Plan(fwd, bwd, allowed[x[-1]]), total)
        return self._dp[rung]

    def rung_plan(self, rung: int) -> Plan:
        """The fastest known plan of the rung - its uniform choice or a per-layer plan measured
        faster - or the DP's plan while that is predicted faster still and not yet measured."""
        if not self.ladder:
            return super().rung_plan(rung)
        allowed = set(self.allowed(rung))
        best, best_s = super().rung_plan(rung), self.profiles[self.ladder[rung]].latency_s
        for plan, lat in self._measured.items():
            if lat < best_s and plan.choices <= allowed:
                best, best_s = plan, lat
        dp, predicted = self.layer_plan(rung)
        if len(dp.choices) > 1 and dp not in self._measured and predicted < best_s:
            return dp
        return best

    def expected_s(self, plan: Plan) -> float | None:
        if plan in self._quiet:
            total_s, n = self._quiet[plan]
            return total_s / n
        for p, predicted in self._dp.values():
            if p == plan:
                return predicted
        return super().expected_s(plan)

    def adapt(self, stats: BatchStats) -> None:
        plan = stats.plan
        clean = len(plan.choices) > 1 and stats.quiet and self._since_change > self.params.grace_batches
        if clean and plan in self._quiet:
            # a later clean batch refines the plan's mean before the 1.1x test judges it
            total_s, n = self._quiet[plan]
            self._quiet[plan] = (total_s + stats.latency_s, n + 1)
        elif clean:
            # a per-layer plan's first clean batch is its profile and teaches the switching costs
            predicted = self.expected_s(plan)
            self._measured[plan] = stats.latency_s
            self._quiet[plan] = (stats.latency_s, 1)
            self._learn_switches(stats)
            self._dp.clear()
            t = stats.start_s + stats.latency_s
            self.decide(t, stats.batch, "profiled", plan.label,
                        f"{stats.latency_s:.3f} s (predicted {predicted:.3f} s); {describe(plan)}")
            nxt = self.rung_plan(self.rung)
            if nxt != plan:
                self._since_change = 0
                self.decide(t, stats.batch, "select", nxt.label,
                            describe(nxt) if len(nxt.choices) > 1 else "the uniform choice is faster")
            return
        super().adapt(stats)

    def _learn_switches(self, stats: BatchStats) -> None:
        """Each switch in a measured batch: the gap between the two layer phases (re-pinning)
        plus what the first phase on the new choice took over its profiled latency (waking
        threads, fetching data from other cores' caches, clocks ramping)."""
        rows = stats.layers
        for prev, row in zip(rows, rows[1:]):
            if row.choice == prev.choice:
                continue
            base = self.profiles[row.choice].layer_s.get((row.layer, row.phase))
            if base is not None:
                cost = (row.start_s - prev.end_s) + (row.latency_s - base)
                self._switch_s.setdefault((prev.choice, row.choice), []).append(cost)
