"""The event engine: SimPy's environment with work deferred to the end of an instant.

The kernel arms thousands of timers a simulated second and reads the clock more often still, so
`Environment` works on SimPy's own queue: ``_queue`` (a heap of ``(time, priority, event id,
event)``), ``_eid`` (the id counter) and ``_now``. Those are private to SimPy; setup.cfg pins the
4.1 series, whose layout this module was written against (SimPy 4.1.1 and 4.1.2 have the same
`Environment`), and tests/test_core.py checks the engine's contract on whichever is installed.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush
from types import FunctionType
from typing import Callable

import simpy
from simpy.events import NORMAL


class Environment(simpy.Environment):
    """SimPy's environment with work deferred to the end of the current instant.

    ``at_instant_end(fn)`` runs ``fn`` once every event of the current simulated time has been
    processed, before time moves on (or the queue runs dry). The scheduler coalesces all the
    changes of one instant into one replan this way, without scheduling an event for it.
    ``now`` is a plain attribute kept equal to SimPy's clock (the kernel reads it thousands of
    times a simulated second; SimPy's is a property).
    """

    now: float = 0.0   # shadows simpy.Environment.now (a property): set wherever the clock moves

    def __init__(self, initial_time: float = 0):
        super().__init__(initial_time)
        self.now = self._now
        self._instant_end: list[Callable[[], None]] = []
        self.n_events = 0   # events processed (benchmarks count work in events)

    def at_instant_end(self, fn: Callable[[], None]) -> None:
        self._instant_end.append(fn)

    def call_in(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` ``delay_s`` from now, in order with SimPy's own events: a timer nothing
        waits on, queued bare - no event object - and stepped without SimPy's bookkeeping (the
        kernel arms thousands a simulated second)."""
        if delay_s < 0:
            raise ValueError(f"negative delay {delay_s}")
        if type(fn) is not FunctionType:
            fn = (lambda f=fn: f())   # step tells a bare timer from an event by its type
        heappush(self._queue, (self._now + delay_s, NORMAL, next(self._eid), fn))

    def advance_to(self, t_s: float) -> None:
        """Run every event before ``t_s`` and the current instant's deferred work, then move the
        clock to ``t_s`` (what ``run(until=t_s)`` does, without a stop event)."""
        queue = self._queue
        while (queue and queue[0][0] < t_s) or (self._instant_end and t_s > self._now):
            if queue and queue[0][0] < t_s:
                self.step()
            else:
                fns, self._instant_end = self._instant_end, []
                for fn in fns:
                    fn()
        if t_s > self._now:
            self._now = self.now = t_s

    @property
    def instant_busy(self) -> bool:
        """Is work deferred to the end of the current instant still to run?"""
        return bool(self._instant_end)

    def head(self):
        """The event or timer due next (None: nothing queued)."""
        return self._queue[0][3] if self._queue else None

    def queued(self):
        """``(time, event id, event or timer)`` of everything queued, in no particular order."""
        return ((t, eid, ev) for t, _, eid, ev in self._queue)

    def reschedule(self, event: simpy.Event, t_s: float) -> None:
        """Move a queued event (a process's sleep) to ``t_s``, later or earlier, but not into
        the past."""
        if t_s < self._now:
            raise ValueError(f"reschedule to {t_s} s, before now ({self._now} s)")
        queue = self._queue
        for i, entry in enumerate(queue):
            if entry[3] is event:
                queue[i] = queue[-1]
                queue.pop()
                heapify(queue)
                heappush(queue, (t_s, entry[1], next(self._eid), event))
                return
        raise ValueError("reschedule: the event is not queued")

    def end_instant(self) -> None:
        """Run the current instant's deferred work, unless an event of this instant is still
        queued (what `step` does first)."""
        queue = self._queue
        while self._instant_end and (not queue or queue[0][0] > self._now):
            fns, self._instant_end = self._instant_end, []
            for fn in fns:
                fn()

    def step(self) -> None:
        self.end_instant()
        queue = self._queue
        self.n_events += 1
        if queue and type(queue[0][3]) is FunctionType:
            # a kernel timer (`call_in`): nothing waits on it and it cannot fail, so SimPy's
            # bookkeeping (callback hand-over, failure checks) has nothing to do
            self._now, _, _, fn = heappop(queue)
            self.now = self._now
            fn()
            return
        if queue:
            self.now = queue[0][0]   # the event SimPy's step pops next, before its callbacks run
        super().step()
