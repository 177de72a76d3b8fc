"""Synthetic phone owners: a seeded generator of foreground sessions and device states.

The generator is built on published smartphone-usage statistics; every figure it uses is a
field of :class:`SynthParams` together with its unit and source (a publication, or "choice
within the published range", or an explicit assumption where nothing is published). The
rendered table is in ``traces/README.md``.

Model, per user:

* habits: a sessions-per-day rate (truncated log-normal across users, mean and range from
  LSApp and Soikkeli et al.), wake and sleep times, charging and Wi-Fi habits;
* each day: a Poisson number of sessions with lengths from Falaki et al.'s shape (exponential
  body, shifted-Pareto tail) fitted to LSApp's median, mean and s.d.; start times follow an
  hour-of-day activity curve inside the waking window; sessions never overlap and are at
  least LSApp's 5-minute session gap apart;
* an app category per session from a base mix modulated by time of day (Bohmer et al.) and by
  length (Falaki et al.: games and maps are the longest);
* device states from an event simulation: screen on during sessions, charging overnight on
  most nights plus daytime top-ups and low-battery reactions, battery level drained by the
  screen and refilled by charging, Wi-Fi at home and mostly cellular away.

Same ``seed`` -> identical trace. User ``i`` draws from its own random stream, so its trace
depends only on the seed, the number of days, ``i`` and the parameters: adding users leaves
the existing ones unchanged.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from tqdm import tqdm

from swansim import __version__, checks
from swansim.apps.traces import CATEGORIES, DAY_S, MAX_SPAN_DAYS, DeviceState, Session, Trace, write_trace
from swansim.errors import InputError

HOUR_S = 3600.0
# Event times are rounded to ms, so the level at the warning can miss the threshold by a hair.
_LOW_SLACK_PCT = 0.01
_GENERATOR = "swansim.apps.synth"


def _p(default: Any, unit: str, source: str):
    """A SynthParams field with its unit and source, kept next to the value."""
    return field(default=default, metadata={"unit": unit, "source": source})


@dataclass(frozen=True)
class SynthParams:
    """Every figure the generator uses, with its unit and source."""

    # -- how much the owner uses the phone
    sessions_per_day_mean: float = _p(17.0, "sessions/day", "LSApp dataset README: ~17 sessions per user per day")
    sessions_per_day_min: float = _p(3.0, "sessions/day", "Soikkeli et al. 2011: 3-46 sessions per day across users")
    sessions_per_day_max: float = _p(46.0, "sessions/day", "Soikkeli et al. 2011: 3-46 sessions per day across users")
    sessions_per_day_sigma: float = _p(
        0.55, "ln(sessions/day)",
        "choice within published range: log-normal spread across users so a 140-user population spans "
        "about Soikkeli's 3-46")
    session_gap_min_s: float = _p(300.0, "s", "LSApp dataset README: sessions are split at 5-minute gaps")
    session_min_s: float = _p(1.0, "s", "choice: shortest session")
    session_body_mean_s: float = _p(
        103.5, "s", "fitted: exponential body (Falaki et al., MobiSys'10) to LSApp median 1:46, mean 5:26, sd 9:29")
    session_tail_start_s: float = _p(
        600.0, "s", "choice: where the Pareto tail takes over (Falaki et al., MobiSys'10: exponential body, "
        "shifted-Pareto tail)")
    session_tail_prob: float = _p(0.222, "-", "fitted to LSApp median 1:46, mean 5:26, sd 9:29")
    session_tail_shape: float = _p(2.5, "-", "choice: Pareto shape > 2 (finite variance, LSApp reports an sd)")
    session_tail_scale_s: float = _p(803.0, "s", "fitted to LSApp median 1:46, mean 5:26, sd 9:29")
    session_max_s: float = _p(10_800.0, "s", "choice: longest session (3 h), caps the Pareto tail")

    # -- when: sleep and the hour-of-day activity curve
    wake_mean_h: float = _p(7.0, "h", "choice: diurnal use, little at night (Bohmer et al., MobileHCI'11)")
    wake_sd_h: float = _p(0.75, "h", "choice: spread of wake times across users")
    wake_range_h: tuple[float, float] = _p((5.0, 9.5), "h", "choice: bounds of a user's mean wake time")
    sleep_mean_h: float = _p(23.5, "h", "choice: diurnal use, little at night (Bohmer et al., MobileHCI'11)")
    sleep_sd_h: float = _p(0.75, "h", "choice: spread of bed times across users")
    sleep_range_h: tuple[float, float] = _p(
        (21.5, 25.5), "h", "choice: bounds of a user's mean bed time (>24 = after midnight)")
    day_jitter_sd_h: float = _p(0.5, "h", "choice: day-to-day variation of wake and bed times")
    day_jitter_max_h: float = _p(1.0, "h", "choice: bound of that variation")
    hourly_activity: tuple[float, ...] = _p(
        (0.6, 0.4, 0.3, 0.2, 0.2, 0.3, 0.6, 0.9, 1.0, 0.9, 0.9, 1.0,
         1.1, 1.0, 0.9, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.4, 1.0),
        "relative, hours 0-23",
        "choice: session-start intensity while awake, rising through the day to an evening peak "
        "(shape after Bohmer et al., MobileHCI'11)")
    wake_check_prob: float = _p(
        0.8, "-", "choice: first session right after waking (Bohmer et al., MobileHCI'11: communication first "
        "after waking)")
    wake_check_window_s: float = _p(900.0, "s", "choice: 'right after waking' means within this time")

    # -- what: app categories
    category_mix: tuple[tuple[str, float], ...] = _p(
        (("messaging", 0.26), ("browsing", 0.48), ("video", 0.08), ("audio", 0.05),
         ("maps", 0.03), ("game3d", 0.06), ("camera", 0.04)),
        "relative weight per session",
        "browsing: tuned so web + social feeds take ~38% of session time (Flurry, as quoted by Arm); "
        "others: choice")
    category_hour_boosts: tuple[tuple[str, float, float, float], ...] = _p(
        (("browsing", 6, 10, 2.0), ("game3d", 20, 2, 2.0), ("video", 20, 2, 1.5),
         ("maps", 7, 9, 2.0), ("maps", 17, 19, 2.0), ("audio", 7, 9, 1.5), ("audio", 17, 19, 1.5)),
        "(category, from h, to h, factor)",
        "Bohmer et al., MobileHCI'11: news peaks in the morning, games at night; commute maps/audio and "
        "all factors: choice")
    first_session_messaging_prob: float = _p(
        0.6, "-", "Bohmer et al., MobileHCI'11: communication first after waking; value: choice")
    long_session_boosts: tuple[tuple[str, float], ...] = _p(
        (("game3d", 3.0), ("video", 3.0), ("maps", 2.0)), "(category, factor) for sessions in the tail",
        "Falaki et al., MobiSys'10: games and maps have the longest interactions; factors: choice")
    load_scale_sigma: float = _p(
        0.0, "ln(load_scale)", "choice: per-session CPU-demand spread; none published, so off (all 1.0)")

    # -- charging and battery
    overnight_charge_prob: tuple[float, float] = _p(
        (0.75, 1.0), "per night, range across users",
        "Shye et al., MICRO'09: near-daily charging; Bonawitz et al., MLSys'19: more devices eligible at night; "
        "range: choice")
    plug_before_sleep_max_s: float = _p(3600.0, "s", "choice: overnight plug-in up to this long before bed")
    unplug_after_wake_max_s: float = _p(1800.0, "s", "choice: unplug up to this long after waking")
    bedtime_charge_below_pct: float = _p(40.0, "%", "choice: below this at bedtime the owner charges overnight anyway")
    desk_charger_share: float = _p(
        0.4, "-", "choice: share of users who charge at work on days away (daytime availability; "
        "Bonawitz et al., MLSys'19 see eligible devices day and night, more at night)")
    desk_charge_delay_s: float = _p(1800.0, "s", "choice: earliest desk plug-in after leaving home (commute)")
    desk_charge_duration_s: tuple[float, float] = _p((3 * HOUR_S, 7 * HOUR_S), "s", "choice: length of a desk charge")
    evening_charge_prob: tuple[float, float] = _p(
        (0.1, 0.7), "per day, range across users", "choice: charging in the evening at home")
    evening_charge_before_sleep_s: tuple[float, float] = _p(
        (2 * HOUR_S, 6 * HOUR_S), "s", "choice: evening plug-in this long before bed")
    evening_charge_duration_s: tuple[float, float] = _p(
        (HOUR_S, 3 * HOUR_S), "s", "choice: length of an evening charge")
    topups_per_day: tuple[float, float] = _p((0.1, 0.6), "charges/day, range across users", "choice: daytime top-ups")
    topup_duration_s: tuple[float, float] = _p((1200.0, 3600.0), "s", "choice: length of a daytime top-up")
    low_battery_pct: float = _p(
        15.0, "%", "choice: Android's default low-battery warning level; Shye et al., MICRO'09: frequent "
        "low-battery warnings")
    low_battery_reaction_max_s: float = _p(1800.0, "s", "choice: the owner plugs in within this time of the warning")
    battery_start_pct: tuple[float, float] = _p((50.0, 100.0), "%", "choice: battery level at the trace start")
    drain_screen_on_pct_per_h: float = _p(10.0, "%/h", "assumption: ~10 h of screen-on use per full battery")
    drain_screen_off_pct_per_h: float = _p(1.0, "%/h", "assumption: ~4 days of standby per full battery")
    charge_pct_per_h: float = _p(40.0, "%/h", "assumption: constant-current phase, 0-80 % in 2 h")
    charge_taper_above_pct: float = _p(80.0, "%", "assumption: constant-voltage phase starts here")
    charge_taper_pct_per_h: float = _p(15.0, "%/h", "assumption: constant-voltage phase, 80-100 % in 80 min")
    battery_step_pct: float = _p(1.0, "%", "choice: a state row per 1 % change, like Android's integer level")

    # -- network
    home_wifi_prob: float = _p(0.9, "-", "choice: share of users with Wi-Fi at home")
    away_day_prob: float = _p(0.7, "-", "choice: share of days the owner leaves home")
    leave_after_wake_s: tuple[float, float] = _p((1800.0, 7200.0), "s", "choice: leaving home after waking")
    away_duration_s: tuple[float, float] = _p((6 * HOUR_S, 10 * HOUR_S), "s", "choice: time away from home")
    away_wifi_prob: float = _p(0.5, "-", "choice: share of away days on Wi-Fi (work, school)")

    def __post_init__(self) -> None:
        self._validate()

    def _validate(self) -> None:
        def bad(name: str, reason: str) -> InputError:
            return InputError("SynthParams", name, reason)

        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float | int) and not (math.isfinite(v) and v >= 0):
                raise bad(f.name, f"must be a finite non-negative number, got {v!r}")
            if f.name.endswith("_prob") and max(v if isinstance(v, tuple) else (v,)) > 1:
                raise bad(f.name, f"a probability must be in 0-1, got {v!r}")
            if isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, float | int) for x in v):
                if not (math.isfinite(v[0]) and math.isfinite(v[1]) and 0 <= v[0] <= v[1]):
                    raise bad(f.name, f"expected a range (low, high) with 0 <= low <= high, got {v!r}")
        if not self.sessions_per_day_min < self.sessions_per_day_mean < self.sessions_per_day_max:
            raise bad("sessions_per_day_mean", "must lie strictly between sessions_per_day_min and _max")
        if self.sessions_per_day_min <= 0 or self.sessions_per_day_sigma <= 0:
            raise bad("sessions_per_day_sigma", "sessions_per_day_min and _sigma must be positive")
        if not 0 < self.session_min_s < self.session_tail_start_s < self.session_max_s:
            raise bad("session_tail_start_s", "need 0 < session_min_s < session_tail_start_s < session_max_s")
        if self.session_body_mean_s <= 0 or self.session_tail_scale_s <= 0 or self.session_tail_shape <= 0:
            raise bad("session_tail_shape", "session_body_mean_s, _tail_scale_s and _tail_shape must be positive")
        slack_h = 2 * self.day_jitter_max_h  # one day's wake and bed can both move by the jitter
        if not (self.wake_range_h[1] + slack_h < self.sleep_range_h[0]
                and self.sleep_range_h[1] + slack_h < 24 + self.wake_range_h[0]):
            raise bad("sleep_range_h", "waking windows must be non-empty and must not reach the next morning")
        if len(self.hourly_activity) != 24 or min(self.hourly_activity) <= 0:
            raise bad("hourly_activity", "expected 24 positive weights")
        named = [c for c, *_ in self.category_mix + self.category_hour_boosts + self.long_session_boosts]
        for c in named:
            if c not in CATEGORIES:
                raise bad("category_mix", f"unknown category {c!r}")
        if sum(w for _, w in self.category_mix) <= 0:
            raise bad("category_mix", "weights must not all be zero")
        rates = (self.drain_screen_on_pct_per_h, self.drain_screen_off_pct_per_h, self.charge_pct_per_h,
                 self.charge_taper_pct_per_h, self.battery_step_pct)
        if min(rates) <= 0:
            raise bad("drain_screen_on_pct_per_h", "battery rates and battery_step_pct must be positive")
        if self.battery_start_pct[1] > 100 or self.charge_taper_above_pct > 100:
            raise bad("battery_start_pct", "battery levels must be within 0-100")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly values (for manifest.json)."""
        return asdict(self)


