"""One simulated phone: a SimPy environment wired to the silicon, the kernel and the workloads.

Components are built here and wired explicitly (desmod style); probes are attached from
outside through `platform.probes`. Everything random draws from `device.rng`, seeded from the
flat `DeviceConfig`, so the same config gives the same run anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from swansim.hw.platform import Platform
from swansim.hw.profile import Catalogue, DeviceSpec
from swansim.kernel.sched import Scheduler


@dataclass
class DeviceConfig:
    """The one flat configuration of a device run."""

    device: str = "pixel3"
    seed: int = 0
    screen_on: bool = False
    ambient_c: float | None = None        # None: the profile's ambient
    extra: dict = field(default_factory=dict)


class Device:
    """A phone at run time: env, platform, scheduler, and the processes that drive them."""

    def __init__(self, config: DeviceConfig | None = None, spec: DeviceSpec | None = None,
                 catalogue: Catalogue | None = None):
        self.config = config = config or DeviceConfig()
        if spec is None:
            spec = (catalogue or Catalogue.load()).device(config.device)
        if config.ambient_c is not None:
            from dataclasses import replace
            spec = replace(spec, ambient_c=config.ambient_c)
        self.spec = spec
        self.env = simpy.Environment()
        self.rng = np.random.default_rng(config.seed)
        self.platform = Platform(spec, screen_on=config.screen_on)
        self.sched = Scheduler(self.env, self.platform)

    @property
    def now_s(self) -> float:
        return self.env.now

    def run(self, until_s: float) -> None:
        """Run to ``until_s`` and settle every integral there."""
        self.env.run(until=until_s)
        self.sched.sync()
