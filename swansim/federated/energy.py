"""The energy loan (Swan paper): training energy is borrowed against the owner's traced battery.

The trace records the battery of a phone that never trained. Training draws extra energy, so
the phone's real level is below the traced one by the **loan** ``L`` (joules):

    level(t) = traced_pct(t) - 100 * L(t) / capacity_j

**Borrowing.** Every joule of local training adds to ``L``, at the training's mean power
(``energy_j / duration_s`` of the local-cost outcome) while it runs. That energy is what the
training adds to the phone's own draw (`swansim.session.driver.FastForwardDriver.run`): the idle
floor, the screen and the charger's loss are the owner's, already in the traced level.

**Repayment.** Each client has a fixed daily charger energy and a fixed daily usage energy,
both from its phone and its base user's trace:

* daily charger energy ``G``, by one of two readings of the paper's "amount of energy
  delivered by the charger" (``charger``):

  - ``"plugged"``: ``G = P_in x plugged_s_per_day``, what the charger *can* put in per day,
    with ``P_in`` the charger's power into the phone (``CHARGER_POWER_W x CHARGING_EFFICIENCY``
    of :mod:`swansim.hw.battery`, the one place for charger figures) and the base user's mean
    plugged-in time per day, a full battery's hours on the charger included (an upper bound:
    the cell's constant-voltage phase takes less);
  - ``"traced"``: ``G = capacity_j x charged_pct_per_day / 100``, what the trace's charger
    *did* put in: the level's mean daily rise. The paper's traces know charging only as a
    rising level (its appendix A sets battery_state from the sign of the level's change), so a
    phone on the charger at 100 % is not charging there, and this is the charger energy
    those traces can show. Over a trace that replays, rises and drops nearly cancel: the loan
    is repaid only by the trace's drift, and it accumulates over the run.

  The fleet's default is ``"traced"``: the paper fixes "the amount of energy delivered by the
  charger and energy usage of device usage on a daily basis" per device (section 5.1), and its
  traces can show no other charger energy. Chosen with the paper's account of its fleet in
  view (section 5.3: the baseline "steadily loses devices with every passing round due to
  exhausting the energy budget"), which ``"plugged"`` cannot produce: the synthetic owners are
  plugged in 5-16 h a day, a budget of 1.5-12.5 batteries, so every loan is repaid overnight.
  A trace without battery levels (FedScale's availability, imported at a constant 50 %) shows
  no charger energy at all: under ``"traced"`` its loans are never repaid, so such a trace
  wants ``"plugged"``;
* daily usage energy ``U = capacity_j x usage_pct_per_day / 100``: the traced owner's mean
  daily discharge.

The trace's own charging already refills ``U``; what the charger can deliver beyond it,
``budget = max(0, G - U)`` per local day (reset at the client's local midnight), repays the
loan. Repayment runs only while the traced phone is plugged in, at ``P_in``, until the loan is
zero or that day's budget is spent. Training while plugged in borrows and repays at once
(net ``P - P_in``, never below zero: a charger cannot repay more than is owed).

**Offline.** A client is online while ``level > critical_pct``. A training client stops at
the exact time its level would reach ``critical_pct`` (loan growing, or the traced level
stepping down under an outstanding loan): it drops out, and stays offline until repayment (or
the owner's charging) lifts its level again. ``critical_pct`` defaults to 5 %
(assumption: the paper names no figure; AOSP's ``config_criticalBatteryWarningLevel`` is 5 %,
the level at which Android warns that the phone will shut down soon).

Everything is integrated exactly: between trace rows, midnights, the loan reaching zero and
the budget running out, all rates are constant. Conservation: for every client
``borrowed_j - repaid_j == loan_j``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from swansim.apps.traces import DAY_S
from swansim.federated.availability import Segment
from swansim.federated.population import Population
from swansim.hw.battery import CHARGER_POWER_W, CHARGING_EFFICIENCY

CRITICAL_PCT = 5.0
CHARGER_BUDGETS = ("traced", "plugged")   # readings of the daily charger energy G (module doc)
CHARGER_BUDGET = "traced"                 # the paper's (module doc)
CHARGER_INTO_PHONE_W = CHARGER_POWER_W * CHARGING_EFFICIENCY


@dataclass
class _Account:
    """One client's loan while it is being integrated (scalars, written back afterwards)."""

    loan_j: float
    borrowed_j: float
    repaid_j: float
    day: int
    repaid_day_j: float


