"""Cilium's API rate limiter (``pkg/rate/api_limiter.go``, v1.16.5) on simulated time.

``wait()``'s order and AutoAdjust are ``ctsim.core.rate.LimiterCore``'s (see its
docstring); here a request waits for its slot (``ctsim.sim.semaphore``), its
token and its client's context on SimPy's clock, driven by callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from enum import Enum

import simpy
from simpy.events import PENDING

from ctsim.core.rate import (
    CANCELLED,
    GONE,
    REFUSED,
    REFUSED_PACED,
    WAIT_SEMAPHORE_RESOLUTION,
    APILimiterParameters,
    LimitedRequest,
    LimiterCore,
)
from ctsim.sim.clock import Deadline, fire_now, nothing_due_now, process_now, timeout_at
from ctsim.sim.latency import Latencies
from ctsim.sim.semaphore import ARRIVALS, WeightedSemaphore


class APILimiter:
    """One named limiter of the agent's ``APILimiterSet``, on SimPy time."""

    def __init__(self, env: simpy.Environment, name: str, params: APILimiterParameters) -> None:
        self.env = env
        self.core = LimiterCore(name, params)
        self.semaphore = WeightedSemaphore(WAIT_SEMAPHORE_RESOLUTION)
        self.granted_at = -1.0  # when a waiting call was last granted a slot (``parking`` asks)
        self.waits = Latencies()  # each admitted request's wait (``_wait_history_duration_seconds`` observes these)

    def has_room(self) -> bool:
        """A request scheduled now would get a slot at once."""
        weight = self.core.slot_weight
        return not weight or self.semaphore.has_room(weight)

    def answer_at_once(self) -> bool:
        """A request admitted and ended with ``Error()`` in no time (a DEL's 404), if a slot is free.

        Its slot would be taken and given back in the same instant, so only
        the counters change; False (nothing counted) when it would have to wait.
        """
        if not self.has_room():
            return False
        self.core.answered_at_once()
        self.waits.values.append(0.0)
        return True

    def call(self, ctx: simpy.Event, handler: Handler) -> Call:
        """An API call through ``wait()`` to ``handler``, as its client sees it (see ``Call``)."""
        return Call(self, ctx, handler)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        """``requestFinished`` (``Done`` or ``Error``): frees the slot; only success re-tunes."""
        lazy = self.semaphore.lazy
        if lazy is not None:
            lazy.settle()
        if self.core.finished(self.env.now, req, success) and req.weight:
            self.semaphore.release(req.weight)
        if lazy is not None:
            lazy.changed()


class CallState(Enum):
    """Where a call is: arrived, waiting for a slot or a token, sleeping before a paced 429, in the handler, ended."""

    NEW = "new"
    SEMAPHORE = "waiting for a slot"
    GRANTED = "granted a slot"
    PACED = "sleeping the mean processing time before a 429"
    TOKEN = "waiting for a token"
    TOKEN_TAKEN = "token taken"
    ADMITTED = "in the handler"
    ENDED = "ended"  # refused, cancelled, or gone: the slot (if any) is given back


# The members by name, for the hot paths (a module global is read faster than an Enum attribute on 3.11).
NEW, SEMAPHORE, GRANTED, PACED, TOKEN, TOKEN_TAKEN, ADMITTED, ENDED = CallState

Handler = Callable[[LimitedRequest], Generator[simpy.Event, object, object]]


