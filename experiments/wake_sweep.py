"""Fig. 2b and the SD855's depthwise gaps against a core family's wake-up latency: what the fitted figure carries.

The runtime's wake-up of ``--family`` (default ``inorder``, the A55: `family.inorder.wake_latency_s`,
fitted at its 0.7 ms bound; README, "Where the model stands"; ``ooo`` is the Pixel 3's A75, fitted
at 22.5 us) set to each of ``--wake-us``, everything else as committed:
Fig. 2b's four plotted choices (Pixel 3, ShuffleNetV2, as `swansim.runs.calibration.Fig2` keys
them), their latency and energy above idle relative to `0123` as the paper plots them, and the
clocks the choices run at (each cluster's time-weighted mean over the measured batch), and
`0123` again with every clock held at its top (the performance governor). A wake-up is idle
time on its core, so under schedutil it also pulls the little cluster's clock down, and the
work between wake-ups slows with it: the two `0123` columns show how much of its slowness is
the wake-ups and how much the clock they take away. The big team against one big core: `4567`'s
latency and power over `4`'s (the paper: 2.0 and 1.25). For the A55, also the validation shape
the same figure carries: on the Galaxy S10e (SD855), PyTorch's default against the best pinned
choice without a little core (whose latency no A55 wake-up touches), for ShuffleNetV2 and
MobileNetV2, keyed as the landscape keys them (the measurements: an order of magnitude or
more). Writes ``wake_sweep.csv``.

Per team choice, also how often its threads fell asleep per batch (``sleeps_*``: each sleep a
futex_wait, ended by a futex_wake; averaged over the batches run, warm-up included) and what each
sleep would have to cost on top for the choice to take the paper's latency (``need_us_*``:
`4567` at 2.0 times `4`, `0123` at `0` over 0.11): a cost per futex call, such as a trap to
proot's tracer (README, "Where the model stands"), would have to be of that size. ``--loops
repeats`` runs every repeat of a per-group loop as a region of its own (the exact path, whose
sleeps are counted one by one; the default's macro regions count theirs in closed form).

With ``--background THREADS,PERIOD_MS,BURST_US``, Fig. 2b's batches run beside that many threads
in the Pixel 3's system-background cpuset (its little cores), each waking after an exponential
sleep of mean PERIOD_MS for BURST_US of work (`session.workloads.Bursts`): whether background
activity on the little cores - work a team pinned there shares its cores with, and waits for at
every barrier - slows four little threads the way Fig. 2b shows.

    .venv/bin/python experiments/wake_sweep.py [--family inorder|ooo] [--wake-us 43,100,200,300,500,700]
        [--background 4,4,1000] [--runtime pytorch|FILE.toml] [--loops chunked|repeats] [--jobs 2]
        [--out results/wake_sweep]

43 us is the WFI exit of both the A55 and the A75 in the Pixel 3's cpuidle table
(kdrag0n/proton_bluecross sdm845-pm.dtsi); power collapse exits in 461 us (A55) and 621 us (A75).
"""
from __future__ import annotations

import sys

import pandas as pd

from swansim import checks
from swansim.batchmodel import BatchKey, simulate_batch
from swansim.cli import Parser, guarded
from swansim.dnn import calibrate as cal
from swansim.dnn.choices import enumerate_choices, parse_choice, pytorch_default
from swansim.dnn.runtime import TRAINING_RUNTIME_HELP, load_runtime, training_runtime, with_paths
from swansim.dnn.training import DEFAULT_LOOPS, LOOPS
from swansim.errors import InputError
from swansim.hw.profile import Catalogue
from swansim.pool import check_jobs, run_all
from swansim.runs.calibration import FIG2_DEVICE
from swansim.runs.landscape import LandscapeConfig
from swansim.session.probes import FrequencyLog
from swansim.session.workloads import Bursts

MODEL = "shufflenet_v2_x2_0"
CHOICES = ("4", "4567", "0", "0123")   # Fig. 2b's bars; 0123 is its 1.00
FAMILIES = ("inorder", "ooo")   # the Pixel 3's A55 and A75
GAP_DEVICE = "galaxy-s10e"
GAP_MODELS = {"shufflenet_v2_x2_0": "sn", "mobilenet_v2": "mn"}
BACKGROUND_GROUP = "system_background"   # the Pixel 3's widest background cpuset: 0-3


def _gap_latency(runtime: str, wake_s: float, model: str, choice: str) -> float:
    """A Galaxy S10e batch keyed as a landscape row ("default": PyTorch's default)."""
    spec = Catalogue.load().device(GAP_DEVICE)
    rt = with_paths(load_runtime(runtime), {"family.inorder.wake_latency_s": wake_s})
    c = pytorch_default(spec.soc) if choice == "default" else parse_choice(choice, spec.soc)
    cfg = LandscapeConfig()
    key = BatchKey(GAP_DEVICE, model, c, batches=cfg.batches, warmup=cfg.warmup)
    return simulate_batch(key, runtime=rt, spec=spec, record_layers=False).latency_s


