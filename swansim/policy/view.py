"""What a policy may see: the phone's state, its own measurements, its execution choices.

A real on-device engine (Swan runs inside the training app) reads the battery level and
temperature, the charger, the screen, whether an app is in the foreground and Android's
thermal status, and it times its own mini-batches; it knows the phone's cores (from sysfs) and
the model it trains. It does not know the simulator's cost model, frequencies or scheduler,
and neither do the policies here: they get these frozen records and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from swansim.dnn.choices import Choice, Plan
from swansim.kernel.thermal_gov import ThermalStatus

PHASES = ("fwd", "bwd_input", "bwd_weight", "update")


@dataclass(frozen=True)
class PhoneState:
    """The device state at one instant, as Android reports it to an app."""

    time_s: float                 # seconds since the run started
    battery_pct: float | None     # None: no battery (a development board)
    battery_temp_c: float | None
    charging: bool
    screen_on: bool
    foreground_app: bool          # an app of the owner's is in the foreground
    thermal_status: ThermalStatus

    @property
    def idle(self) -> bool:
        """Nobody uses the phone: screen off and no foreground app."""
        return not self.screen_on and not self.foreground_app


@dataclass(frozen=True)
class LayerStat:
    """One layer phase of a measured batch: which choice ran it and how long it took."""

    layer: int
    phase: str          # one of PHASES
    choice: Choice
    start_s: float
    end_s: float

    @property
    def latency_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class BatchStats:
    """One finished mini-batch as the policy measured it.

    ``energy_j`` is the batch's energy above the phone's idle power (screen off), what a
    battery-drain measurement with the background subtracted gives; while the owner uses the
    phone it includes their apps and screen. ``quiet``: the phone was idle and discharging
    from the batch's start to its end (no screen, app or charger change in between) - the
    only batches worth a profile.
    """

    batch: int
    request: int
    batch_in_request: int
    plan: Plan
    start_s: float
    latency_s: float
    energy_j: float
    layers: tuple[LayerStat, ...]
    state: PhoneState          # at the batch's start
    quiet: bool


class History(Sequence[BatchStats]):
    """A read-only window on the batches measured so far (no copy per plan)."""

    def __init__(self, rows: list[BatchStats]):
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        return self._rows[i]

    def __iter__(self) -> Iterator[BatchStats]:
        return iter(self._rows)


@dataclass(frozen=True)
class ModelInfo:
    """The model being trained: its layer chain (names and op kinds, in forward order)."""

    name: str
    layer_names: tuple[str, ...]
    layer_ops: tuple[str, ...]

    @property
    def n_layers(self) -> int:
        return len(self.layer_names)


@dataclass(frozen=True)
class PolicyView:
    """Everything `Policy.plan` may look at before a mini-batch.

    ``choices``: the phone's execution choices in the paper's cost order (cheapest first;
    mixed big+little sets, which the paper left out, come last and are flagged
    ``kind="mixed"``); ``default_choice``: PyTorch's default (threads = big cores, no affinity).
    """

    choices: tuple[Choice, ...]
    default_choice: Choice
    model: ModelInfo
    state: PhoneState
    batch: int                 # index of the batch about to run
    request: int               # index of the current training request
    batch_in_request: int      # 0 for a request's first batch
    history: Sequence[BatchStats]

    def uniform(self, choice: Choice) -> Plan:
        """``choice`` for every layer, forward and backward, and for the update."""
        return Plan.uniform(choice, self.model.n_layers)
