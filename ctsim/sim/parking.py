"""Parked pods: a retry storm's refusals played on demand instead of as events.

In a collapse most pods do nothing but wait: ADD queues in endpoint-create's
semaphore until ``max_wait`` refuses it (429), the teardown's DEL queues in
endpoint-delete's until containerd's 60 s run out (or is answered 404 at once
when a slot is free), back-off, again. While endpoint-create has no free slot
every step of that loop is known from the pod's own random draws and the two
semaphores' state, which changes only at real events (a slot taken or freed).
So such a pod is *parked*: its steps are played, in time order, only when
something is about to change that state, and with the state they saw. A
parked pod is made a real process again (``Resume``) where it is: when a
slot is granted to one of its queued calls; when endpoint-create has a free
slot at its next step (a timer wakes it); or, all at once, when either
limiter's slot weight changes.

Nothing else differs: the same draws, the same counters, the same floats;
``tests/sim/test_parking.py`` holds every run equal to playing each step as
events (``Model(parking=False)``). Same-instant order is kept two ways.
Every arrival in a limiter, real or played, is numbered (``ARRIVALS``), so
waiters that came at one instant merge in the order they came. And a pod
parks only where every step it will play falls on its own instants (see
``park``): events sharing an instant are ordered by SimPy's event ids, which
a played step has none of.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from enum import Enum
from heapq import heappop, heappush
from typing import NamedTuple

import simpy

from ctsim.sim.clock import fire_now, timeout_at
from ctsim.sim.cni import Arrived, add_call, del_call
from ctsim.sim.endpoint import Sandbox, has_endpoint
from ctsim.sim.limiter import Call
from ctsim.sim.node import Node
from ctsim.sim.pod import ADD, BACK_OFF, BACKOFF, BACKOFF_JITTER, DEL_AFTER_ADD, DEL_STALE, Pod, Step, backoff, jitter
from ctsim.sim.semaphore import ARRIVALS, Waiter

WAIT = BACK_OFF  # a parked pod's phase while it backs off until ``t``; then ``step``
CREATE, DELETE = "endpoint-create", "endpoint-delete"  # the lazy queues
CROWD = 200  # pods parked or waiting for a create slot: more than 4 slots of ~2 s each serve within max_wait


class _Latest(Enum):
    """``Parked.sandbox`` of a played ADD: its sandbox, made only when read (most are refused unread)."""

    SANDBOX = "the pod's latest"


LATEST = _Latest.SANDBOX


def _limiter(phase: Step) -> str:
    """The limiter a pod in ``phase`` (a step other than WAIT) is queued in."""
    return CREATE if phase is ADD else DELETE


class Resume(NamedTuple):
    """Where a parked pod's process picks up, at the instant it does: its next step, or inside ``call``."""

    step: Step
    stale: Sandbox | None
    sandbox: Sandbox | None
    call: Call | None = None


@dataclass(slots=True, eq=False)
class Parked:
    """A parked pod's position: in back-off, or with a call queued in a limiter since ``arrived``.

    ``t`` is when its next step that depends on the limiters comes: the end
    of its back-off, or endpoint-create's refusal of its queued ADD. A DEL
    queued in endpoint-delete is refused at ``end`` by containerd whatever
    the limiters do, so that timeout and the back-off after it are folded
    into ``t`` (the next DEL), and played (``_time_out``) when the pod is
    next looked at.
    """

    pod: Pod
    event: simpy.Event  # what its process waits on
    stale: Sandbox | None
    phase: Step  # WAIT, ADD (queued in endpoint-create) or a DEL step (queued in endpoint-delete)
    step: Step  # the step after a WAIT
    t: float
    key: int = 0  # this position's entries in the heap and queues; older ones are dropped unread
    sandbox: Sandbox | _Latest | None = None  # LATEST: ``Sandbox(pod.index, pod.attempts)``, made when read
    arrived: float = 0.0  # when its queued call reached the limiter
    number: int = 0  # and its arrival number (``limiter.ARRIVALS``)
    end: float = 0.0  # when its queued DEL gives up (containerd's timeout; an ADD's refusal is ``t``)
    weight: int = 0  # the slot weight it was given then
    mean: float = 0.0  # the mean processing time it read then

    def own_sandbox(self) -> Sandbox | None:
        """The sandbox of its latest ADD (none before its first)."""
        sandbox = self.sandbox
        if sandbox is LATEST:
            self.sandbox = sandbox = Sandbox(self.pod.index, self.pod.attempts)  # its attempts change only at an ADD
        return sandbox