def _one(runtime: str, family: str, wake_s: float, choice: str, governor: str = cal.SWAN_GOVERNOR,
         background: tuple[int, float, float] | None = None, loops: str = DEFAULT_LOOPS) -> dict:
    """One choice's batch at one wake-up of ``family``, keyed as the calibration keys Fig. 2b's
    points (or under another cpufreq governor), beside ``background`` bursts (threads, mean
    sleep s, burst s) if given, its per-group loops run as ``loops``."""
    spec = Catalogue.load().device(FIG2_DEVICE)
    rt = with_paths(load_runtime(runtime), {f"family.{family}.wake_latency_s": wake_s})
    key = BatchKey(FIG2_DEVICE, MODEL, parse_choice(choice, spec.soc), governor=governor)
    seen = {}

    def attach(dev, job) -> None:   # a probe from outside (the clocks' change points), the bursts beside
        seen.update(dev=dev, job=job, log=FrequencyLog(dev))
        if background is not None:
            Bursts(dev, spec.cpuset(BACKGROUND_GROUP), *background, seed=key.seed)

    cost = simulate_batch(key, runtime=rt, spec=spec, record_layers=False, loops=loops, attach=attach)
    end = seen["dev"].env.now
    mean = seen["log"].mean_mhz(end - cost.latency_s * key.batches, end)   # over the measured batches
    return {"latency_s": cost.latency_s, "net_energy_j": cost.net_energy_j,
            "sleeps": seen["job"].sleeps / (key.warmup + key.batches), **{f"{n}_mhz": f for n, f in mean.items()}}


def _gaps(runtime: str, wakes: list[float], jobs: int) -> list[dict[str, float]]:
    """Per wake-up: the S10e default's latency over the best pinned choice without a little
    core, per depthwise model (those choices are simulated once: no A55 wake-up touches them)."""
    soc = Catalogue.load().device(GAP_DEVICE).soc
    pinned = [c.label for c in enumerate_choices(soc, mixed=False) if c.kind != "little"]
    cells = [(wakes[0], m, c) for m in GAP_MODELS for c in pinned] + [(w, m, "default") for w in wakes for m in GAP_MODELS]
    got = dict(zip(cells, run_all(_gap_latency, [(runtime, *c) for c in cells], jobs, desc=f"wake sweep: {GAP_DEVICE}")))
    best = {m: min(got[(wakes[0], m, c)] for c in pinned) for m in GAP_MODELS}
    return [{f"s10e_{short}_gap": got[(w, m, "default")] / best[m] for m, short in GAP_MODELS.items()} for w in wakes]


def _per_sleep_us(target_s: float, got: dict) -> float:
    """What each of a run's sleeps would have to cost on top for its batch to take ``target_s``
    (us; NaN if its threads never slept)."""
    return 1e6 * (target_s - got["latency_s"]) / got["sleeps"] if got["sleeps"] else float("nan")


def _background(text: str) -> tuple[int, float, float]:
    """``--background THREADS,PERIOD_MS,BURST_US`` as (threads, mean sleep s, burst s)."""
    parts = checks.listed(text, "--background")
    if len(parts) != 3:
        raise InputError("--background", repr(text), "give THREADS,PERIOD_MS,BURST_US")
    try:
        threads, period_ms, burst_us = int(parts[0]), float(parts[1]), float(parts[2])
    except ValueError:
        raise InputError("--background", repr(text), "THREADS is a whole number, PERIOD_MS and BURST_US "
                                                      "numbers") from None
    return (int(checks.number(threads, "--background threads", 1, 64, "of threads")),
            checks.number(period_ms, "--background period", 0.1, 10_000.0, "of milliseconds") / 1000.0,
            checks.number(burst_us, "--background burst", 1.0, 1_000_000.0, "of microseconds") * 1e-6)