class Call(simpy.Event):
    """One API call as its client sees it: the handler's ``wait()``, then the handler.

    It fires with the handler's finished process, or with why the client got
    no answer from it: REFUSED, REFUSED_PACED, CANCELLED (its context ended
    while the request waited in the limiter) or GONE (its context ended while
    the request was being admitted or handled; the handler goes on).

    Nothing runs in a handler while its request waits in the limiter, so the
    wait is driven by callbacks (the semaphore grant, the context,
    ``max_wait``, the token) rather than by a process and its conditions:
    such waits are most of a retry storm. A woken waiter goes on as many
    scheduler rounds after its releaser as a handler process would, so
    events at the same instant keep their order; a request that times out
    waiting for a slot tells its client at that instant.
    """

    __slots__ = (
        "_ctx",
        "_handler",
        "_token_at",
        "_token_limit",
        "abandoned",
        "limiter",
        "mean",
        "order",
        "req",
        "state",
        "weight",
    )

    def __init__(self, limiter: APILimiter, ctx: simpy.Event, handler: Handler) -> None:
        super().__init__(limiter.env)
        self.limiter, self._ctx, self._handler = limiter, ctx, handler
        self.state = NEW
        ctx.callbacks.append(self._ctx_done)  # type: ignore[union-attr]  # the client's `handler | ctx`
        self._arrive()

    @classmethod
    def queued(
        cls, limiter: APILimiter, ctx: simpy.Event, handler: Handler, order: tuple[float, int], weight: int, mean: float
    ) -> Call:
        """A call that arrived as ``order`` (time, number) and has waited for a slot since (a parked pod's).

        Its arrival was counted when it was played; its ``max_wait`` timer
        lands where the one set at arrival would have. The caller grants it a
        slot at once, or queues it and calls ``wait_for_slot``.
        """
        self = cls.__new__(cls)
        simpy.Event.__init__(self, limiter.env)
        self.limiter, self._ctx, self._handler = limiter, ctx, handler
        arrived_at = order[0]
        self.req, self.order = LimitedRequest(scheduled_at=arrived_at), order
        self.state, self.weight, self.abandoned, self.mean = SEMAPHORE, weight, False, mean
        ctx.callbacks.append(self._ctx_done)  # type: ignore[union-attr]
        max_wait = limiter.core.params.max_wait
        if max_wait > 0:
            timeout_at(limiter.env, arrived_at + max_wait).callbacks.append(self._max_wait_done)  # type: ignore[union-attr]
        return self

    def wait_for_slot(self) -> None:
        """A ``queued`` call goes on waiting in the semaphore: its client's deadline counts (as at arrival)."""
        max_wait = self.limiter.core.params.max_wait
        self._arm_ctx(self.req.scheduled_at + max_wait if max_wait > 0 else None)

    def _arm_ctx(self, refused_by: float | None = None) -> None:
        """Puts a ``Deadline`` context on the queue, unless ``max_wait`` refuses the request at ``refused_by`` first."""
        ctx = self._ctx
        if isinstance(ctx, Deadline) and (refused_by is None or ctx.at <= refused_by):
            ctx.arm()

    def _arrive(self) -> None:
        env, limiter, ctx = self.env, self.limiter, self._ctx
        core = limiter.core
        self.req = req = core.schedule(env.now)
        self.order = (env.now, next(ARRIVALS))
        if ctx.processed:
            self._refuse(CANCELLED)
            return
        if req.skip:
            self._arm_ctx()
            self._admit()
            return
        self.mean = core.mean_processing  # read when scheduled, as wait() does
        weight = core.slot_weight
        if weight and not limiter.semaphore.try_acquire(weight):
            self.state, self.weight, self.abandoned = SEMAPHORE, weight, False
            limiter.semaphore.enqueue(self)
            max_wait = core.params.max_wait
            if max_wait > 0:
                env.timeout(max_wait).callbacks.append(self._max_wait_done)  # type: ignore[union-attr]
            self._arm_ctx(env.now + max_wait if max_wait > 0 else None)
            return
        self._arm_ctx()
        req.weight = weight
        self._reserve()

    def granted(self) -> None:
        ctx = self._ctx
        self.limiter.granted_at = self.env.now
        # The request goes on: its client's deadline counts again. Without a token to wait for, the
        # request is admitted in this instant, and a deadline after it matters only if the handler waits.
        if self.limiter.core.bucket is not None or not isinstance(ctx, Deadline) or ctx.at <= self.env.now:
            self._arm_ctx()
        self.req.weight = self.weight
        self.state = GRANTED  # from here on, the context counts only while waiting for the token
        self._after_hops(2, lambda: self._reserve(woken=True))  # the grant, then the handler's select

    def _reserve(self, woken: bool = False) -> None:
        """``woken``: called last in a step whose event woke only this call (a hop); see ``_admit``."""
        env, core, req = self.env, self.limiter.core, self.req
        waited = env.now - req.scheduled_at
        limit = core.rate_limit
        delay, token_at = core.reserve(env.now)
        if core.too_late(delay, waited):
            core.cancel(env.now, token_at, limit)
            if self.mean > 0:
                self.state = PACED  # time.Sleep: holds the slot, ignores the context
                env.timeout(self.mean).callbacks.append(self._paced_done)  # type: ignore[union-attr]
                return
            core.refused()
            self._refuse(REFUSED)
            return
        if delay > 0:
            self.state, self._token_at, self._token_limit = TOKEN, token_at, limit
            if self._ctx.processed:
                self._leave_token()
                return
            env.timeout(delay).callbacks.append(self._token_done)  # type: ignore[union-attr]
            return
        self._admit(woken)

    def _ctx_done(self, _: simpy.Event) -> None:
        """The client gives up; a handler still waiting in the limiter gives back its place and errors."""
        if self.triggered:
            return
        if self.state is SEMAPHORE:
            self._fire_now(CANCELLED)
            if self.state is SEMAPHORE:  # the handler sees its context done: leaves the queue, errors out
                self.limiter.semaphore.abandon(self)
                self.state = ENDED
                self.limiter.finish(self.req, success=False)
        elif self.state is TOKEN:
            self._fire(CANCELLED)
            self._after_hops(1, self._leave_token)
        else:
            self._fire(GONE)

    def _leave_token(self) -> None:
        token_at, limit = self._token_at, self._token_limit
        self._leave(lambda: self.limiter.core.cancel(self.env.now, token_at, limit))

    def _leave(self, undo: Callable[[], None]) -> None:
        """The handler sees its context done: gives back its place and errors out (its client is gone)."""
        if self.state is SEMAPHORE or self.state is TOKEN:
            undo()
            self.state = ENDED
            self.limiter.finish(self.req, success=False)

    def _max_wait_done(self, _: simpy.Event) -> None:
        """No slot within ``max_wait``: 429, no token used; the client hears at once."""
        if self.state is not SEMAPHORE:
            return
        self.limiter.semaphore.abandon(self)
        self.limiter.core.refused()
        self.state = ENDED
        self.limiter.finish(self.req, success=False)
        self._drop_unarmed_ctx()
        self._fire_now(REFUSED)

    def _paced_done(self, _: simpy.Event) -> None:
        self.limiter.core.refused(paced=True)
        self._refuse(REFUSED_PACED)

    def _token_done(self, _: simpy.Event) -> None:
        if self.state is TOKEN:
            self.state = TOKEN_TAKEN
            self._after_hops(1, lambda: self._admit(woken=True), woken=True)

    def _admit(self, woken: bool = False) -> None:
        """Admitted: the handler goes on with its request at once; the client hears when it ends.

        ``woken``: this is the last thing a step does whose event woke only
        this call; unless another process is starting at this instant, the
        handler's start event would run next, so its first step runs here
        instead (``clock.process_now``).
        """
        self.state = ADMITTED
        env = self.env
        req = self.limiter.core.admitted(env.now, self.req)
        self.limiter.waits.values.append(env.now - req.scheduled_at)
        handler = self._handler(req)
        process = process_now(env, handler) if woken else env.process(handler)  # type: ignore[arg-type]
        process.callbacks.append(self._handled)  # type: ignore[union-attr]
        if self._ctx._value is PENDING and not process.triggered:  # a deadline left unarmed (``granted``),
            self._arm_ctx()  # and the handler waits (or has yet to start): its client may give up first

    def _handled(self, process: simpy.Event) -> None:
        if not self.triggered:
            self._drop_unarmed_ctx()
            self._fire(process)

    def _drop_unarmed_ctx(self) -> None:
        """A ``Deadline`` never armed will not fire: its callback to this call would only keep both alive.

        A run turns the cyclic collector off (``Model.run``).
        """
        ctx = self._ctx
        if ctx._value is PENDING and isinstance(ctx, Deadline):
            ctx.callbacks = None

    def _refuse(self, why: str) -> None:
        """The handler returns the error; its client hears it two hops later (process end, condition)."""
        self.state = ENDED
        self.limiter.finish(self.req, success=False)
        self._after_hops(1, lambda: self._handled_error(why))

    def _handled_error(self, why: str) -> None:
        if not self.triggered:
            self._fire(why)

    def _fire_now(self, value: object) -> None:
        """Fires and runs the callbacks at once, as ``Environment.step`` would a round later.

        Only for a request that leaves the semaphore's queue unserved: the
        events that end it (its client's context, its ``max_wait``) belong to
        this call alone, so nothing else waits on them.
        """
        fire_now(self, value)

    def _fire(self, value: object) -> None:
        self._ok, self._value = True, value
        self.env.schedule(self)

    def _after_hops(self, hops: int, then: Callable[[], None], woken: bool = False) -> None:
        """Runs ``then`` after ``hops`` rounds of the scheduler at the current instant.

        ``woken``: called last in a step whose event woke only this call (a
        hop of its own, its token's timer). A round with nothing else queued
        at this instant would be the very next step, running only this, so
        it is skipped, as ``clock.advance`` skips a timer: the same code at
        the same clock reading, one event shorter.
        """
        if woken:
            while hops and nothing_due_now(self.env):
                hops -= 1
        if hops == 0:
            then()
            return
        hop = simpy.Event(self.env)
        hop.callbacks.append(lambda _: self._after_hops(hops - 1, then, woken=True))  # type: ignore[union-attr]
        hop._ok, hop._value = True, None
        self.env.schedule(hop)
