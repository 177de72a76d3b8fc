"""The battery: capacity, state of charge, charger, and an exact energy account.

The battery is a platform probe. After every integrated interval it takes the platform's
energy over that interval (every component, the charger's loss included) and books it:

    platform energy = drawn from the battery + supplied by the charger     (exactly, per interval)

Discharging, the battery supplies everything. Charging, a lithium-ion cell takes a constant
current to about 70% and then a constant voltage, its current falling until it is full at
about 3% of the rated current (Battery University BU-409, "Charging Lithium-ion"). Here the
charger carries the phone's load and gives the cell up to ``efficiency x charger_power_w x
taper``: the taper is `cv_taper` of the state of charge (1 up to `CV_START_PCT`, then falling
linearly, an assumed shape, in `CV_STEPS` steps to `CV_END_FRACTION` at 100%) and 0 once the
cell is full; the charger's input is at most ``charger_power_w``:

    input = min(charger_power_w, load / efficiency + charger_power_w x taper)

a fraction ``1 - efficiency`` of it lost as heat in the charger IC next to the cell (the
platform's "charging_loss" component, on the RC node "battery"). At taper 1 the input is the
whole ``charger_power_w`` (the cell gets what the load leaves); full, the charger carries the
load alone.

Assumptions, stated: capacity = mAh x 3.6 x nominal voltage (energy, not charge: the voltage
curve over the state of charge is not modelled); charging efficiency 0.9 (typical switching
charger ICs at 1-3 A); the cell's own I^2R heating is not modelled. An empty battery does not
stop the simulation: `depleted_s` records when it happened and the energy account goes on.
"""
from __future__ import annotations

import math

from swansim.hw.platform import Platform

# Assumption: switch-mode charger ICs (e.g. TI bq2589x datasheets) are ~90% efficient at 1-3 A.
CHARGING_EFFICIENCY = 0.9
# Assumption: a 5 V / 2 A USB charger, a middle ground between 7.5 W USB-C and 18 W USB-PD.
CHARGER_POWER_W = 10.0
# Battery University BU-409: constant current to ~70% state of charge, then constant voltage
# until the current has fallen to ~3% of the rated current; stepped so that the charger's
# power changes CV_STEPS times over the phase, not at every event.
CV_START_PCT, CV_END_FRACTION, CV_STEPS = 70.0, 0.03, 20


def cv_step(soc_pct: float) -> int:
    """Which of the constant-voltage phase's steps ``soc_pct`` is in (0: constant current, or
    the first step's share of it)."""
    if soc_pct <= CV_START_PCT:
        return 0
    return min(CV_STEPS, math.floor((soc_pct - CV_START_PCT) / (100.0 - CV_START_PCT) * CV_STEPS))


def cv_taper(soc_pct: float) -> float:
    """The cell's charge power at ``soc_pct``, as a share of the constant-current phase's."""
    return 1.0 - (1.0 - CV_END_FRACTION) * cv_step(soc_pct) / CV_STEPS