def main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=FAMILIES, default="inorder",
                    help="whose wake-up: inorder (the A55, default) or ooo (the Pixel 3's A75)")
    ap.add_argument("--wake-us", default="43,100,200,300,500,700",
                    help="the wake-up latencies to try, in microseconds, comma-separated")
    ap.add_argument("--runtime", default="pytorch", help="the PyTorch runtime swept: " + TRAINING_RUNTIME_HELP)
    ap.add_argument("--background", default=None, metavar="THREADS,PERIOD_MS,BURST_US",
                    help="Fig. 2b beside background threads on the little cores (see the module doc)")
    ap.add_argument("--loops", choices=LOOPS[1:], default=DEFAULT_LOOPS,
                    help="how per-group loops run: chunked macro regions (the default, as everywhere) "
                         "or every repeat a region of its own (exact sleep counts)")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    ap.add_argument("--out", default="results/wake_sweep")
    args = ap.parse_args(argv)
    background = _background(args.background) if args.background is not None else None
    training_runtime(args.runtime, "--runtime")
    wakes = []
    for text in checks.listed(args.wake_us, "--wake-us"):
        try:
            us = float(text)
        except ValueError:
            raise InputError("--wake-us", repr(text), "not a number of microseconds") from None
        wakes.append(checks.number(us, "--wake-us", 1.0, 100_000.0, "us") * 1e-6)
    if not wakes or len(set(wakes)) != len(wakes):
        raise InputError("--wake-us", repr(args.wake_us), "give each wake-up latency once")
    wakes.sort()
    little = f"{Catalogue.load().device(FIG2_DEVICE).soc.clusters[0].name}_mhz"
    jobs = check_jobs(args.jobs)
    out = checks.out_dir(args.out)
    fam = args.family
    cells = [(args.runtime, fam, w, c, cal.SWAN_GOVERNOR, background, args.loops) for w in wakes for c in CHOICES]
    cells += [(args.runtime, fam, w, "0123", "performance", background, args.loops) for w in wakes]   # clocks at top
    paper = cal.read_fig2()[MODEL]
    lat, en = paper["latency"], paper["energy"]
    got = dict(zip([(w, c, gov == cal.SWAN_GOVERNOR) for _, _, w, c, gov, _, _ in cells],
                   run_all(_one, cells, jobs, desc=f"wake sweep ({fam}): Fig. 2b")))
    gaps = _gaps(args.runtime, wakes, jobs) if fam == "inorder" else [{} for _ in wakes]   # the SD855's bigs are ooo-wide
    rows = []
    for w, gap in zip(wakes, gaps):
        g = {c: got[(w, c, True)] for c in CHOICES}

        def power(c: str) -> float:
            return g[c]["net_energy_j"] / g[c]["latency_s"]
        rows.append({"wake_us": w * 1e6, "0123_s": g["0123"]["latency_s"],
                     "0123_top_clock_s": got[(w, "0123", False)]["latency_s"], "0_s": g["0"]["latency_s"],
                     **{f"lat_{c}": g[c]["latency_s"] / g["0123"]["latency_s"] for c in CHOICES[:3]},
                     **{f"energy_{c}": g[c]["net_energy_j"] / g["0123"]["net_energy_j"] for c in CHOICES[:3]},
                     "4567_over_4": g["4567"]["latency_s"] / g["4"]["latency_s"],
                     "power_4567_over_4": power("4567") / power("4"),
                     "sleeps_4567": g["4567"]["sleeps"], "sleeps_0123": g["0123"]["sleeps"],
                     "need_us_4567": _per_sleep_us(lat["4567"] / lat["4"] * g["4"]["latency_s"], g["4567"]),
                     "need_us_0123": _per_sleep_us(lat["0123"] / lat["0"] * g["0"]["latency_s"], g["0123"]),
                     "0123_little_mhz": g["0123"][little], "0_little_mhz": g["0"][little], **gap})
    table = pd.DataFrame(rows)
    table.to_csv(out / "wake_sweep.csv", index=False)
    shown = table.assign(**{c: table[c].round().astype(int) for c in ("wake_us", "0123_little_mhz", "0_little_mhz",
                                                                      "sleeps_4567", "sleeps_0123")})
    print(shown.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print("paper (Fig. 2b, relative to 0123): latency " + ", ".join(f"{c} {lat[c]:g}" for c in CHOICES[:3]) +
          "; energy " + ", ".join(f"{c} {en[c]:g}" for c in CHOICES[:3]) +
          f"; 4567 over 4: latency {lat['4567'] / lat['4']:.2g}, power "
          f"{(en['4567'] / lat['4567']) / (en['4'] / lat['4']):.3g}")
    print(f"({fam}'s wake-up varied in runtime {args.runtime}; 0123_top_clock_s: 0123 under the performance governor; lat_X, energy_X: "
          f"choice X's latency and energy above idle over 0123's; 4567_over_4, power_4567_over_4: the big team's "
          f"latency and power over one big core's; sleeps_X: choice X's threads falling asleep per batch "
          f"(futex_wait); need_us_X: what each such sleep would have to cost on top for the paper's latency "
          f"(4567 at {lat['4567'] / lat['4']:.2g} times 4, 0123 at 0 over {lat['0']:g}); "
          f"*_little_mhz: the little cluster's mean clock"
          + (f"; s10e_sn_gap, s10e_mn_gap: PyTorch's default over the best pinned choice without a little core on "
             f"the {GAP_DEVICE}, ShuffleNetV2 and MobileNetV2" if fam == "inorder" else "")
          + f")\nwrote {out / 'wake_sweep.csv'}")
    if background is not None:
        n, period_s, burst_s = background
        print(f"Fig. 2b's batches ran beside {n} background threads on cpus "
              f"{','.join(map(str, Catalogue.load().device(FIG2_DEVICE).cpuset(BACKGROUND_GROUP)))} "
              f"({BACKGROUND_GROUP}), each waking "
              f"after {period_s * 1e3:g} ms (mean) for {burst_s * 1e6:g} us of work at the top clock"
              + ("; the S10e gaps without them" if fam == "inorder" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "wake_sweep.py"))
