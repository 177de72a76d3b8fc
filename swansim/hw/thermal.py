"""Lumped RC thermal network, integrated exactly for piecewise-constant power.

    C dT/dt = -G (T - T_amb) + P

G is the conductance Laplacian of the node graph plus each node's conductance to ambient.
With power constant over an interval the solution is closed form:
    T(t) = T_ss + exp(-M t) (T0 - T_ss),  M = C^-1 G,  T_ss = T_amb + G^-1 P.
M is similar to the symmetric C^-1/2 G C^-1/2, so one `eigh` at construction gives
exp(-M t) for any t as V diag(exp(-lambda t)) V^-1 with real, positive lambda. The state is
kept in modal coordinates z = V^-1 (T - T_amb), where a step is elementwise:
    z(t) = z_ss + exp(-lambda t) (z0 - z_ss),  z_ss = V^-1 G^-1 P,
and temperatures are read back (T = T_amb + V z) only when someone asks. A network has a
handful of nodes, so the per-step arithmetic runs on Python floats (numpy's per-call overhead
would dominate vectors of six).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import mul
from typing import Sequence

import numpy as np

from swansim.hw.profile import AMBIENT, RCNetwork


@dataclass(frozen=True)
class TempBounds:
    """Per node, the lowest and the highest temperature over a stretch of time (C)."""

    index: dict[str, int]
    lo_c: list[float]
    hi_c: list[float]

    def of(self, node: str) -> tuple[float, float]:
        i = self.index[node]
        return self.lo_c[i], self.hi_c[i]


class ThermalNetwork:
    """Node temperatures of one device; `step(dt, power_w)` advances them exactly."""

    # the modes of each network seen, by its content: a phone per fleet request shares them
    _modes: dict[tuple, dict] = {}

    def __init__(self, rc: RCNetwork, ambient_c: float):
        key = (tuple(rc.capacity_j_per_k.items()), rc.edges_k_per_w)
        modes = self._modes.get(key)
        if modes is None:
            modes = self._modes[key] = self._decompose(rc)
        self.__dict__.update(modes)
        self.ambient_c = ambient_c
        self._z = [0.0] * len(self.nodes)   # modal coordinates of T - T_amb
        self._ss_for: list[float] | None = None   # the power whose modal steady state is _ss
        self._ss: list[float] = []
        self._decay_for = math.nan                 # the step whose per-mode decay is _decay
        self._decay: list[float] = []
        self._temp: np.ndarray | None = None

    @staticmethod
    def _decompose(rc: RCNetwork) -> dict:
        """The network's constants (read-only, shared): conductances, modes, gains."""
        nodes = tuple(rc.capacity_j_per_k)
        index = {n: i for i, n in enumerate(nodes)}
        n = len(nodes)
        g = np.zeros((n, n))
        for a, b, r in rc.edges_k_per_w:
            k = 1.0 / r
            ia, ib = index.get(a), index.get(b)
            if ia is not None:
                g[ia, ia] += k
            if ib is not None:
                g[ib, ib] += k
            if ia is not None and ib is not None:
                g[ia, ib] -= k
                g[ib, ia] -= k
        assert AMBIENT not in index
        capacity = np.array([rc.capacity_j_per_k[x] for x in nodes])
        s = 1.0 / np.sqrt(capacity)
        lam, u = np.linalg.eigh(g * s[:, None] * s[None, :])
        v = s[:, None] * u       # M = V diag(lam) V^-1
        v_inv = u.T / s[None, :]
        g_inv = np.linalg.inv(g)
        arrays = {"capacity_j_per_k": capacity, "conductance_w_per_k": g, "rates_per_s": lam,   # 1/tau of each mode
                  "_v": v, "_v_inv": v_inv, "_g_inv": g_inv}
        for a in arrays.values():
            a.flags.writeable = False
        return {"nodes": nodes, "index": index, **arrays, "_rates": lam.tolist(), "_v_rows": v.tolist(),
                "_gain_rows": (v_inv @ g_inv).tolist()}   # node power -> modal steady state

    @property
    def temp_c(self) -> np.ndarray:
        """Node temperatures (C), in the order of ``nodes`` (read-only)."""
        if self._temp is None:
            self._temp = self.ambient_c + self._v @ np.array(self._z)
        return self._temp

    @property
    def state(self) -> list[float]:
        """The network's state (modal coordinates): what a phone carries from one run to the next."""
        return list(self._z)

    @state.setter
    def state(self, z) -> None:
        if len(z) != len(self._z):
            raise ValueError(f"a state of {len(self._z)} modes, got {len(z)}")
        self._z = [float(x) for x in z]
        self._temp = None

    def node_temp_c(self, i: int) -> float:
        """Temperature of node ``i`` (C)."""
        return self.ambient_c + sum(map(mul, self._v_rows[i], self._z))

    def step(self, dt_s: float, power_w: Sequence[float]) -> None:
        """Advance by ``dt_s`` with ``power_w`` (W per node) held constant."""
        if dt_s <= 0:
            return
        if dt_s != self._decay_for:
            self._decay_for, self._decay = dt_s, [math.exp(-r * dt_s) for r in self._rates]
        self._z = [s + d * (z - s) for s, d, z in zip(self._steady(power_w), self._decay, self._z)]
        self._temp = None

    def _steady(self, power_w: Sequence[float]) -> list[float]:
        """The modal steady state of ``power_w`` (the last one's kept: a held power is stepped
        again and again, at the polls and samples of a fast-forward)."""
        p = list(power_w)
        if p != self._ss_for:
            self._ss_for, self._ss = p, [sum(map(mul, row, p)) for row in self._gain_rows]
        return self._ss

    def mean_c(self, dt_s: float, power_w: Sequence[float], nodes: Sequence[int]) -> list[float]:
        """The mean temperature of each node in ``nodes`` (indices) over the next ``dt_s`` with
        ``power_w`` held: each mode's exponential averaged in closed form."""
        z_ss = self._steady(power_w)
        mean = [s + (z - s) * (-math.expm1(-r * dt_s) / (r * dt_s)) for s, r, z in zip(z_ss, self._rates, self._z)]
        return [self.ambient_c + sum(map(mul, self._v_rows[i], mean)) for i in nodes]

    def range_c(self, dt_s: float, power_w: Sequence[float]) -> tuple[list[float], list[float]]:
        """Lower and upper bounds on every node's temperature over the next ``dt_s`` with
        ``power_w`` held: a node's temperature is its steady state plus one exponential per
        mode, and each exponential lies between its values now and at ``dt_s``."""
        z_ss = self._steady(power_w)
        now = [z - s for z, s in zip(self._z, z_ss)]
        then = [c * math.exp(-r * dt_s) for c, r in zip(now, self._rates)]
        lo, hi = [], []
        for row in self._v_rows:
            base = self.ambient_c + sum(map(mul, row, z_ss))
            a, b = base, base
            for v, c0, c1 in zip(row, now, then):
                x, y = v * c0, v * c1
                if x < y:
                    a, b = a + x, b + y
                else:
                    a, b = a + y, b + x
            lo.append(a)
            hi.append(b)
        return lo, hi

    def rise_c(self, power_w: Sequence[float], dt_s: float = math.inf) -> list[float]:
        """The most that adding ``power_w`` (W per node, none negative) from some moment raises
        each node within the next ``dt_s``: its step response at ``dt_s``, V diag(1 - e^-lambda dt)
        V^-1 G^-1 P. The response only grows (exp(-M t) has no negative entry: heat flows only
        down the gradients of a passive network), so its value at ``dt_s`` bounds the whole span;
        with ``dt_s`` infinite it is the steady-state rise G^-1 P."""
        p = list(power_w)
        grown = [-math.expm1(-r * dt_s) * sum(map(mul, row, p)) for r, row in zip(self._rates, self._gain_rows)]
        return [sum(map(mul, row, grown)) for row in self._v_rows]

    def stored_heat_j(self) -> float:
        """Heat stored above ambient, for energy-balance checks."""
        return float(self.capacity_j_per_k @ (self.temp_c - self.ambient_c))

    def heat_to_ambient_w(self) -> float:
        """Instantaneous heat flow to ambient (sum over nodes of G_i,amb (T_i - T_amb))."""
        return float(self.conductance_w_per_k.sum(axis=1) @ (self.temp_c - self.ambient_c))

    def temp(self, node: str) -> float:
        return self.node_temp_c(self.index[node])