class Battery:
    """State of charge from the platform's integrated power, and the charger."""

    def __init__(self, platform: Platform, capacity_j: float, initial_soc_pct: float = 100.0,
                 charging: bool = False, charger_power_w: float = CHARGER_POWER_W,
                 efficiency: float = CHARGING_EFFICIENCY):
        if capacity_j <= 0:
            raise ValueError(f"battery capacity must be positive, got {capacity_j} J")
        if not 0.0 <= initial_soc_pct <= 100.0:
            raise ValueError(f"initial state of charge must be 0..100 %, got {initial_soc_pct}")
        if not 0.0 < efficiency <= 1.0:
            raise ValueError(f"charging efficiency must be in (0, 1], got {efficiency}")
        if charger_power_w < 0:
            raise ValueError(f"charger power must not be negative, got {charger_power_w} W")
        self.platform = platform
        self.capacity_j = capacity_j
        self.energy_j = capacity_j * initial_soc_pct / 100.0
        self.efficiency = efficiency
        self.charger_power_w = charger_power_w
        self.charging = False
        self.full = False
        self.drawn_j = 0.0        # net energy out of the cell (negative while it charges)
        self.charger_j = 0.0      # energy from the wall
        self.depleted_s: float | None = None
        self.full_s: float | None = None
        self._platform_j = platform.total_energy_j
        platform.probes.append(self)
        self.set_charging(charging)

    # -- readings -----------------------------------------------------------------------------

    @property
    def soc_pct(self) -> float:
        return max(0.0, 100.0 * self.energy_j / self.capacity_j)

    @property
    def temp_c(self) -> float:
        return self.platform.temp_c("battery")

    # -- the charger --------------------------------------------------------------------------

    def set_charging(self, on: bool, charger_power_w: float | None = None) -> None:
        """Plug or unplug the charger; takes effect from the platform's present time."""
        if charger_power_w is not None:
            self.charger_power_w = charger_power_w
        self.charging = on
        self.full = on and self.energy_j >= self.capacity_j
        self._set_loss()

    def _taper_now(self) -> float:
        """The cell's share of the charger's power now: 0 once it is full (`cv_taper` never is)."""
        return 0.0 if self.full else cv_taper(self.soc_pct)

    def _set_loss(self) -> None:
        """The charger's loss, ``1 - efficiency`` of its input (the module doc): all of
        ``charger_power_w``'s at constant current; the cell's share plus the load's beyond it,
        capped there; none unplugged."""
        self._taper = self._taper_now()
        max_w = (1.0 - self.efficiency) * self.charger_power_w
        if not self.charging:
            self.platform.set_charging_loss(0.0)
        elif self._taper == 1.0:
            self.platform.set_charging_loss(max_w)
        else:
            self.platform.set_charging_loss(max_w * self._taper, 1.0 / self.efficiency - 1.0, max_w)

    def loss_steady_for_s(self, max_load_w: float = 0.0) -> float:
        """How long the charger's loss stays as it is at least while the phone draws no more
        than ``max_load_w`` (or its present power, if more): the cell gains at most ``efficiency
        x charger_power_w x taper`` (the module doc's input, less the load), so the next step of
        the constant-voltage taper (or the cell full) is no nearer than that rate allows. inf
        unplugged, or full while the charger carries the load; 0 when the load may outgrow the
        charger (the cell then discharges and its taper may step back)."""
        if not self.charging:
            return math.inf
        if max(max_load_w, self.platform.total_power_w) >= self.charger_power_w:
            return 0.0
        if self.full:
            return math.inf
        rate_w = self.efficiency * self.charger_power_w * self._taper
        next_pct = min(100.0, CV_START_PCT + (100.0 - CV_START_PCT) * (cv_step(self.soc_pct) + 1) / CV_STEPS)
        return max(0.0, (next_pct - self.soc_pct) / 100.0 * self.capacity_j / rate_w)

    # -- the account --------------------------------------------------------------------------

    def __call__(self, t0_s: float, t1_s: float, platform: Platform) -> None:
        e = platform.total_energy_j
        used_j = e - self._platform_j
        self._platform_j = e
        dt = t1_s - t0_s
        if not self.charging:
            supplied = 0.0
        else:
            supplied = min(self.charger_power_w * dt,
                           used_j + self.efficiency * self.charger_power_w * self._taper * dt)
            if not self.full and self.energy_j + supplied - used_j >= self.capacity_j:
                supplied = used_j + self.capacity_j - self.energy_j   # tops up, then carries the load
                self.full, self.full_s = True, t1_s
            elif self.full and supplied < used_j:
                self.full = False   # the load outgrew the charger: the cell helps
        delta = supplied - used_j
        self.energy_j += delta
        self.drawn_j -= delta
        self.charger_j += supplied
        if self.energy_j <= 0.0 and self.depleted_s is None:
            self.depleted_s = t1_s
        if self.charging and self._taper_now() != self._taper:
            self._set_loss()   # full, empty again, or the constant-voltage phase's next step