def params_table(params: SynthParams | None = None) -> str:
    """SynthParams as a Markdown table: parameter, value, unit, source."""
    params = params or SynthParams()
    out = ["| parameter | value | unit | source |", "|---|---|---|---|"]
    for f in fields(params):
        value = getattr(params, f.name)
        out.append(f"| `{f.name}` | {_format_value(value)} | {f.metadata['unit']} | {f.metadata['source']} |")
    return "\n".join(out)


def _format_value(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_format_value(x) for x in v) + ")"
    if isinstance(v, str):
        return v
    return f"{v:g}"


# ---------------------------------------------------------------- distributions


class _TruncatedLogNormal:
    """Log-normal with a given mean after truncation to [lo, hi]; sampled by quantile."""

    def __init__(self, mean: float, lo: float, hi: float, sigma: float):
        self.lo, self.hi, self.sigma = lo, hi, sigma
        self._n = NormalDist()
        a, b = math.log(lo), math.log(hi)
        lo_mu, hi_mu = a - 10 * sigma, b + 10 * sigma
        for _ in range(200):  # the truncated mean grows with mu: bisect
            self.mu = 0.5 * (lo_mu + hi_mu)
            if self.mean() < mean:
                lo_mu = self.mu
            else:
                hi_mu = self.mu

    def _bounds(self) -> tuple[float, float]:
        return ((math.log(self.lo) - self.mu) / self.sigma, (math.log(self.hi) - self.mu) / self.sigma)

    def mean(self) -> float:
        a, b = self._bounds()
        cdf, s = self._n.cdf, self.sigma
        z = cdf(b) - cdf(a)
        return math.exp(self.mu + s * s / 2) * (cdf(b - s) - cdf(a - s)) / z if z > 0 else self.lo

    def quantile(self, u: float) -> float:
        a, b = self._bounds()
        pa, pb = self._n.cdf(a), self._n.cdf(b)
        p = min(max(pa + u * (pb - pa), 1e-15), 1 - 1e-15)
        return float(min(max(math.exp(self.mu + self.sigma * self._n.inv_cdf(p)), self.lo), self.hi))