class EnergyLoan:
    """Loans of every client of a population (arrays indexed by client)."""

    STATE = ("loan_j", "borrowed_j", "repaid_j", "settled_s", "day", "repaid_day_j")

    def __init__(self, population: Population, critical_pct: float = CRITICAL_PCT,
                 repay_w: float = CHARGER_INTO_PHONE_W, charger: str = CHARGER_BUDGET):
        if charger not in CHARGER_BUDGETS:
            raise ValueError(f"charger budget {charger!r}: expected one of {', '.join(CHARGER_BUDGETS)}")
        self.population = population
        self.critical_pct = float(critical_pct)
        self.repay_w = float(repay_w)
        n = len(population)
        tr = population.traces
        self.capacity_j = population.capacity_j
        user = population.user_idx
        if charger == "plugged":
            charger_j = repay_w * tr.plugged_s_per_day[user]
        else:
            charger_j = self.capacity_j * tr.charged_pct_per_day[user] / 100.0
        usage_j = self.capacity_j * tr.usage_pct_per_day[user] / 100.0
        self.budget_j = np.maximum(0.0, charger_j - usage_j)   # per local day
        self.loan_j = np.zeros(n)
        self.borrowed_j = np.zeros(n)
        self.repaid_j = np.zeros(n)
        self.settled_s = np.zeros(n)       # server time up to which repayment is applied
        self.day = np.full(n, -1, dtype=np.int64)
        self.repaid_day_j = np.zeros(n)

    # -- state for checkpoints -------------------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k).copy() for k in self.STATE}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        for k in self.STATE:
            setattr(self, k, state[k].copy())

    # -- queries -----------------------------------------------------------------------------------

    def level_pct(self, traced_pct: np.ndarray) -> np.ndarray:
        """Real battery level of every client given its traced level."""
        return traced_pct - 100.0 * self.loan_j / self.capacity_j

    def online(self, known: np.ndarray, traced_pct: np.ndarray) -> np.ndarray:
        return known & (self.level_pct(np.where(known, traced_pct, 0.0)) > self.critical_pct)

    # -- integration -------------------------------------------------------------------------------

    def settle(self, t_s: float) -> None:
        """Apply repayment of every indebted client up to server time ``t_s``."""
        for i in np.flatnonzero((self.loan_j > 0) & (self.settled_s < t_s)).tolist():
            shift = float(self.population.shift_s[i])
            segments = self.population.traces.charging_segments(
                int(self.population.user_idx[i]), self.settled_s[i] + shift, t_s + shift)
            acc = self._account(i)
            self._walk(acc, i, segments, 0.0)
            self._store(i, acc, t_s)
        self.settled_s = np.maximum(self.settled_s, t_s)

    def train(self, i: int, t0_s: float, t1_s: float, power_w: float, commit: bool = True,
              start_s: float | None = None) -> float:
        """Borrow ``power_w`` over server time ``[start_s, t1_s)``; returns when the client stopped.

        ``start_s`` (default ``t0_s``): training starts then; over ``[t0_s, start_s)`` the
        client only repays (it is downloading the model). The stop is ``t1_s``, or earlier the
        time its level reaches the critical level. With ``commit=False`` nothing changes (a
        look-ahead). Call :meth:`settle` up to ``t0_s`` first.
        """
        if self.settled_s[i] < t0_s and self.loan_j[i] > 0:
            raise ValueError(f"client {i}: loan not settled up to {t0_s} s")
        shift = float(self.population.shift_s[i])
        user = int(self.population.user_idx[i])
        acc = self._account(i)
        start_s = t0_s if start_s is None else min(max(start_s, t0_s), t1_s)
        stop = None
        if start_s > t0_s:
            stop = self._walk(acc, i, self.population.traces.segments(user, t0_s + shift, start_s + shift), 0.0)
        if stop is None:
            stop = self._walk(acc, i, self.population.traces.segments(user, start_s + shift, t1_s + shift), power_w)
        stop_s = t1_s if stop is None else stop - shift
        if commit:
            self._store(i, acc, max(stop_s, float(self.settled_s[i])))
        return stop_s

    def _account(self, i: int) -> _Account:
        return _Account(float(self.loan_j[i]), float(self.borrowed_j[i]), float(self.repaid_j[i]),
                        int(self.day[i]), float(self.repaid_day_j[i]))

    def _store(self, i: int, acc: _Account, settled_s: float) -> None:
        self.loan_j[i], self.borrowed_j[i], self.repaid_j[i] = acc.loan_j, acc.borrowed_j, acc.repaid_j
        self.day[i], self.repaid_day_j[i] = acc.day, acc.repaid_day_j
        self.settled_s[i] = settled_s

    def _walk(self, acc: _Account, i: int, segments: Iterable[Segment], power_w: float) -> float | None:
        """Integrate over ``segments`` (local time); the local stop time if the level hits critical."""
        capacity, budget_j = float(self.capacity_j[i]), float(self.budget_j[i])
        for seg in segments:
            day = math.floor(seg.start_s / DAY_S)
            if day != acc.day:
                acc.day, acc.repaid_day_j = day, 0.0
            # The loan at which this segment's level reaches critical (only training can get there).
            limit_j = (seg.battery_pct - self.critical_pct) * capacity / 100.0 if power_w > 0 else math.inf
            t = seg.start_s
            while True:
                if acc.loan_j >= limit_j:
                    return t
                if t >= seg.end_s:
                    break
                left_j = budget_j - acc.repaid_day_j
                repay_w = self.repay_w if (seg.charging and left_j > 0) else 0.0
                if acc.loan_j <= 0.0:
                    repay_w = min(repay_w, power_w)  # nothing owed: repay only what is drawn now
                net_w = power_w - repay_w
                dt, event = seg.end_s - t, "end"
                # (compared as products: a rate can be tiny enough for a quotient to overflow)
                if repay_w > 0 and left_j < dt * repay_w:
                    dt, event = left_j / repay_w, "budget"
                if net_w < 0 and acc.loan_j < -dt * net_w:
                    dt, event = acc.loan_j / -net_w, "paid"
                elif net_w > 0 and limit_j - acc.loan_j < dt * net_w:
                    dt, event = (limit_j - acc.loan_j) / net_w, "critical"
                borrowed, repaid = power_w * dt, repay_w * dt
                if event == "paid":  # exact: the whole loan and what was drawn meanwhile
                    repaid = acc.loan_j + borrowed
                acc.borrowed_j += borrowed
                acc.repaid_j += repaid
                acc.repaid_day_j = budget_j if event == "budget" else acc.repaid_day_j + repaid
                acc.loan_j = {"paid": 0.0, "critical": limit_j}.get(event, acc.loan_j + borrowed - repaid)
                t = seg.end_s if event == "end" else t + dt
        return None
