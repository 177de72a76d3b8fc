"""Probes attached to a device from outside: sampled power and temperatures, every frequency
change, and (for trace files) which thread ran on which cpu."""
from __future__ import annotations

from swansim.device import Device


class Periodic:
    """A probe whose ``sample`` runs every ``every_s`` of simulated time, from ``every_s`` on."""

    def __init__(self, dev: Device, every_s: float):
        self.dev, self.every_s = dev, every_s
        dev.env.process(self._run())

    def _run(self):
        while True:
            yield self.dev.env.timeout(self.every_s)
            self.sample()

    def sample(self) -> None:
        raise NotImplementedError


class Progress(Periodic):
    """A progress bar (tqdm, to stderr) over simulated seconds, moved every ``every_s``: 100 steps
    a run, so it costs 100 events however long the run."""

    def __init__(self, dev: Device, duration_s: float, desc: str, enabled: bool = True):
        from tqdm import tqdm

        self.bar = tqdm(total=round(duration_s), desc=desc, unit="sim s", disable=not enabled, leave=False)
        self._done = 0
        super().__init__(dev, max(duration_s / 100.0, 1e-3))

    def sample(self) -> None:
        now = min(round(self.dev.env.now), self.bar.total)
        self.bar.update(now - self._done)
        self._done = now

    def close(self) -> None:
        self.bar.close()


class Sampler(Periodic):
    """Every ``every_s``: mean power over the interval (by component group), temperatures,
    battery, thermal status and frequency caps."""

    GROUPS = (("cpu_w", lambda n: n.startswith("cpu") or n.endswith(".cluster")), ("uncore_w", lambda n: n == "soc.uncore"),
              ("dram_w", lambda n: n == "dram"), ("base_w", lambda n: n == "base"),
              ("screen_w", lambda n: n == "screen"), ("charging_loss_w", lambda n: n == "charging_loss"))

    def __init__(self, dev: Device, every_s: float):
        names = dev.platform.component_names
        self._groups = [(col, [i for i, n in enumerate(names) if pick(n)]) for col, pick in self.GROUPS]
        self.power_rows: list[dict] = []
        self.thermal_rows: list[dict] = []
        self._last = (dev.env.now, dev.platform.energy_j.copy())
        super().__init__(dev, every_s)
        self.sample()

    def sample(self) -> None:
        d = self.dev
        d.sched.sync()
        t, e = d.env.now, d.platform.energy_j
        t0, e0 = self._last
        if t > t0:
            de = (e - e0) / (t - t0)
            row = {"time_s": t, "power_w": float(de.sum())}
            for col, idx in self._groups:
                if idx:
                    row[col] = float(de[idx].sum())
            if d.battery is not None:
                row["battery_pct"] = d.battery.soc_pct
                row["charging"] = d.battery.charging
            self.power_rows.append(row)
        th = {"time_s": t}
        for n in d.platform.thermal.nodes:
            th[f"temp_{n}_c"] = d.platform.temp_c(n)
        th["thermal_status"] = d.thermal_status.name
        for p in d.cpufreq:
            th[f"cap_{p.name}_mhz"] = p.cap_mhz
        self.thermal_rows.append(th)
        self._last = (t, e.copy())


class FrequencyLog:
    """A platform probe: every frequency change point per cluster, exactly."""

    def __init__(self, dev: Device):
        self.names = [c.name for c in dev.spec.soc.clusters]
        self._last = list(dev.platform.freq_mhz)
        self.rows = [(dev.env.now, n, f) for n, f in zip(self.names, self._last)]
        dev.platform.probes.append(self)

    def __call__(self, t0_s: float, t1_s: float, platform) -> None:
        # called after an interval is integrated; a change made at t1 shows in the next call
        for k, f in enumerate(platform.freq_mhz):
            if f != self._last[k]:
                self._last[k] = f
                self.rows.append((t0_s, self.names[k], f))

    def mean_mhz(self, start_s: float, end_s: float) -> dict[str, float]:
        """Each cluster's time-weighted mean frequency over ``[start_s, end_s]`` (MHz)."""
        out = {}
        for name in self.names:
            steps = [(t, f) for t, n, f in self.rows if n == name]   # in time order, the first at the start
            area = 0.0
            for (t, f), (t_next, _) in zip(steps, steps[1:] + [(end_s, None)]):
                area += f * max(0.0, min(t_next, end_s) - max(t, start_s))
            out[name] = area / (end_s - start_s)
        return out


class CpuOccupancy:
    """A scheduler probe: when each thread held which cpu - working, or spinning at a barrier."""

    def __init__(self, dev: Device):
        self.sched, self.env = dev.sched, dev.env
        self._open: dict[int, tuple[int, bool, float]] = {}
        self.rows: list[tuple] = []    # (cpu, thread name, group, spinning, start_s, end_s)
        dev.sched.on_replan.append(self)

    def __call__(self) -> None:
        now = self.env.now
        cur = {t.tid: (t.cpu, t.spinning) for t in self.sched.threads if t.runnable and t.cpu is not None}
        for tid, (cpu, spin, start) in list(self._open.items()):
            if cur.get(tid) != (cpu, spin):
                self._close(tid, cpu, spin, start, now)
                del self._open[tid]
        for tid, (cpu, spin) in cur.items():
            if tid not in self._open:
                self._open[tid] = (cpu, spin, now)

    def _close(self, tid: int, cpu: int, spin: bool, start: float, now: float) -> None:
        if now > start:
            t = self.sched.threads[tid]
            self.rows.append((cpu, t.name, t.group, spin, start, now))

    def close(self) -> None:
        for tid, (cpu, spin, start) in self._open.items():
            self._close(tid, cpu, spin, start, self.env.now)
        self._open.clear()
