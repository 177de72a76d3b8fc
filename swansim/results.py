"""Probes attached from outside, and the tidy frames they produce."""
from __future__ import annotations

import json
import platform as _py_platform
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path

import pandas as pd

from swansim import __version__
from swansim.hw.platform import Platform


class TimelineProbe:
    """Samples a platform: mean power over each sample period, temperatures and frequencies.

    Mean power is the energy difference over the period, so the samples integrate to the
    exact energy whatever the period. ``every_s = 0`` records every integrated interval.
    """

    def __init__(self, platform: Platform, every_s: float = 1.0):
        self.platform, self.every_s = platform, every_s
        self.rows: list[tuple] = []
        self._last_t = platform.time_s
        self._last_e = platform.total_energy_j
        platform.probes.append(self)

    def __call__(self, t0_s: float, t1_s: float, p: Platform) -> None:
        if t1_s - self._last_t < self.every_s:
            return
        e = p.total_energy_j
        power = (e - self._last_e) / (t1_s - self._last_t)
        self.rows.append((t1_s, power, *p.thermal.temp_c.tolist(), *p.freq_mhz))
        self._last_t, self._last_e = t1_s, e

    def frame(self) -> pd.DataFrame:
        p = self.platform
        cols = (["time_s", "power_w"] + [f"temp_{n}_c" for n in p.thermal.nodes]
                + [f"freq_{c.name}_mhz" for c in p.clusters])
        return pd.DataFrame(self.rows, columns=cols)


def energy_frame(platform: Platform) -> pd.DataFrame:
    """The energy account: one row per power component."""
    return pd.DataFrame({"component": platform.component_names, "energy_j": platform.energy_j})


def write_manifest(out_dir: Path, config, seed: int | None = None, **extra) -> Path:
    """Every run writes what it was: config, seed, version, platform, wall time."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = asdict(config) if is_dataclass(config) else config
    doc = {"swansim_version": __version__, "config": cfg, "seed": seed,
           "python": _py_platform.python_version(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra}
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(doc, indent=2, default=str))
    return path