class Parking:
    """All parked pods of a node, and both limiters' lazy queues."""

    def __init__(self, node: Node, deadline_s: float) -> None:
        self.node, self.env, self.deadline_s = node, node.env, deadline_s
        self.create, self.delete = node.endpoint_create, node.endpoint_delete
        self.teardown_s = node.teardown_seconds
        self.max_wait = self.create.core.params.max_wait
        self.parked: dict[int, Parked] = {}  # by pod index
        self._due: list[tuple[float, int, Parked]] = []  # (t, key, pod): back-offs and queued DELs
        # Parked calls in each limiter's semaphore, in arrival order (steps are played in time order).
        self._queued: dict[str, deque[tuple[float, int, Parked]]] = {CREATE: deque(), DELETE: deque()}
        # Queued ADDs are their own refusals: max_wait after arrival, so in arrival order. One deque, kept out of
        # the heap (half of a storm's steps), merged with it by (t, key), the heap's own order; a refusal played
        # leaves endpoint-create's queue with it.
        self._refusals = self._queued[CREATE]
        self._keys = itertools.count(1)
        self._time_scale = node.time_scale
        self._weights = (self.create.core.slot_weight, self.delete.core.slot_weight)
        self.create.semaphore.lazy = _LazyQueue(self, CREATE)
        self.delete.semaphore.lazy = _LazyQueue(self, DELETE)
        self._wake_at: float | None = None
        self._unnumbered: list[Parked] = []  # ADDs played at a grant, numbered once this instant's arrivals are
        # What ``settle`` reads on every call and that never changes (a figure's array keeps its identity).
        latency = node.latency
        self._fixed = (
            self._keys,
            node.retry_intervals.append,
            self._queued[DELETE],
            self.teardown_s,
            self._time_scale,
            self.max_wait,
            latency.cni_add.values.append,
            latency.cni_del.values.append,
        )
        # How parking went (tests, benchmarks); ``answered``: grants answered without a process.
        self.parks = self.unparks = self.wakes = self.crowd_parks = self.answered = 0

    @staticmethod
    def applies(node: Node, deadline_s: float) -> bool:
        """Refusals can be played ahead: ADD's are max_wait's 429s, DEL's end only when containerd gives up."""
        if node.api is not None:  # an agent that starts: calls wait on its API first
            return False
        create, delete = node.endpoint_create.core.params, node.endpoint_delete.core.params
        return 0 < create.max_wait < deadline_s and not delete.max_wait

    def worth_it(self, pod: Pod) -> bool:
        """Parking pays: the pod has failed once, or a crowd waits (where first tries are mostly refused).

        Parked or not, a run is the same; a pod whose tries are served soon
        after would only be parked to be taken back, at more cost than its
        events. Instructions over bench_sweep.py's grids, parking from the
        first failure against the second: collapse -4.0 %, mixed -2.7 %,
        non-collapsing +0.8 %; parking every pod: -7.4 %, -4.0 %, +5.6 %.
        """
        return pod.failures > 0 or len(self.parked) + self.create.semaphore.waiting >= CROWD

    def admits(self, torn_down_next: Sandbox | None) -> bool:
        """The pod may park now: until endpoint-create has a free slot, its steps can only be refused.

        ``torn_down_next`` is the sandbox its next DEL would tear down: one
        with an endpoint would scrub, so that pod stays a process.
        """
        weight = self.create.core.slot_weight
        if not weight or self._create_has_room():
            return False  # an ADD could be admitted
        if torn_down_next is not None and has_endpoint(torn_down_next):
            return False
        c, d = self.create.core, self.delete.core
        if c.requests_scheduled < c.params.skip_initial or d.requests_scheduled < d.params.skip_initial:
            return False  # a request could still skip the limiter
        if not self.parked:  # the slot weights every parked step is played with
            self._weights = (weight, d.slot_weight)
        return bool(self._weights[1])

    def park(self, pod: Pod, stale: Sandbox | None, sandbox: Sandbox | None, at: float, step: Step) -> simpy.Event:
        """Parks a pod from now until it wakes up for ``step`` at ``at``; its process waits for a Resume.

        A pod parks at a back-off; at a step due now that its own jittered
        timer (its start, a back-off) brought it to; or at its teardown's
        DEL, played in its own turn, which is answered at once or ends at
        containerd's timeout before a back-off. From there every step it
        plays falls on its own instants, shared with no other event. A pod
        that reached an ADD through others (a cascade of grants at one
        release admits and queues many ADDs at once) would share its later
        steps' instants with theirs, in an order set by event ids: it stays
        a process.
        """
        assert step is not WAIT  # ``settle`` plays a parked WAIT's step as an ADD or a DEL
        p = Parked(pod=pod, event=simpy.Event(self.env), stale=stale, phase=WAIT, step=step, t=at, sandbox=sandbox)
        self.parked[pod.index] = p
        self.parks += 1
        self.crowd_parks += not pod.failures
        if at <= self.env.now:  # its step is due now: played with the limiters as they are, after all before it
            self.settle(first=p)
        else:
            p.key = key = next(self._keys)
            heappush(self._due, (at, key, p))
        return p.event

    def settle(self, first: Parked | None = None) -> None:
        """Plays every parked step before now, in time order, on the state the limiters have now; then ``first``.

        Most of a storm's steps are played here, so the loop is ``kubelet.pod_worker``'s
        and ``cni``'s steps written out once, with the counters summed in locals: nothing
        reads them until it returns, and nothing played here changes a limiter's state
        (``delete_room`` is the same for every step).
        """
        due, refusals, now = self._due, self._refusals, self.env._now  # type: ignore[attr-defined]
        if first is None and (not due or due[0][0] >= now) and (not refusals or refusals[0][0] >= now):
            return
        keys, retry_interval, queued_delete, teardown_s, time_scale, max_wait, add_latency, del_latency = self._fixed
        limited_404 = not self.node.delete_404_first  # up to 1.17 a missing endpoint's 404 takes a slot
        delete_room = not limited_404 or self.delete.has_room()
        create, delete = self.create.core, self.delete.core
        create_weight, delete_weight = self._weights
        create_mean, delete_mean = create.mean_processing, delete.mean_processing
        # Counted here; the rest follows from them: every ADD played is scheduled in endpoint-create, every DEL
        # is a 404 at once or queued, and a 404 at once is scheduled and answered where it takes a slot.
        add_429 = attempts = del_404 = del_queued = timeouts = 0
        while True:
            if refusals and refusals[0][0] < now and (not due or refusals[0] < due[0]):
                t, key, p = refusals.popleft()
                if p.key != key:
                    continue
            elif due and due[0][0] < now:
                t, key, p = heappop(due)
                if p.key != key:
                    continue
            elif first is not None:
                p, first = first, None
                t = p.t
            else:
                break
            pod, phase = p.pod, p.phase
            if phase is ADD:  # max_wait: 429, no token used; the teardown's DEL at once
                add_429 += 1
                add_latency(t - p.arrived)
                pod.failures += 1
                if delete_room:  # the storm's own loop: 404 at once, a back-off, then the next sync
                    del_404 += 1
                    p.phase, p.step = WAIT, DEL_STALE if p.stale is not None else ADD
                    p.t = t = t + BACKOFF * (1.0 + pod.rng.random() * BACKOFF_JITTER) / time_scale  # ``backoff``
                    p.key = key = next(keys)
                    heappush(due, (t, key, p))
                    continue
                step = DEL_AFTER_ADD
            elif phase is WAIT:
                step = p.step
            else:  # ``_time_out``: containerd gave up on the queued DEL at ``p.end``
                timeouts += 1
                del_latency(p.end - p.arrived)
                if phase is DEL_AFTER_ADD:
                    p.stale = p.own_sandbox()
                pod.stale_sandbox = True
                pod.rng.random()  # the back-off drawn (peeked) when the DEL was queued
                step = DEL_STALE
            if step is not ADD:  # a DEL: answered 404 at once, or queued until containerd gives up
                if not delete_room:
                    del_queued += 1
                    p.phase, p.arrived, p.number, p.end = step, t, next(ARRIVALS), (end := t + teardown_s)
                    p.t = t = end + jitter(pod.rng.peek()) / time_scale
                    p.mean, p.weight = delete_mean, delete_weight
                    p.key = key = next(keys)
                    heappush(due, (t, key, p))
                    queued_delete.append((end, key, p))
                    continue
                del_404 += 1  # no endpoint: 404 at once
                if step is DEL_AFTER_ADD:  # a back-off; then the next sync
                    p.phase, p.step = WAIT, DEL_STALE if p.stale is not None else ADD
                    p.t = t = t + BACKOFF * (1.0 + pod.rng.random() * BACKOFF_JITTER) / time_scale  # ``backoff``
                    p.key = key = next(keys)
                    heappush(due, (t, key, p))
                    continue
                p.stale, pod.stale_sandbox = None, False
            # ADD, queued: endpoint-create has no free slot while anyone is parked
            if pod.attempts:
                retry_interval(t - pod.last_attempt_at)
            pod.attempts += 1
            pod.last_attempt_at = t
            attempts += 1
            p.phase, p.sandbox, p.arrived, p.number, p.t = ADD, LATEST, t, next(ARRIVALS), (end := t + max_wait)
            p.mean, p.weight = create_mean, create_weight
            p.key = key = next(keys)
            refusals.append((end, key, p))
        answered = del_404 if limited_404 else 0  # scheduled and processed at once (``answer_at_once``)
        c = self.node.counters
        c.add_429 += add_429
        c.add_attempts += attempts
        c.del_calls += del_404 + del_queued
        c.del_404 += del_404
        c.del_timeouts += timeouts
        create.rejected += add_429  # ``refused()``
        create.requests_scheduled += attempts  # ``schedule_played()``
        delete.requests_scheduled += del_queued + answered
        delete.requests_processed += answered  # ``answered_at_once()``
        # Each 404 at once was a DEL of no time, and each one the limiter answered a wait of none: counted.
        self.node.latency.cni_del.zeros += del_404
        self.delete.waits.zeros += answered

    def finish(self) -> None:
        """At the end of a run: every step before now played, every DEL refused by now counted."""
        self.settle()
        now = self.env.now
        for p in self.parked.values():
            if p.phase is not WAIT and p.phase is not ADD and p.end < now:
                self._time_out(p)

    def _time_out(self, p: Parked) -> None:
        """containerd gave up on the queued DEL at ``p.end``: the sandbox stays; back-off until ``p.t``."""
        self.node.counters.del_timeouts += 1
        self.node.latency.cni_del.add(p.end - p.arrived)
        if p.phase is DEL_AFTER_ADD:
            p.stale = p.own_sandbox()
        p.pod.stale_sandbox = True
        p.pod.rng.random()  # the back-off drawn (peeked) when the DEL was queued
        p.phase, p.step = WAIT, DEL_STALE

    def first(self, queue: str) -> tuple[tuple[float, int], int] | None:
        """The earliest parked call still waiting in ``queue``'s semaphore: (its order, weight)."""
        if self._unnumbered and queue == CREATE:
            self._number()
        waiting, now = self._queued[queue], self.env.now
        while waiting:
            end, key, p = waiting[0]
            if p.key == key and end >= now:
                return (p.arrived, p.number), p.weight
            waiting.popleft()
        return None

    def take(self, queue: str) -> Call | None:
        """The earliest parked call queued in ``queue``'s limiter, granted a slot now: its pod resumes.

        None where the grant is answered in this instant and the pod stays
        parked (``_answered_at_grant``): the slot is free again.
        """
        _, _, p = self._queued[queue].popleft()
        if queue == DELETE and self._answered_at_grant(p):
            return None
        call = self._resume(p)
        assert call is not None
        return call  # granted at once: it never waits for a slot again (no ``wait_for_slot``)

    def _answered_at_grant(self, p: Parked) -> bool:
        """A parked DEL granted a slot is answered 404, and its pod's next step played, without a process.

        As a process the DEL would be admitted two hops later, answered
        404 (no endpoint: ``delete_endpoint_handler``), give its slot to the
        next waiter, and its pod would go on at this instant: from a stale
        sandbox's DEL to a new ADD, which queues (endpoint-create has no free
        slot); from the teardown's DEL to a back-off, which parks. The grants
        of one release form a cascade at one instant, each granted when the
        one before gives back its slot, so their ADDs arrive in grant order,
        and ``max_wait`` refuses them together, at one later instant, in that
        order. Played here, they are keyed in grant order, so ``settle``
        refuses them in the same one. A process's ADD at this instant comes
        first, though: the pod whose DEL freed the slot, torn down, sends its
        ADD two hops after the release, before the first granted DEL has
        been answered. So the played ADDs take their arrival numbers only
        when one is next read (``_number``): a create slot granted, or the
        pod taken back, after that ADD.

        That holds only where nothing but parked DELs shares the cascade:
        no process granted an endpoint-delete slot at this instant and none
        queued for one (its ADD would arrive, and be refused, between played
        ones, or after them when played ones came first), the slot weights
        unchanged (a re-tune at this release unparks every pod in pod
        order), no token to wait for, and the DEL's context not ending now.
        Else the pod resumes as a process and the grant goes on as events.
        """
        now = self.env.now
        delete = self.delete
        sandbox = p.stale if p.phase is DEL_STALE else p.own_sandbox()
        if (
            delete.core.bucket is not None
            or delete.granted_at == now
            or delete.semaphore.waiting
            or p.end <= now
            or (sandbox is not None and has_endpoint(sandbox))
            or (self.create.core.slot_weight, delete.core.slot_weight) != self._weights
            or self._create_has_room()
        ):
            return False
        self.answered += 1
        pod, counters = p.pod, self.node.counters
        delete.core.requests_processed += 1  # admitted and ended with Error(): in flight for no time
        counters.del_404 += 1
        delete.waits.add(now - p.arrived)
        self.node.latency.cni_del.add(now - p.arrived)
        if p.phase is DEL_STALE:  # torn down: a new sandbox's ADD at once (``kubelet.pod_worker``)
            p.stale, pod.stale_sandbox = None, False
            if pod.attempts:
                self.node.retry_intervals.append(now - pod.last_attempt_at)
            pod.attempts += 1
            pod.last_attempt_at = now
            p.sandbox = LATEST
            counters.add_attempts += 1
            create = self.create.core
            create.requests_scheduled += 1  # ``schedule_played()``
            p.phase, p.arrived, p.t = ADD, now, (end := now + self.max_wait)
            p.mean, p.weight, p.number = create.mean_processing, create.slot_weight, -1
            self._unnumbered.append(p)
            p.key = key = next(self._keys)
            self._refusals.append((end, key, p))
        else:  # the teardown's DEL: a back-off, then the next sync
            p.phase, p.step = WAIT, DEL_STALE if p.stale is not None else ADD
            p.t = t = now + backoff(pod.rng) / self._time_scale
            p.key = key = next(self._keys)
            heappush(self._due, (t, key, p))
        return True

    def _number(self) -> None:
        """Arrival numbers for the ADDs played at grants, in grant order (see ``_answered_at_grant``).

        One that ``settle`` has played on since (refused, a DEL queued with
        a number of its own) keeps what it has.
        """
        for p in self._unnumbered:
            if p.number < 0:
                p.number = next(ARRIVALS)
        self._unnumbered.clear()

    def changed(self) -> None:
        """After a request finished: new slot weights end all parking; a free endpoint-create slot wakes pods.

        While endpoint-create has a free slot, an ADD could be admitted, so
        a parked pod must be a process again before its next step: a timer
        wakes it then. The slot is most often taken again at the same
        instant, and then nobody wakes.
        """
        if not self.parked:
            return
        weights = (self.create.core.slot_weight, self.delete.core.slot_weight)
        if weights != self._weights:
            self.unpark_all()
        elif self._create_has_room():
            self._arm()

    def _create_has_room(self) -> bool:
        semaphore = self.create.semaphore
        return semaphore.size - semaphore.cur >= self.create.core.slot_weight

    def _next(self) -> Parked | None:
        """The parked pod whose next step comes first (dropping positions it has left)."""
        due, refusals = self._due, self._refusals
        while due and due[0][2].key != due[0][1]:
            heappop(due)
        while refusals and refusals[0][2].key != refusals[0][1]:
            refusals.popleft()
        if refusals and (not due or refusals[0] < due[0]):
            return refusals[0][2]
        return due[0][2] if due else None

    def _arm(self) -> None:
        p = self._next()
        if p is None or (self._wake_at is not None and self._wake_at <= p.t):
            return
        self._wake_at = p.t
        timeout_at(self.env, p.t).callbacks.append(self._wake)  # type: ignore[union-attr]

    def _wake(self, event: simpy.Event) -> None:
        """A parked pod's step is due while endpoint-create may have a free slot: it goes on as a process."""
        if self._wake_at != self.env.now:
            return  # superseded by an earlier wake
        self._wake_at = None
        if not self._create_has_room():
            return  # taken again since: parked steps are refused as before
        self.wakes += 1
        now = self.env.now
        while (p := self._next()) is not None and p.t <= now:
            call = self._resume(p)  # its entry is left behind: ``_next`` drops it
            if call is not None:
                call.wait_for_slot()
                self.create.semaphore.requeue([call])
        self._arm()

    def unpark_all(self) -> None:
        """Every parked pod a process again, where it is; queued calls join their semaphore's queue."""
        self.settle()
        self.unparks += 1
        waiting: dict[str, list[Waiter]] = {CREATE: [], DELETE: []}
        for p in sorted(self.parked.values(), key=lambda p: p.pod.index):
            call = self._resume(p)
            if call is not None:
                call.wait_for_slot()
                waiting[_limiter(p.phase)].append(call)
        self._due.clear()
        for queue, calls in waiting.items():
            self._queued[queue].clear()
            if calls:
                (self.create if queue == CREATE else self.delete).semaphore.requeue(calls)

    def _resume(self, p: Parked) -> Call | None:
        """Makes ``p``'s pod a process again where it is now; returns its call if one is queued."""
        if p.number < 0:
            self._number()
        del self.parked[p.pod.index]
        p.key = 0
        if p.phase is not WAIT and p.phase is not ADD and p.end < self.env.now:
            self._time_out(p)
        if p.phase is WAIT:
            resume = Resume(p.step, p.stale, p.own_sandbox())
            if p.t > self.env.now:  # its back-off's own timer: the pod goes on in that step, as it would have
                timeout_at(self.env, p.t).callbacks.append(lambda _: fire_now(p.event, resume))  # type: ignore[union-attr]
            else:
                p.event.succeed(resume)
            return None
        sandbox = p.stale if p.phase is DEL_STALE else p.own_sandbox()
        assert sandbox is not None
        arrived = Arrived((p.arrived, p.number), p.weight, p.mean)
        if p.phase is ADD:
            call = add_call(self.node, sandbox, self.deadline_s, arrived)
        else:
            call = del_call(self.node, sandbox, arrived)
        # The pod waits on its call again: it wakes in the step the call ends, as its process would have.
        resume = Resume(p.phase, p.stale, p.own_sandbox(), call=call)
        call.callbacks.append(lambda _: fire_now(p.event, resume))  # type: ignore[union-attr]
        return call


class _LazyQueue:
    """One limiter's view of the parked pods (``limiter.LazyQueue``)."""

    def __init__(self, parking: Parking, queue: str) -> None:
        self.parking, self.queue = parking, queue

    def settle(self) -> None:
        self.parking.settle()

    def first(self) -> tuple[tuple[float, int], int] | None:
        return self.parking.first(self.queue)

    def take(self) -> Waiter | None:
        return self.parking.take(self.queue)

    def changed(self) -> None:
        self.parking.changed()
