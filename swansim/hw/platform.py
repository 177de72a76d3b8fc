"""One device's silicon at run time: core frequencies, activity, power, energy, temperatures.

The kernel tells the platform what changed (`set_freq`, `set_activity`); the platform keeps
power piecewise constant between those changes, so `advance(now)` integrates energy and the
RC network. Energy is integrated exactly: the account is kept in pieces (a cluster's lines, each
other line), each integrated when its power changes or the account is read. The RC network is stepped
exactly too, with the mean heat of the intervals since its last step, once at least
`THERMAL_STEP_S` has gathered (or when a temperature is read): its fastest mode takes
seconds, so averaging the heat over a millisecond changes temperatures by microkelvins, and
the scheduler's sub-millisecond intervals do not each pay for a step. Leakage depends on
temperature; it is re-evaluated at every thermal step (with the power held, once a cluster's
temperature has moved `HELD_LEAK_STEP_C`). Power is evaluated lazily, once per interval
however many changes an instant brings.

Two modes serve the batch model (swansim.batchmodel): ``frozen_temps`` keeps every node at
ambient (a batch's cost measured independently of the phone's thermal history), and `hold`
replays a measured mean power per component, its leakage rescaled to the present
temperatures, so the energy account, the RC network and every probe run as usual.
"""
from __future__ import annotations

import math

from typing import Callable, Sequence

import numpy as np

from swansim.hw.power import IDLE_LEAK_FRACTION, components, dynamic_power_w, leakage_factor, leakage_w
from swansim.hw.profile import DeviceSpec
from swansim.hw.thermal import TempBounds, ThermalNetwork

# The RC network's step: heat gathers over at least this long before it is integrated.
THERMAL_STEP_S = 1e-3
# With the power held (`Platform.hold`, the fast-forward), leakage follows the temperature in
# steps of this much per cluster instead of at every thermal step: over a step it changes by
# 2^(0.25/25) - 1 = 0.7% of itself at the SoCs' 25 C doubling (device_profiles/socs). The
# fast-forward's long steps take theirs at the step's mean temperatures instead (`lead_leakage`,
# `Device.integrate_held`); both are tested against full simulation (tests/test_batchmodel).
HELD_LEAK_STEP_C = 0.25
# `lead_leakage` guesses a long step's mean temperatures this many times, each at the leakage of
# the guess before (the first at the present one): on tests/test_batchmodel.py's heating stretch
# at 1 C steps, one guess leaves 0.07% of the energy, two 0.01%, three 0.001%.
LEAD_ITERATIONS = 2

# Most busy-core patterns per cluster whose power lines are kept between leakage changes.
_MEMO_PATTERNS = 64

# A probe: called with (t0_s, t1_s, platform) after each interval is integrated, power as it was.
IntervalProbe = Callable[[float, float, "Platform"], None]


