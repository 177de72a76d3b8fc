"""Independent runs over a process pool, with a progress bar, results kept as they finish.

Every run of swansim is a pure function of its arguments (seeded), so running configurations
in parallel gives the same numbers as running them one after the other; results come back in
the order of the inputs whatever order they finish in. ``on_result`` sees each result as soon
as it exists, so a caller can write finished rows before a long sweep is over (an interrupted
sweep keeps them).
"""
from __future__ import annotations

import os
import signal
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable, Sequence

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from swansim import checks

# More processes than this would only queue: runs are CPU-bound.
MAX_JOBS = 1024


def default_jobs() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def one_blas_thread():
    """numpy's BLAS on one thread in this process, from now on or within ``with``. swansim's
    parallelism is its process pool: a threaded OpenBLAS would add a worker per core whose idle
    polls (OpenBLAS's THREAD_TIMEOUT, about a tenth of a second after each threaded call) take
    the cores the pool's processes need - the oversubscription swansim models on the phones. A
    fleet's learner (numpy matrix products over the round's clients) is where it showed: with
    two BLAS threads a `--jobs 1` fleet kept 1.25 cores busy for the wall time of one."""
    return threadpool_limits(1, user_api="blas")


def quiet_worker(init: Callable[..., None] | None = None, *args) -> None:
    """A pool worker's start: Ctrl-C (SIGINT, sent to the whole process group) is the parent's to
    handle, so workers ignore it instead of each printing a traceback; numpy's BLAS runs on one
    thread (`one_blas_thread`); then ``init(*args)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_blas_thread()
    if init is not None:
        init(*args)


def new_pool(jobs: int, init: Callable[..., None] | None = None, *args) -> ProcessPoolExecutor:
    """A process pool whose workers leave Ctrl-C to this process (`quiet_worker`)."""
    return ProcessPoolExecutor(max_workers=jobs, initializer=quiet_worker, initargs=(init, *args))


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what waits, end the workers that run (a simulation may run for
    minutes; an interrupted command must not wait for it). ProcessPoolExecutor has no public way
    to end running workers before Python 3.14's terminate_workers, hence its ``_processes``.
    The pool is told to shut down first: its manager thread then drops the cancelled work before
    it sees a worker die. The other way round, Python 3.11's manager marks every queued future
    failed, raises on one the caller had cancelled and prints a traceback from its thread
    (CPython gh-107219, fixed in 3.12). A worker ended while it wrote a result leaves the manager
    reading the rest of that message from a pipe whose write end this process also holds, so it
    would wait forever, and so would every caller waiting on a running future and the
    interpreter's exit: once the workers are gone, this process closes its write end too, the
    manager reads end-of-file and fails the futures still running (BrokenProcessPool)."""
    try:    # a second Ctrl-C must not cut the stopping short
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:   # not the main thread: it cannot take signals anyway
        previous = None
    try:
        procs = list((getattr(pool, "_processes", None) or {}).values())   # shutdown() forgets them,
        queue = getattr(pool, "_result_queue", None)                         # and its result pipe
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
        if procs and queue is not None and not any(p.is_alive() for p in procs):
            queue._writer.close()   # see above: the manager's read ends, not waits
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def check_jobs(jobs: int | None, where: str = "--jobs") -> int:
    """``jobs`` as a positive int (None: every core); bad values are an InputError."""
    return default_jobs() if jobs is None else checks.integer(jobs, where, 1, MAX_JOBS)


def run_all(fn: Callable[..., Any], args: Sequence[tuple], jobs: int | None = None, desc: str = "",
            on_result: Callable[[int, Any], None] | None = None, progress: bool = True,
            labels: Iterable[str] | None = None, pool: ProcessPoolExecutor | None = None) -> list[Any]:
    """``[fn(*a) for a in args]``, over ``jobs`` processes (1: in this process).

    ``fn`` must be a module-level function (it is pickled). ``on_result(i, result)`` is called
    in this process as each result arrives. ``pool``: an executor to reuse (its workers keep
    their caches between calls), instead of one made for this call.
    """
    jobs = 1 if pool is not None else min(check_jobs(jobs), max(len(args), 1))
    labels = list(labels) if labels is not None else None
    bar = tqdm(total=len(args), desc=desc or fn.__name__, unit="run", disable=not progress, leave=False)
    try:
        if pool is not None:
            return _collect(pool, fn, args, on_result, bar)
        if jobs > 1:
            own = new_pool(jobs)
            try:
                result = _collect(own, fn, args, on_result, bar)
            except BaseException:
                stop_pool(own)      # an interrupt or a failure: do not wait for running workers
                raise
            own.shutdown()
            return result
        out: list[Any] = [None] * len(args)
        for i, a in enumerate(args):
            if labels:
                bar.set_postfix_str(labels[i])
            out[i] = fn(*a)
            if on_result:
                on_result(i, out[i])
            bar.update()
        return out
    finally:
        bar.close()


def _collect(pool: ProcessPoolExecutor, fn, args, on_result, bar) -> list[Any]:
    out: list[Any] = [None] * len(args)
    pending = {pool.submit(fn, *a): i for i, a in enumerate(args)}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=pending.get):
                i = pending.pop(fut)
                out[i] = fut.result()
                if on_result:
                    on_result(i, out[i])
                bar.update()
    except BaseException:
        for fut in pending:
            fut.cancel()
        raise
    return out
