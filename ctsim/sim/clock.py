"""When events fire: timers at an absolute simulated time, and events fired in the current step.

``env.timeout(delay)`` fires at ``env.now + delay``. A pod whose waits were
played without events (``ctsim.sim.parking``) re-enters the simulation later than
they began, and its timers must land on the very float the skipped
``timeout`` would have computed, or same-instant order could change. No
delay always does it: from now = 8.20284366197183, ``now + delay`` steps
from 61.686777718502114 straight to 61.68677771850213, past the
61.68677771850212 a pod's context deadline was. So the event goes on
SimPy's queue as ``Environment.schedule`` puts it there, keyed by the
instant itself (SimPy 4's queue holds ``(time, priority, id, event)``; the
version is pinned below 5 for it).

A process that the current event wakes alone may also skip an event that
would change nothing: when nothing else is queued before its timer would
fire (``advance``), or at this instant when it takes a free lock
(``ctsim.sim.lock``) or starts a process (``start_now``), no other event can run
in between, so the same code at the same clock reading is the same run, one
event shorter. A quiet day of GC passes costs its passes, not four events
each.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush

import simpy
from simpy.core import NORMAL, URGENT
from simpy.events import ProcessGenerator


def timeout_at(env: simpy.Environment, t: float) -> simpy.Event:
    """An event that fires exactly at ``t``, scheduled now (as a ``Timeout`` created now would be)."""
    if t < env.now:
        raise ValueError(f"{t} is before now ({env.now})")
    event = simpy.Event(env)
    event._ok, event._value = True, None  # triggered, as Timeout.__init__ makes itself
    heappush(env._queue, (t, NORMAL, next(env._eid), event))  # type: ignore[attr-defined]
    return event


def nothing_due_now(env: simpy.Environment) -> bool:
    """Nothing else is queued at this instant: what the running step schedules now runs next."""
    queue = env._queue  # type: ignore[attr-defined]
    return not queue or queue[0][0] > env._now  # type: ignore[attr-defined]


def advance(env: simpy.Environment, delay: float) -> bool:
    """Moves the clock by ``delay`` at once, as ``yield env.timeout(delay)`` would, if no event comes first.

    Only for a process the running event wakes alone (its own timer, a lock
    grant it alone waits on): then nothing else runs before the timeout
    would fire. (A scrub started inside create's step also may: what that
    step does after it cannot tell the clock moved; see ``ctsim.sim.endpoint``.)
    Returns False, changing nothing, when something is due by then; the
    caller then waits on a real timeout.
    """
    at = env._now + delay  # type: ignore[attr-defined]  # the float Timeout computes
    queue = env._queue  # type: ignore[attr-defined]
    if queue and queue[0][0] <= at:
        return False
    env._now = at  # type: ignore[attr-defined]
    return True


class Unwatched:
    """The environment a process nobody will ever wait on sees: its successful end needs no event.

    SimPy schedules a process's end so that its waiters wake a round later.
    With none, that event runs no callback when it is stepped, and the id it
    took leaves every other event's order as it was: dropping it is the same
    run, one event shorter (a pod's worker: 50 of a 50-pod run's ~850). A
    failed end is scheduled as ever, so the error still ends the run.
    ``Process._resume`` is the only user of a process's ``env`` here: it
    sets ``_active_proc`` (kept on this object: nothing in ctsim interrupts
    a process, the one reader) and calls ``schedule``.
    """

    __slots__ = ("_active_proc", "_env")

    def __init__(self, env: simpy.Environment) -> None:
        self._env = env
        self._active_proc: simpy.Process | None = None

    def schedule(self, event: simpy.Event, priority: int = NORMAL, delay: float = 0) -> None:
        if event._ok and not event.callbacks:  # type: ignore[attr-defined]
            event.callbacks = None  # processed: a late ``yield`` of it would go straight on
            return
        self._env.schedule(event, priority, delay)


def process_after(
    env: simpy.Environment, delay: float, generator: ProcessGenerator, unwatched: bool = False
) -> simpy.Process:
    """``env.process`` of a generator whose first step is ``yield env.timeout(delay)``, less its start event.

    The process waits on the timeout from the start. Call it where that
    process's ``Initialize`` would have run (``start_processes``): the
    timeout then takes the same place among events, and the process wakes
    at it exactly as it would have. ``unwatched``: nobody keeps the process
    to wait on it, so it ends without an event (``Unwatched``).
    """
    timer = env.timeout(delay)
    process = _waiting_on(env, generator, timer)
    if unwatched:
        process.env = Unwatched(env)  # type: ignore[assignment]
    timer.callbacks.append(process._resume)  # type: ignore[union-attr,attr-defined]
    return process


def _waiting_on(env: simpy.Environment, generator: ProcessGenerator, target: simpy.Event) -> simpy.Process:
    """A process for ``generator`` that waits on ``target``, made without the ``Initialize`` event."""
    process = simpy.Process.__new__(simpy.Process)
    process.env, process.callbacks = env, []
    process._generator, process._target = generator, target  # type: ignore[attr-defined]
    return process


def starts_next(env: simpy.Environment) -> bool:
    """A process made now would start next: no other urgent event (a start) is queued at this instant.

    ``Initialize`` is urgent, so it runs before every normal event at its
    instant, after only the urgent ones queued before it.
    """
    queue = env._queue  # type: ignore[attr-defined]
    return not queue or queue[0][0] > env._now or queue[0][1] != URGENT  # type: ignore[attr-defined]


def start_now(env: simpy.Environment, generator: ProcessGenerator) -> simpy.Process:
    """``env.process(generator)`` whose first step runs now, in this step, not at its ``Initialize`` event.

    Only where that event would run next (``starts_next``), in a step whose
    event woke the caller alone, and where nothing the step does after it
    can see what the first step did: called last, or followed only by steps
    on other resources.
    """
    start = simpy.Event(env)
    start._ok, start._value = True, None  # what Initialize carries
    process = _waiting_on(env, generator, start)
    process._resume(start)  # type: ignore[attr-defined]
    return process


def process_now(env: simpy.Environment, generator: ProcessGenerator) -> simpy.Process:
    """``env.process``, its first step run now (``start_now``) unless another start is queued first.

    The caller's step must meet ``start_now``'s other conditions.
    """
    return start_now(env, generator) if starts_next(env) else env.process(generator)


def start_processes(env: simpy.Environment, start: Callable[[], None]) -> None:
    """Runs ``start`` where ``Initialize`` events made now would run: one event for many processes.

    Processes made one after another start one after another, each with
    its own ``Initialize`` event (urgent, at this instant); ``start`` runs in
    that same place and makes them with ``process_after``, whose timeouts
    are then made in the order theirs would have been.
    """
    event = simpy.Event(env)
    event.callbacks.append(lambda _: start())  # type: ignore[union-attr]
    event._ok, event._value = True, None
    env.schedule(event, URGENT)


def fire_now(event: simpy.Event, value: object) -> None:
    """Fires ``event`` and runs its callbacks at once, inside the step that is running.

    For an event only its own waiter watches, whose waiter would have
    woken in this very step had it waited on the event that caused it.
    """
    event._ok, event._value = True, value
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks or ():
        callback(event)


def any_of(env: simpy.Environment, a: simpy.Event, b: simpy.Event) -> simpy.Event:
    """``a | b`` (SimPy's ``AnyOf``) for one waiter, one event shorter where it may be.

    The condition's own event runs a round after the first of the two
    fires, then wakes its waiter. Where that first event's callback to it
    is its last, and nothing else is queued at this instant, that round is
    the very next step; the waiter is then woken inside this one instead
    (as ``fire_now``): the same code at the same clock reading, with no
    event between. Its value is None: the waiter reads ``a`` and ``b``.
    """
    done = simpy.Event(env)
    if a.callbacks is None or b.callbacks is None:  # one has run already: AnyOf fires a round later
        done.succeed()
        return done
    lists = (a.callbacks, b.callbacks)

    def first(event: simpy.Event) -> None:
        fired = lists[0] if event is a else lists[1]
        other = lists[1] if event is a else lists[0]
        if first in other:
            other.remove(first)  # AnyOf's own check would do nothing there now
        if not event._ok:  # type: ignore[attr-defined]
            event._defused = True  # type: ignore[attr-defined]
            done.fail(event._value)  # type: ignore[arg-type]
        elif fired[-1] is first and nothing_due_now(env):
            fire_now(done, None)
        else:
            done.succeed()

    lists[0].append(first)
    lists[1].append(first)
    return done


class Deadline(simpy.Event):
    """A timeout at ``at`` that may never be needed: its place among events at that instant is taken now.

    It takes its event id when made, as ``env.timeout`` would, but goes on
    SimPy's queue only when ``arm``ed, so a deadline that cannot matter
    costs no event: an ADD's 90 s context while its request waits for a
    slot that ``max_wait`` will refuse first.
    """

    def __init__(self, env: simpy.Environment, at: float) -> None:
        super().__init__(env)
        self.at = at
        self._id = next(env._eid)  # type: ignore[attr-defined]

    def arm(self) -> None:
        if not self.triggered:
            if self.at < self.env.now:
                raise ValueError(f"a deadline at {self.at} armed at {self.env.now}")
            self._ok, self._value = True, None
            heappush(self.env._queue, (self.at, NORMAL, self._id, self))  # type: ignore[attr-defined]