class Platform:
    """Frequencies, utilisation, power per component, energy account and temperatures."""

    def __init__(self, spec: DeviceSpec, screen_on: bool = False, frozen_temps: bool = False):
        self.spec = spec
        self.frozen_temps = frozen_temps
        soc = spec.soc
        self.clusters = soc.clusters
        self.n_cpus = soc.n_cpus
        self.cluster_of_cpu = [0] * self.n_cpus
        for k, c in enumerate(self.clusters):
            for cpu in c.cpus:
                self.cluster_of_cpu[cpu] = k
        self.freq_mhz = [c.fmax_mhz for c in self.clusters]
        # Per cluster, the highest clock its cpufreq policy allows now (policy->max: thermal and
        # other limits, set by kernel.cpufreq.CpufreqPolicy, whose cap_mhz it is): what the
        # scheduler scales a CPU's capacity by (the kernel's per-CPU max_freq_scale)
        self.max_freq_mhz = [c.fmax_mhz for c in self.clusters]
        # Per cluster, figures that change only with its clock (`_freq_figures`), found when the
        # power model next needs them (None: the clock changed since); a held power needs none.
        self._freq_figs: list[tuple[float, float, float] | None] = [None] * len(self.clusters)
        self.util = [0.0] * self.n_cpus
        self.dram_bytes_per_s = 0.0
        # Every core idle, but not yet for the SoC's `uncore_sleep_us`: the uncore stays powered
        # (set by the scheduler, which keeps the time; `set_uncore_hold`).
        self.uncore_hold = False
        self.screen_on = screen_on
        self._net = ThermalNetwork(spec.rc, spec.ambient_c)
        comps = components(spec)
        self.component_names = tuple(c.name for c in comps)
        self._comp_node = [self._net.index[c.node] for c in comps]   # the node each line heats
        self._n_nodes = len(self._net.nodes)
        self._cluster_node = [self._net.index[c.name] for c in self.clusters]
        self._heat_s = 0.0                        # time gathered since the last thermal step
        self._leak_factor: list[float] = []   # per cluster: leakage / leakage at the reference temperature
        self._leak_temp_c: list[float] = []   # per cluster: the temperature that factor is for
        self._held: tuple[list[float], float] | None = None
        self._cores_stale = True              # the clusters' pieces need `_recompute_cores`
        self._cluster_memo: list[dict] = [{} for _ in self.clusters]
        self._refresh_leakage()
        # The account in pieces, each a run of lines that change together: one per cluster (its
        # cores' lines and its shared logic), then one per remaining line (uncore, DRAM, board,
        # screen, charger); each heats one node. A piece's power is integrated into the energy
        # per line only when it changes (or someone reads the account), not at every interval: a
        # change usually touches one cluster and the DRAM line. The heat per node is integrated
        # from the nodes' summed power whenever a piece changes or the network steps. Python floats:
        # a phone has a few dozen lines and a handful of nodes, too few for numpy to pay its
        # per-call cost.
        self._n_k = len(self.clusters)
        starts = [0]
        for c in self.clusters:
            starts.append(starts[-1] + 2 * len(c.cpus) + 1)
        self._piece_start = starts + list(range(starts[-1] + 1, len(comps)))   # first line of each
        self._piece_node = self._cluster_node + [self._comp_node[j] for j in range(starts[-1], len(comps))]
        self._piece_lines: list = [[0.0] * (2 * len(c.cpus) + 1) for c in self.clusters]   # a cluster's lines (W)
        self._piece_w = [0.0] * len(self._piece_start)     # each piece's power (W) from its `since`
        self._piece_since = [0.0] * len(self._piece_start)  # integrated up to here
        self._total_power_w = 0.0
        self._stale = True
        self._energy = [0.0] * len(comps)         # per line, each piece's up to its `since`
        self._heat = [0.0] * self._n_nodes        # per node since the last thermal step, up to _heat_since_s
        self._heat_since_s = 0.0
        self._node_w = [0.0] * self._n_nodes      # heat into each node from _heat_since_s on
        self._node_w_stale = False                # a piece changed at _heat_since_s: sum them again
        self._total_energy_j = 0.0
        self.time_s = 0.0
        self.probes: list[IntervalProbe] = []
        # called when the power held for a fast-forward, the screen or the charger's loss changes
        # (swansim.device: thermal polls skipped on the held power's account run again)
        self.on_power_change: list[Callable[[], None]] = []
        # Heat of the charger's conversion loss (W), set by the battery; a component only with a battery.
        self.charging_loss_w = 0.0          # the charger line's power from now on
        self._charger = (0.0, 0.0, 0.0)     # (fixed W, share of the load, cap W): see set_charging_loss
        self._has_charger = "charging_loss" in self.component_names
        # constants of the power evaluation, looked up once
        self._cluster_consts = [(c.cpu_slice or c.cpus, self._cluster_node[k], c.cluster_active_mw * 1e-3, c.fmax_mhz)
                                for k, c in enumerate(self.clusters)]
        self._soc_active_w = soc.soc_active_mw * 1e-3
        self._dram_j_per_byte = soc.dram_energy_pj_per_byte * 1e-12
        self._base_w = spec.base_power_mw * 1e-3
        self._screen_w = spec.screen_power_mw * 1e-3
        self._leak_idx = [[j for j, name in enumerate(self.component_names)
                           if name.endswith(".leakage") and int(name[3:name.index(".")]) in c.cpus]
                          for c in self.clusters]
        self._screen_idx = self.component_names.index("screen")

    # -- changes ------------------------------------------------------------------------------

    def set_freq(self, cluster: int, freq_mhz: float) -> None:
        """Caller has advanced to now; the new frequency holds from now on."""
        self.freq_mhz[cluster] = freq_mhz
        self._freq_figs[cluster] = None
        self._cores_stale = True
        self._stale = self._stale or self._held is None   # a held power does not follow the clocks

    def _freq_figures(self, k: int) -> tuple[float, float, float]:
        """Cluster ``k`` at its clock: a busy core's dynamic power, V/V_max, a core's leakage at
        the reference temperature."""
        figs = self._freq_figs[k]
        if figs is None:
            c, f, soc = self.clusters[k], self.freq_mhz[k], self.spec.soc
            figs = self._freq_figs[k] = (dynamic_power_w(c, f), c.voltage_v(f) / (c.opp_voltage_mv[-1] / 1000.0),
                                         leakage_w(c, f, soc.leakage_ref_c, soc.leakage_ref_c, soc.leakage_doubling_c))
        return figs

    def set_activity(self, util: list[float], dram_bytes_per_s: float) -> None:
        """Per-cpu utilisation (0..1, the list is kept, not copied) and DRAM traffic from now on."""
        if util != self.util:
            self.util = util
            self._cores_stale = True
            self._stale = self._stale or self._held is None   # nor the activity
        if dram_bytes_per_s != self.dram_bytes_per_s:
            self.dram_bytes_per_s = dram_bytes_per_s
            self._stale = self._stale or self._held is None

    def set_uncore_hold(self, hold: bool) -> None:
        """Caller has advanced to now. ``hold``: every core is idle, not yet long enough for the
        uncore to power down, so it draws its active power as if a core were busy."""
        if hold != self.uncore_hold:
            self.uncore_hold = hold
            self._stale = self._stale or self._held is None

    @property
    def idle_floor_w(self) -> float:
        """The phone's power now less the screen and the charger's loss: read with nothing
        running, the floor a training batch's energy is counted above (the paper's
        background-subtracted energy). An uncore still held up after the last busy spell
        (`uncore_hold`) is not the floor: it powers down within `uncore_sleep_us`."""
        held_up = self._soc_active_w if self.uncore_hold and self._held is None else 0.0
        return self.total_power_w - self.charging_loss_w - (self._screen_w if self.screen_on else 0.0) - held_up

    def set_screen(self, on: bool) -> None:
        if on != self.screen_on:
            self.screen_on = on
            self._power_changed()

    def set_charging_loss(self, loss_w: float, per_load: float = 0.0, max_w: float = math.inf) -> None:
        """The charger's loss heats the battery node from now on (no-op without a battery):
        ``loss_w`` plus ``per_load`` times the phone's load in the same interval (a charger
        carrying the load of a full cell loses a share of what it delivers), at most ``max_w``."""
        charger = (loss_w, per_load, max_w) if self._has_charger else (0.0, 0.0, 0.0)
        if charger != self._charger:
            self._charger = charger
            self._power_changed()

    def _charger_loss_w(self, load_w: float) -> float:
        """The charger's loss (W) with the rest of the phone drawing ``load_w``."""
        fixed, per_load, max_w = self._charger
        return min(max_w, fixed + per_load * load_w) if (fixed or per_load) else 0.0

    def _charger_line(self, load_w: float) -> float:
        self.charging_loss_w = self._charger_loss_w(load_w)
        return self.charging_loss_w

    def hold(self, power_w: Sequence[float], at_temp_c: float) -> None:
        """From now on, power per component is ``power_w`` (measured with every node at
        ``at_temp_c``), each core's leakage rescaled to its cluster's present temperature (and
        again whenever it has moved `HELD_LEAK_STEP_C`); the screen and the charger's loss stay
        live. `release` returns to the power model."""
        self._held = (list(power_w), at_temp_c)
        self._set_leakage(self._read_cluster_temps())
        self._power_changed()

    def release(self) -> None:
        self._held = None
        self._set_leakage(self._read_cluster_temps())
        self._power_changed()

    def _power_changed(self) -> None:
        self._stale = True
        for fn in self.on_power_change:
            fn()

    # -- time ---------------------------------------------------------------------------------

    def advance(self, now_s: float) -> None:
        """Integrate energy and temperatures up to ``now_s`` with the power of the interval."""
        dt = now_s - self.time_s
        if dt <= 0.0:
            return
        t0 = self.time_s
        if self._stale:
            self._recompute()
        self._total_energy_j += self._total_power_w * dt
        self.time_s = now_s
        for probe in self.probes:   # they see the interval's power
            probe(t0, now_s, self)
        if not self.frozen_temps:
            self._heat_s += dt
            if self._heat_s >= THERMAL_STEP_S:
                self._step_thermal()

    def _fold(self, i: int) -> None:
        """Integrate piece ``i``'s power into the energy account from its `since` up to the
        present time."""
        dt = self.time_s - self._piece_since[i]
        if dt <= 0.0:
            return
        self._piece_since[i] = self.time_s
        e, j = self._energy, self._piece_start[i]
        if i < self._n_k:
            lines = self._piece_lines[i]
            j1 = j + len(lines)
            e[j:j1] = [a + w * dt for a, w in zip(e[j:j1], lines)]
        else:
            e[j] += self._piece_w[i] * dt

    def _fold_all(self) -> None:
        for i in range(len(self._piece_w)):
            self._fold(i)

    def _gather_heat(self) -> None:
        """Integrate each node's heat up to the present time."""
        dt = self.time_s - self._heat_since_s
        if dt <= 0.0 or self.frozen_temps:
            return
        self._heat = [h + w * dt for h, w in zip(self._heat, self._node_powers())]
        self._heat_since_s = self.time_s

    def _node_powers(self) -> list[float]:
        """Heat into each node (W) since the last piece changed: the pieces summed per node."""
        if self._node_w_stale:
            node = [0.0] * self._n_nodes
            for w, n in zip(self._piece_w, self._piece_node):
                node[n] += w
            self._node_w, self._node_w_stale = node, False
        return self._node_w

    def _install(self, i: int, power_w: float, lines=None) -> None:
        """Piece ``i`` draws ``power_w`` (per line: ``lines``, for a cluster) from the present time on."""
        self._fold(i)
        self._gather_heat()
        self._piece_since[i] = self.time_s
        self._piece_w[i] = power_w
        self._node_w_stale = True
        if lines is not None:
            self._piece_lines[i] = lines

    def _step_thermal(self) -> None:
        """Integrate the gathered heat into the RC network; leakage follows the new temperatures."""
        if self._heat_s <= 0.0:
            return
        self._gather_heat()
        self._net.step(self._heat_s, [h / self._heat_s for h in self._heat])
        self._heat = [0.0] * self._n_nodes
        self._heat_s = 0.0
        self._refresh_leakage()

    def _read_cluster_temps(self) -> list[float]:
        self._cluster_temp_c = [self._net.node_temp_c(n) for n in self._cluster_node]
        return self._cluster_temp_c

    def _refresh_leakage(self) -> None:
        temps = self._read_cluster_temps()
        if self._held is not None and max(abs(a - b) for a, b in zip(temps, self._leak_temp_c)) < HELD_LEAK_STEP_C:
            return   # held: leakage follows in steps (HELD_LEAK_STEP_C)
        self._set_leakage(temps)

    def _set_leakage(self, temps_c: list[float]) -> None:
        """Each cluster's leakage from now on is the one at ``temps_c``."""
        soc = self.spec.soc
        self._leak_temp_c = list(temps_c)
        self._leak_factor = [leakage_factor(t, soc.leakage_ref_c, soc.leakage_doubling_c) for t in temps_c]
        self._stale = self._cores_stale = True
        for memo in self._cluster_memo:
            memo.clear()

    @property
    def thermal(self) -> ThermalNetwork:
        """The RC network, with every heat gathered so far integrated."""
        self._step_thermal()
        return self._net

    # -- readings -----------------------------------------------------------------------------

    @property
    def power_w(self) -> np.ndarray:
        """Power per line of the energy account (W) from now until the next change."""
        if self._stale:
            self._recompute()
        return np.array([w for lines in self._piece_lines for w in lines] + self._piece_w[self._n_k:])

    @property
    def node_power_w(self) -> np.ndarray:
        """Heat into each thermal node (W), in the order of ``thermal.nodes``, from now on."""
        if self._stale:
            self._recompute()
        return np.array(self._node_powers())

    def held_node_power_w(self, cluster_temp_c: Sequence[float]) -> list[float]:
        """Heat into each node from now on if each cluster were at ``cluster_temp_c``, with the
        power held (`hold`): the cores' leakage follows the temperature, the charger's loss the
        load, the rest stays."""
        if self._held is None:
            raise RuntimeError("held_node_power_w: no power is held")
        node = [0.0] * self._n_nodes
        for w, n in zip(self._held_lines(cluster_temp_c), self._comp_node):
            node[n] += w
        return node

    def held_max_power_w(self, bounds: TempBounds) -> float:
        """The most the phone draws with the power held while its temperatures stay within
        ``bounds``: each cluster's leakage at its highest temperature there."""
        return sum(self.held_node_power_w([bounds.hi_c[n] for n in self._cluster_node]))

    def held_temp_bounds(self, dt_s: float, margin_c: float = 0.0, holds=None) -> TempBounds | None:
        """Bounds on every node's temperature over the next ``dt_s`` with the power held, widened
        by ``margin_c``: the network's bounds at the present power (`ThermalNetwork.range_c`),
        plus (minus) the rise that the extra (missing) leakage at the bounds' own cluster
        temperatures could add at most within ``dt_s`` (`ThermalNetwork.rise_c`), iterated until
        they settle.
        With ``holds``, a test of bounds: None as soon as the bounds fail it (they only widen)."""
        net, nodes = self.thermal, self._cluster_node

        def widened(lo, hi) -> TempBounds:
            return TempBounds(net.index, [x - margin_c for x in lo], [x + margin_c for x in hi])

        p_now = self.node_power_w.tolist()
        lo0, hi0 = net.range_c(dt_s, p_now)
        lo, hi = lo0, hi0
        for _ in range(8):
            if holds is not None and not holds(widened(lo, hi)):
                return None
            more = [max(0.0, a - b) for a, b in zip(self.held_node_power_w([hi[n] for n in nodes]), p_now)]
            less = [max(0.0, b - a) for a, b in zip(self.held_node_power_w([lo[n] for n in nodes]), p_now)]
            hi2 = [h + x for h, x in zip(hi0, net.rise_c(more, dt_s))]
            lo2 = [low - x for low, x in zip(lo0, net.rise_c(less, dt_s))]
            moved = max(max(a - b for a, b in zip(hi2, hi)), max(b - a for a, b in zip(lo2, lo)))
            lo, hi = lo2, hi2
            if moved < 1e-3:
                break
        bounds = widened(lo, hi)
        return bounds if holds is None or holds(bounds) else None

    def lead_leakage(self, dt_s: float) -> None:
        """With the power held, each cluster's leakage over the next ``dt_s`` (nothing queued
        before its end) is the one at the cluster's mean temperature over that span, predicted
        at the present power: a midpoint rule for a long step of the fast-forward
        (`Device.integrate_held`), where leakage held at the step's start would lag the heat."""
        if self._held is None:
            raise RuntimeError("lead_leakage: no power is held")
        self._step_thermal()
        means = self._read_cluster_temps()
        for _ in range(LEAD_ITERATIONS):   # the mean at the present leakage, then at that mean's
            means = self._net.mean_c(dt_s, self.held_node_power_w(means), self._cluster_node)
        self._set_leakage(means)

    @property
    def held(self) -> bool:
        """Is the power held (`hold`)?"""
        return self._held is not None

    @property
    def cluster_temp_c(self) -> list[float]:
        """Each cluster's temperature as of the last thermal step (what its leakage follows)."""
        return list(self._cluster_temp_c)

    @property
    def energy_j(self) -> np.ndarray:
        """Energy per line of the energy account since the start (J)."""
        self._fold_all()
        return np.array(self._energy)

    @property
    def total_power_w(self) -> float:
        if self._stale:
            self._recompute()
        return self._total_power_w

    @property
    def total_energy_j(self) -> float:
        """Energy since the start (J): the sum of the per-component account, kept as a scalar."""
        return self._total_energy_j

    def energy_by_component(self) -> dict[str, float]:
        self._fold_all()
        return dict(zip(self.component_names, self._energy))

    def temp_c(self, node: str) -> float:
        self._step_thermal()
        return self._net.temp(node)

    # -- power --------------------------------------------------------------------------------

    def _recompute(self) -> None:
        if self._held is not None:
            self._recompute_held()
            return
        if self._cores_stale:
            self._recompute_cores()
        cores_w = self._cores_w
        # The uncore (L3, interconnect, memory controller) is on or off, not shared out: a core's
        # short sleeps (a duty below 1) and an idle stretch shorter than `uncore_sleep_us` keep it up.
        uncore_on = self._any_busy > 0.0 or self.uncore_hold
        rest = [self._soc_active_w if uncore_on else 0.0, self.dram_bytes_per_s * self._dram_j_per_byte,
                self._base_w, self._screen_w if self.screen_on else 0.0]
        if self._has_charger:
            rest.append(self._charger_line(cores_w + sum(rest)))
        piece_w = self._piece_w
        for i, w in enumerate(rest, self._n_k):
            if w != piece_w[i]:
                self._install(i, w)
        self._total_power_w = cores_w + sum(rest)
        self._stale = False

    def _recompute_cores(self) -> None:
        """The clusters' pieces, their sum and the busiest cluster's share: they change only
        with utilisation, a clock or leakage, not with DRAM traffic or the screen."""
        util = self.util
        any_busy = cores_w = 0.0
        freq = self.freq_mhz
        for k, (cpus, node_k, active_w_at_fmax, fmax) in enumerate(self._cluster_consts):
            us = tuple(util[cpus]) if type(cpus) is slice else tuple(util[c] for c in cpus)
            # a cluster's lines for each pattern of busy cores seen since leakage last changed
            memo = self._cluster_memo[k]
            got = memo.get((us, freq[k]))
            if got is None:
                if len(memo) >= _MEMO_PATTERNS:
                    memo.clear()
                got = memo[us, freq[k]] = self._cluster_lines(k, us, active_w_at_fmax, fmax)
            lines, heat, cluster_busy = got
            if lines is not self._piece_lines[k]:
                self._install(k, heat, lines)
            cores_w += heat
            if cluster_busy > any_busy:
                any_busy = cluster_busy
        self._any_busy, self._cores_w = any_busy, cores_w
        self._cores_stale = False

    def _cluster_lines(self, k: int, util: tuple, active_w_at_fmax: float, fmax: float):
        """Cluster ``k``'s lines of the account (per core dynamic and leakage, then the shared
        logic), their sum and the cluster's busy share."""
        busy_dyn, v, leak_w = self._freq_figures(k)
        leak = leak_w * self._leak_factor[k]
        idle_leak = leak * IDLE_LEAK_FRACTION
        lines = []
        for u in util:
            lines.append(busy_dyn * u)
            lines.append(idle_leak + (leak - idle_leak) * u)
        cluster_busy = max(util)
        # Shared cluster logic runs at the cluster clock: scale with f and V^2 like a core.
        lines.append(active_w_at_fmax * cluster_busy * v * v * self.freq_mhz[k] / fmax)
        return lines, sum(lines), cluster_busy

    def _held_lines(self, cluster_temp_c: Sequence[float]) -> list[float]:
        """The held power per line with each cluster's leakage at ``cluster_temp_c``; the screen
        and the charger's loss (which follows the load) live."""
        held, at_c = self._held
        d = self.spec.soc.leakage_doubling_c
        p = list(held)
        for k, idx in enumerate(self._leak_idx):
            f = leakage_factor(cluster_temp_c[k], at_c, d)
            for i in idx:
                p[i] *= f
        p[self._screen_idx] = self._screen_w if self.screen_on else 0.0
        if self._has_charger:
            p[-1] = self._charger_loss_w(sum(p[:-1]))
        return p

    def _recompute_held(self) -> None:
        p = self._held_lines(self._leak_temp_c)
        if self._has_charger:
            self.charging_loss_w = p[-1]
        starts = self._piece_start + [len(p)]
        for i in range(len(starts) - 1):
            lines = p[starts[i]:starts[i + 1]]
            if i >= self._n_k:
                if lines[0] != self._piece_w[i]:
                    self._install(i, lines[0])
            elif lines != self._piece_lines[i]:
                self._install(i, sum(lines), lines)
        self._total_power_w = sum(p)
        self._stale = False
        self._cores_stale = True   # the model's pieces are not the held ones
