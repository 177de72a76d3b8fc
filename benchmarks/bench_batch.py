"""What one simulated training batch costs, per model and choice class, in bare SimPy events.

For each model of the Swan tasks and each class of execution choice on the Pixel 3 (PyTorch's
default, one big core, all big cores, one little core, all little cores, all cores), a fresh
device runs ``--batches`` batches from a cool start (device set-up included). Printed per case: CPU seconds
per batch as a multiple of one bare SimPy event timed between its batches (so the figure
compares across machines and follows a loaded one; the median of ``--repeats`` runs),
simulator events and replans per
batch, events per simulated second; then the cost of one idle simulated second and the memory
of a phone with a training job (tracemalloc peak).

Run: .venv/bin/python benchmarks/bench_batch.py [--batches 2] [--models resnet34,...] [--device pixel3]
     [--placement wakeup] [--repeats 3]
(a phone whose profile names a kernel runs its WALT placement and core_ctl, as every device does)
"""
from __future__ import annotations

import statistics
import sys
import time
import tracemalloc

from _bare import bare_event_s

from swansim.cli import Parser, guarded
from swansim.device import Device, DeviceConfig
from swansim.dnn.choices import Choice, parse_choice, pytorch_default
from swansim.dnn.runtime import load_runtime
from swansim.dnn.tasks import SWAN_TASKS, build_task
from swansim.dnn.training import TrainingJob
from swansim.hw.profile import TOP_APP, Catalogue, DeviceSpec
from swansim.kernel.placement import AUTO

CHOICES = ("default", "4", "4567", "0", "0123", "01234567")
# Bare events timed between batches. The bare loop's speed on a shared machine swings 2x
# within a minute; timed in short stretches interleaved with the case, it follows the machine.
_BARE_CHUNK = 20_000


def one_case(model: str, choice: Choice, batches: int, spec: DeviceSpec, placement: str = AUTO) -> dict:
    """One fresh phone through ``batches`` batches; a bare loop is timed before and after each
    batch, so ``bare`` is the machine's speed over the same stretch of time as the case."""
    graph, rt = build_task(model), load_runtime("pytorch")
    bare = [bare_event_s(_BARE_CHUNK, 1)]
    t0 = time.process_time()
    dev = Device(spec, DeviceConfig(placement=placement))
    # as swansim.batchmodel runs a landscape row: the process in top-app (TrainingJob's default)
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc, graph, rt, choice, n_batches=batches, record_layers=False,
                      cpuset=dev.spec.cpuset(TOP_APP))
    cpu = time.process_time() - t0
    for b in range(batches):
        t0 = time.process_time()
        while job.batch_index <= b:
            dev.env.step()
        cpu += time.process_time() - t0
        bare.append(bare_event_s(_BARE_CHUNK, 1))
    return {"cpu_s": cpu / batches, "bare_s": statistics.mean(bare), "events": dev.env.n_events / batches,
            "replans": dev.sched.n_replans / batches, "sim_s": dev.env.now / batches}


def idle_second(spec: DeviceSpec, sim_s: float = 600.0) -> dict:
    dev = Device(spec)
    t0, e0 = time.process_time(), dev.env.n_events
    dev.run(sim_s)
    return {"cpu_s": (time.process_time() - t0) / sim_s, "events": (dev.env.n_events - e0) / sim_s}


def phone_bytes(spec: DeviceSpec, model: str) -> int:
    tracemalloc.start()
    dev = Device(spec)
    job = TrainingJob(dev.env, dev.sched, dev.spec.soc, build_task(model), load_runtime("pytorch"),
                      pytorch_default(dev.spec.soc), n_batches=1, record_layers=False)
    dev.env.run(until=job.process)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv=None) -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--models", default=",".join(SWAN_TASKS))
    ap.add_argument("--choices", default=",".join(CHOICES))
    ap.add_argument("--device", default="pixel3")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per case; the median counts (a shared machine is noisy)")
    ap.add_argument("--placement", default=AUTO,
                    help="kernel thread placement (default: the phone's own; 'wakeup' is the one before WALT)")
    args = ap.parse_args(argv)
    cat = Catalogue.load()
    spec, pixel3 = cat.device(args.device, "--device"), cat.device("pixel3")
    soc = spec.soc
    print(f"{'model':<20} {'choice':<10} {'bare events/batch':>17} {'events/batch':>12} {'replans/batch':>13} "
          f"{'sim s/batch':>11} {'events/sim s':>12}")
    for model in args.models.split(","):
        for label in args.choices.split(","):
            choice = pytorch_default(soc) if label == "default" else parse_choice(label, soc)
            runs = [one_case(model, choice, args.batches, spec, args.placement) for _ in range(args.repeats)]
            r = runs[0]
            ratio = statistics.median(x["cpu_s"] / x["bare_s"] for x in runs)
            print(f"{model:<20} {label:<10} {ratio:>17,.0f} {r['events']:>12,.0f} {r['replans']:>13,.0f} "
                  f"{r['sim_s']:>11.3f} {r['events'] / r['sim_s']:>12,.0f}", flush=True)
    bare = bare_event_s(100_000, 2)
    idle = idle_second(pixel3)
    print(f"\nidle phone: {idle['cpu_s'] / bare:,.1f} bare events and {idle['events']:.1f} events per simulated second")
    for model in args.models.split(","):
        print(f"phone with a {model} job (one batch): peak {phone_bytes(pixel3, model) / 1e6:.2f} MB (tracemalloc)")


if __name__ == "__main__":
    sys.exit(guarded(main, "bench_batch.py"))