class SessionLengths:
    """Session lengths: exponential body up to ``session_tail_start_s``, shifted-Pareto tail above.

    The shape is Falaki et al.'s (MobiSys'10); the parameters are fitted to LSApp.
    """

    def __init__(self, p: SynthParams):
        self.p = p
        self._body_cdf_at_start = 1 - math.exp(-p.session_tail_start_s / p.session_body_mean_s)
        y_max = p.session_max_s - p.session_tail_start_s
        self._tail_cdf_at_max = 1 - (1 + y_max / p.session_tail_scale_s) ** -p.session_tail_shape

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = self.p
        in_tail = rng.random(n) < p.session_tail_prob
        u = rng.random(n)
        body = -p.session_body_mean_s * np.log1p(-u * self._body_cdf_at_start)
        y = p.session_tail_scale_s * ((1 - u * self._tail_cdf_at_max) ** (-1 / p.session_tail_shape) - 1)
        x = np.where(in_tail, p.session_tail_start_s + y, body)
        return np.round(np.clip(x, p.session_min_s, p.session_max_s), 3)


class _CategoryPicker:
    """App category per session: base mix x hour-of-day boost x long-session boost."""

    def __init__(self, p: SynthParams):
        self.p = p
        index = {c: i for i, c in enumerate(CATEGORIES)}
        self.base = np.zeros(len(CATEGORIES))
        for c, w in p.category_mix:
            self.base[index[c]] = w
        self.by_hour = np.ones((24, len(CATEGORIES)))
        for c, start_h, end_h, factor in p.category_hour_boosts:
            hours = [h % 24 for h in range(int(start_h), int(end_h) + (24 if end_h <= start_h else 0))]
            self.by_hour[hours, index[c]] *= factor
        self.long = np.ones(len(CATEGORIES))
        for c, factor in p.long_session_boosts:
            self.long[index[c]] *= factor
        self.messaging = index["messaging"]

    def pick(self, rng: np.random.Generator, start_s: np.ndarray, duration_s: np.ndarray,
             first_of_day: np.ndarray) -> np.ndarray:
        hour = ((start_s % DAY_S) // HOUR_S).astype(int)
        w = self.base * self.by_hour[hour] * np.where(
            (duration_s > self.p.session_tail_start_s)[:, None], self.long, 1.0)
        cum = np.cumsum(w, axis=1)
        u = rng.random(len(start_s)) * cum[:, -1]
        idx = np.minimum((cum < u[:, None]).sum(axis=1), len(CATEGORIES) - 1)
        to_messaging = first_of_day & (rng.random(len(start_s)) < self.p.first_session_messaging_prob)
        idx[to_messaging] = self.messaging
        return np.array(CATEGORIES, dtype=object)[idx]


def _van_der_corput(i: int) -> float:
    """The i-th point of the base-2 van der Corput sequence: any prefix is evenly spread in [0, 1)."""
    x, denom = 0.0, 1.0
    while i:
        denom *= 2
        i, bit = divmod(i, 2)
        x += bit / denom
    return x


# ---------------------------------------------------------------- one owner


@dataclass(frozen=True)
class _Habits:
    """One owner's habits, drawn once."""

    sessions_per_day: float
    wake_h: float
    sleep_h: float
    overnight_charge_prob: float
    topups_per_day: float
    desk_charger: bool
    evening_charge_prob: float
    home_network: str
    battery_start_pct: float

    @classmethod
    def draw(cls, p: SynthParams, rng: np.random.Generator, sessions_per_day: float) -> _Habits:
        def uniform(r: tuple[float, float]) -> float:
            return float(rng.uniform(*r))

        return cls(
            sessions_per_day=sessions_per_day,
            wake_h=float(np.clip(rng.normal(p.wake_mean_h, p.wake_sd_h), *p.wake_range_h)),
            sleep_h=float(np.clip(rng.normal(p.sleep_mean_h, p.sleep_sd_h), *p.sleep_range_h)),
            overnight_charge_prob=uniform(p.overnight_charge_prob),
            topups_per_day=uniform(p.topups_per_day),
            desk_charger=bool(rng.random() < p.desk_charger_share),
            evening_charge_prob=uniform(p.evening_charge_prob),
            home_network="wifi" if rng.random() < p.home_wifi_prob else "cellular",
            battery_start_pct=uniform(p.battery_start_pct),
        )


class _Days:
    """Wake and bed times of days -1..D (day -1 covers the night into the trace start)."""

    def __init__(self, p: SynthParams, rng: np.random.Generator, habits: _Habits, days: int):
        n = days + 2
        jitter = lambda: np.clip(rng.normal(0, p.day_jitter_sd_h, n), -p.day_jitter_max_h, p.day_jitter_max_h)
        day0_s = (np.arange(n) - 1) * DAY_S
        self.wake_s: list[float] = np.round(day0_s + (habits.wake_h + jitter()) * HOUR_S, 3).tolist()
        self.sleep_s: list[float] = np.round(day0_s + (habits.sleep_h + jitter()) * HOUR_S, 3).tolist()

    def __len__(self) -> int:
        return len(self.wake_s)

    def awake(self, t: float) -> bool:
        k = bisect.bisect_right(self.wake_s, t) - 1
        return k >= 0 and t < self.sleep_s[k]


class _Diurnal:
    """Inverse of the cumulative hour-of-day activity, to draw session starts by intensity."""

    def __init__(self, p: SynthParams, days: int):
        hours = np.arange(-24, (days + 2) * 24)
        self.t_s = np.append(hours, hours[-1] + 1) * HOUR_S
        w = np.array(p.hourly_activity)[hours % 24] * HOUR_S
        self.cum = np.concatenate([[0.0], np.cumsum(w)])

    def sample(self, rng: np.random.Generator, lo_s: float, hi_s: float, n: int) -> np.ndarray:
        a, b = np.interp([lo_s, hi_s], self.t_s, self.cum)
        return np.sort(np.interp(rng.uniform(a, b, n), self.cum, self.t_s))


def _place_day(rng: np.random.Generator, p: SynthParams, diurnal: _Diurnal, wake_s: float, sleep_s: float,
               durations: np.ndarray) -> np.ndarray:
    """Start times for one waking window: by activity intensity, in order, never overlapping.

    Draw instants by intensity, squeeze them into the free time (window minus session
    lengths and gaps), then lay sessions out in order: starts keep the drawn shape and the
    last session ends by bedtime. Returns fewer starts if the sessions cannot all fit.
    """
    gap, window = p.session_gap_min_s, sleep_s - wake_s
    n = len(durations)
    while n and durations[:n].sum() + (n - 1) * gap > window:
        n -= 1  # rare: too much use for one day; later-drawn sessions are dropped
    if n == 0:
        return np.empty(0)
    t = diurnal.sample(rng, wake_s, sleep_s, n)
    if rng.random() < p.wake_check_prob:
        t[0] = wake_s + rng.uniform(0, min(p.wake_check_window_s, window))
        t.sort()
    free = window - durations[:n].sum() - (n - 1) * gap
    offsets = np.concatenate([[0.0], np.cumsum(durations[:n - 1] + gap)])
    return np.round(wake_s + (t - wake_s) * (free / window) + offsets, 3)


class _OwnerSessions:
    """All sessions of one owner: per day a Poisson count, lengths, starts and categories."""

    def __init__(self, p: SynthParams, rng: np.random.Generator, habits: _Habits, days: _Days,
                 diurnal: _Diurnal, lengths: SessionLengths, picker: _CategoryPicker, horizon_s: float):
        starts, durs, first = [], [], []
        for k in range(len(days) - 1):  # day D only bounds the last night
            d = lengths.sample(rng, int(rng.poisson(habits.sessions_per_day)))
            s = _place_day(rng, p, diurnal, days.wake_s[k], days.sleep_s[k], d)
            starts.append(s)
            durs.append(d[:len(s)])
            first.append(np.arange(len(s)) == 0)
        start, dur, first_of_day = (np.concatenate(x) if x else np.empty(0) for x in (starts, durs, first))
        keep = (start >= 0) & (start + dur <= horizon_s)
        self.start_s, self.duration_s = start[keep], dur[keep]
        cats = picker.pick(rng, start, dur, first_of_day.astype(bool))
        self.category = cats[keep]
        scale = np.exp(rng.normal(0, p.load_scale_sigma, len(start))) if p.load_scale_sigma > 0 else np.ones(len(start))
        self.load_scale = np.round(scale[keep], 3)

    def as_sessions(self, user: str) -> tuple[Session, ...]:
        return tuple(map(Session, itertools.repeat(user), self.start_s.tolist(), self.duration_s.tolist(),
                         self.category.tolist(), self.load_scale.tolist()))


class _DeviceSim:
    """Event simulation of screen, charging, network and battery level for one owner.

    Events: session start/end (screen), plug/unplug (a depth counter, so overlapping charges
    nest), network changes, the overnight-charge decision, and the low-battery warning. The
    battery level is piecewise linear between events; a state row is written at every
    observable change and whenever the level crosses a multiple of ``battery_step_pct``.
    """

    def __init__(self, p: SynthParams, rng: np.random.Generator, habits: _Habits, days: _Days,
                 sessions: _OwnerSessions, horizon_s: float):
        self.p, self.rng, self.days, self.horizon_s = p, rng, days, horizon_s
        self.heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        for s, d in zip(sessions.start_s.tolist(), sessions.duration_s.tolist()):
            self._push(s, "screen", True)
            self._push(round(s + d, 3), "screen", False)
        self._plan_nights(habits)
        self._plan_topups(habits)
        self._plan_evenings(habits)
        self._plan_days_out(habits)
        self.t, self.battery = 0.0, habits.battery_start_pct
        self.screen, self.depth, self.network = False, 0, habits.home_network
        self.low_pending = False
        self.rows: list[tuple[float, bool, bool, float, str]] = []

    def _push(self, t: float, kind: str, value: Any = None) -> None:
        t = round(max(float(t), 0.0), 3)
        if t < self.horizon_s:
            self._seq += 1
            heapq.heappush(self.heap, (t, self._seq, kind, value))

    def _plan_nights(self, habits: _Habits) -> None:
        p, rng, days = self.p, self.rng, self.days
        for k in range(len(days) - 1):
            planned = bool(rng.random() < habits.overnight_charge_prob)
            plug = days.sleep_s[k] - rng.uniform(0, p.plug_before_sleep_max_s)
            unplug = days.wake_s[k + 1] + rng.uniform(0, p.unplug_after_wake_max_s)
            self._push(plug, "night", (planned, round(unplug, 3)))

    def _plan_topups(self, habits: _Habits) -> None:
        p, rng, days = self.p, self.rng, self.days
        for k in range(1, len(days) - 1):
            for _ in range(int(rng.poisson(habits.topups_per_day))):
                dur = float(rng.uniform(*p.topup_duration_s))
                lo, hi = days.wake_s[k] + HOUR_S, days.sleep_s[k] - HOUR_S - dur
                if hi > lo:
                    start = rng.uniform(lo, hi)
                    self._push(start, "plug")
                    self._push(start + dur, "unplug")

    def _plan_evenings(self, habits: _Habits) -> None:
        p, rng, days = self.p, self.rng, self.days
        for k in range(len(days) - 1):
            if rng.random() < habits.evening_charge_prob:
                start = days.sleep_s[k] - rng.uniform(*p.evening_charge_before_sleep_s)
                self._push(start, "plug")
                self._push(start + rng.uniform(*p.evening_charge_duration_s), "unplug")

    def _plan_days_out(self, habits: _Habits) -> None:
        """Days away from home: the network changes, and desk chargers charge at work."""
        p, rng, days = self.p, self.rng, self.days
        for k in range(len(days) - 1):
            if rng.random() >= p.away_day_prob:
                continue
            leave = days.wake_s[k] + rng.uniform(*p.leave_after_wake_s)
            back = min(leave + rng.uniform(*p.away_duration_s), days.sleep_s[k] - HOUR_S)
            away = "wifi" if rng.random() < p.away_wifi_prob else "cellular"
            desk_dur = rng.uniform(*p.desk_charge_duration_s)
            desk_start = rng.uniform(leave + p.desk_charge_delay_s, max(back - desk_dur, leave + p.desk_charge_delay_s))
            desk_end = min(desk_start + desk_dur, back)
            if back > leave:
                self._push(leave, "network", away)
                self._push(back, "network", habits.home_network)
            if habits.desk_charger and desk_end > desk_start:
                self._push(desk_start, "plug")
                self._push(desk_end, "unplug")

    # -- battery

    def _drain_pct_per_s(self) -> float:
        p = self.p
        return (p.drain_screen_on_pct_per_h if self.screen else p.drain_screen_off_pct_per_h) / HOUR_S

    def _advance(self, t1: float) -> None:
        """Move the battery from ``self.t`` to ``t1`` under the current state, writing step crossings."""
        p, t0, b = self.p, self.t, self.battery
        step = p.battery_step_pct
        while t0 < t1:
            if self.depth > 0:
                if b >= 100.0:
                    b = 100.0
                    break
                target = p.charge_taper_above_pct if b < p.charge_taper_above_pct else 100.0
                rate = (p.charge_pct_per_h if b < p.charge_taper_above_pct else p.charge_taper_pct_per_h) / HOUR_S
                t_hit = t0 + (target - b) / rate
                b_end = target if t_hit <= t1 else b + rate * (t1 - t0)
                levels = range(math.floor(b / step) + 1, math.floor(b_end / step + 1e-9) + 1)
            else:
                if b <= 0.0:
                    b = 0.0
                    break
                rate = -self._drain_pct_per_s()
                t_hit = t0 + b / -rate
                b_end = 0.0 if t_hit <= t1 else b + rate * (t1 - t0)
                levels = range(math.ceil(b / step) - 1, math.ceil(b_end / step - 1e-9) - 1, -1)
            for k in levels:
                t_k = t0 + (k * step - b) / rate
                if t_k < t1:
                    self._row(t_k, k * step)
            t0, b = min(t_hit, t1), b_end
        self.t, self.battery = t1, b

    def _row(self, t: float, battery_pct: float) -> None:
        row = (round(t, 3), self.screen, self.depth > 0, round(battery_pct, 1), self.network)
        if self.rows and self.rows[-1][0] == row[0]:
            self.rows[-1] = row  # same millisecond: the later state wins
        else:
            self.rows.append(row)

    def _observable(self) -> tuple[bool, bool, str]:
        return self.screen, self.depth > 0, self.network

    # -- events

    def _apply(self, kind: str, value: Any) -> None:
        p = self.p
        if kind == "screen":
            self.screen = value
        elif kind == "plug":
            self.depth += 1
        elif kind == "unplug":
            self.depth -= 1
        elif kind == "network":
            self.network = value
        elif kind == "night":
            planned, unplug_s = value
            if planned or self.battery < p.bedtime_charge_below_pct:
                self.depth += 1
                self._push(unplug_s, "unplug")
        elif kind == "emergency":
            self.low_pending = False
            self.depth += 1
            self._push(self.t + self.rng.uniform(*p.topup_duration_s), "unplug")
        elif kind == "low":
            pass  # the warning itself changes nothing; _react_to_low_battery decides

    def _react_to_low_battery(self) -> None:
        p = self.p
        if (self.depth == 0 and not self.low_pending and self.battery <= p.low_battery_pct + _LOW_SLACK_PCT
                and self.days.awake(self.t)):
            self.low_pending = True
            self._push(self.t + self.rng.uniform(0, p.low_battery_reaction_max_s), "emergency")

    def _low_warning_before(self, t_next: float) -> None:
        """Schedule the low-battery warning if the level reaches it before the next event."""
        low = self.p.low_battery_pct
        if self.depth == 0 and not self.low_pending and self.battery > low + _LOW_SLACK_PCT:
            t_low = self.t + (self.battery - low) / self._drain_pct_per_s()
            if round(t_low, 3) < t_next:
                self._push(t_low, "low")

    def run(self) -> list[tuple[float, bool, bool, float, str]]:
        while self.heap and self.heap[0][0] == 0.0:  # e.g. the night before day 0
            self._apply(*heapq.heappop(self.heap)[2:])
        self._row(0.0, self.battery)
        last_obs = self._observable()
        while self.heap:
            self._low_warning_before(self.heap[0][0])
            t = self.heap[0][0]
            self._advance(t)
            while self.heap and self.heap[0][0] == t:
                _, _, kind, value = heapq.heappop(self.heap)
                self._apply(kind, value)
            self._react_to_low_battery()
            if self._observable() != last_obs:
                self._row(t, self.battery)
                last_obs = self._observable()
        self._advance(self.horizon_s)
        return self.rows


# ---------------------------------------------------------------- public API


# Bounds on one synthesis: the trace is built in memory (~90 state rows per user-day, about
# 1.3 ms each to generate) before it is written; 20,000 user-days is ~2 M rows, ~30 s.
MAX_USERS, MAX_DAYS, MAX_USER_DAYS = 100_000, MAX_SPAN_DAYS, 20_000


def _check_args(users: Any, days: Any, seed: Any, options: bool) -> None:
    """``options``: the values came from the command line (errors name --users, --days, --seed)."""
    where = (lambda name: f"--{name}") if options else (lambda name: "config")
    checks.integer(users, where("users"), 1, MAX_USERS)
    checks.integer(days, where("days"), 1, MAX_DAYS)
    checks.seed(seed, where("seed"))
    if users * days > MAX_USER_DAYS:
        raise InputError(where("users"), f"{users} users x {days} days",
                         f"at most {MAX_USER_DAYS} user-days in one trace (it is built in memory)")


def synthesize(users: int, days: int, seed: int, params: SynthParams | None = None,
               progress: bool = False) -> Trace:
    """A synthetic trace of ``users`` owners over ``days`` days, fully determined by ``seed``."""
    _check_args(users, days, seed, options=False)
    p = params or SynthParams()
    horizon_s = days * DAY_S
    rates = _TruncatedLogNormal(p.sessions_per_day_mean, p.sessions_per_day_min, p.sessions_per_day_max,
                                p.sessions_per_day_sigma)
    # Rate quantiles: a seeded shift of the van der Corput sequence, so even a small fleet
    # spans the published range and its mean lands on the target.
    shift = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(0,))).random()
    diurnal, lengths, picker = _Diurnal(p, days), SessionLengths(p), _CategoryPicker(p)
    width = max(3, len(str(users - 1)))
    sessions: dict[str, tuple[Session, ...]] = {}
    states: dict[str, tuple[DeviceState, ...]] = {}
    for i in tqdm(range(users), desc="synthetic users", unit="user", disable=not progress, leave=False):
        user = f"u{i:0{width}d}"
        rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(1, i)))
        habits = _Habits.draw(p, rng, rates.quantile((_van_der_corput(i + 1) + shift) % 1.0))
        day_plan = _Days(p, rng, habits, days)
        owner = _OwnerSessions(p, rng, habits, day_plan, diurnal, lengths, picker, horizon_s)
        sessions[user] = owner.as_sessions(user)
        rows = _DeviceSim(p, rng, habits, day_plan, owner, horizon_s).run()
        states[user] = tuple(map(DeviceState, itertools.repeat(user), *zip(*rows)))
    return Trace(sessions, states, horizon_s)


def synth_to_dir(out_dir: str | Path, users: int, days: int, seed: int,
                 params: SynthParams | None = None, progress: bool = False) -> Trace:
    """Generate a trace and write it as a trace set (CSVs + manifest.json) to ``out_dir``.

    Backs ``swansim traces synth --days D --users N --seed S --out DIR``: the arguments and
    the output directory are checked first, and errors name those options.
    """
    from swansim.results import git_commit

    _check_args(users, days, seed, options=True)
    out = checks.out_dir(out_dir)
    p = params or SynthParams()
    trace = synthesize(users, days, seed, p, progress)
    write_trace(trace, out, {"generator": _GENERATOR, "swansim_version": __version__, "git_commit": git_commit(),
                             "seed": int(seed), "days": int(days), "params": p.to_dict()})
    return trace
