"""Retry storms, fast-forwarded: kubelet retries the API limiter is certain to refuse.

In a collapse the endpoint-create limiter's rate has adapted down to a trickle
and nearly every retry (one per pod every 10-15 s) is refused with HTTP 429
the moment it arrives; its DEL answers 404 at once. Such an attempt changes
nothing but counters: the refused token is given back, the 404 adds a zero
processing time. So a pod that got a 429 plans its next retries up to the
moment the limiter could next admit one (``admit_time``) and sleeps through
them in one event. Anything that could admit earlier (a higher rate or burst,
a token given back) or that moves the endpoint-delete limiter's slots wakes
it to plan again; such a change first *settles* the planned retries that came
before it, so every counter sees them in order. The result is the step-by-step
run's (a test runs both and compares); an hour of a 16Mi collapse takes about
1,900 SimPy steps instead of about 30,000 (13,400 refused ADDs are still
counted one by one, with their times, in each pod's history).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ctsim.kubelet import Pod, backoff
from ctsim.node import Node

MARGIN = 1e-6  # seconds: retries this close to admit_time are played out step by step


@dataclass
class Parked:
    pod: Pod
    last: float  # time of the pod's last attempt
    release: simpy.Event  # succeeded when the pod's next attempt is due
    times: deque[float] = field(default_factory=deque)  # planned refusals, ascending
    due: float = 0.0  # when the next attempt is not a certain refusal
    admit: float = -1.0  # the admit time the plan was made for


class Storm:
    """Keeps the parked pods' plans; one process releases each pod when a real attempt is due."""

    def __init__(self, node: Node, horizon: float) -> None:
        self.node = node
        self.horizon = horizon
        self.parked: dict[int, Parked] = {}
        self._kick = node.env.event()
        self._stale = False  # set by a change that calls for re-planning
        node.endpoint_create.storm = self
        node.endpoint_delete.storm = self
        node.env.process(self._keeper())

    def enabled_for(self, deadline: float) -> bool:
        """Exact only while an admitted request can never be cancelled waiting for its token."""
        return self.node.endpoint_create.core.params.max_wait < deadline

    def settle(self, now: float) -> None:
        """Accounts every planned refusal at or before ``now``."""
        n = 0
        for parked in self.parked.values():
            times = parked.times
            if times and times[0] <= now:
                n += self._settle_one(parked, now)
        self._count(n)

    def _settle_one(self, parked: Parked, now: float) -> int:
        """Moves one pod's refusals up to ``now`` into its history; returns how many."""
        times = parked.times
        n = 0
        for t in times:
            if t > now:
                break
            n += 1
        if not n:
            return 0
        settled = [times.popleft() for _ in range(n)]
        pod = parked.pod
        pod.attempts += n
        pod.failures.extend([(t, "429") for t in settled])
        drawn = pod.drawn
        for _ in range(n):
            drawn.popleft()  # each was drawn ahead when it was planned
        parked.last = settled[-1]
        return n

    def _count(self, n: int) -> None:
        """``n`` refused ADDs and their 404 DELs, in the counters and both limiters (order-free)."""
        if not n:
            return
        node, c = self.node, self.node.counters
        c.add_attempts += n
        c.add_429 += n
        c.del_calls += n
        c.del_404 += n
        node.endpoint_create.core.refused(n)
        node.endpoint_delete.core.passed_through(node.env.now, n)

    def before_change(self) -> tuple[float, bool]:
        """A limiter is about to change: the refusals before it happen first."""
        now = self.node.env.now
        if not self.parked:
            return (0.0, False)
        self.settle(now)
        return (self.node.endpoint_create.core.admit_time(now), self._room_for_a_404())

    def after_change(self, before: tuple[float, bool]) -> None:
        """Re-plan only if planned refusals may no longer be certain: a token sooner, or no room for a 404."""
        if not self.parked or self._stale:
            return
        admit_before, room_before = before
        now = self.node.env.now
        sooner = self.node.endpoint_create.core.admit_time(now) < admit_before
        if sooner or (room_before and not self._room_for_a_404()):
            self._stale = True
            self._kick.succeed()

    def _room_for_a_404(self) -> bool:
        delete = self.node.endpoint_delete
        weight = delete.core.weight()
        return not weight or delete._semaphore.has_room(weight)

    def _replan(self, parked: Parked, admit: float, room: bool) -> None:
        """Keeps the refusals that are still certain, adds the ones that now are; sets ``due``."""
        k, pod, times = self.node.time_scale, parked.pod, parked.times
        parked.admit = admit if room else -1.0
        if not room:
            times.clear()
        while times and times[-1] >= admit:
            times.pop()
        t = times[-1] if times else parked.last
        drawn, rng, horizon = pod.drawn, pod.rng, self.horizon
        while True:
            i = len(times)
            if len(drawn) <= i:
                drawn.append(backoff(rng))
            t_next = t + drawn[i] / k
            if not room or t_next >= admit or t_next >= horizon:
                parked.due = t_next
                return
            times.append(t_next)
            t = t_next

    def _keeper(self) -> Generator[simpy.Event, object, None]:
        env = self.node.env
        create = self.node.endpoint_create.core
        while True:
            if not self.parked:
                yield self._kick
                self._kick = env.event()
                continue
            # Re-plan: cut what a change made uncertain, extend where the next
            # token moved later. A plan made for this very admit time is kept.
            admit = create.admit_time(env.now) - MARGIN
            room = self._room_for_a_404()
            stale, self._stale = self._stale, False
            for parked in self.parked.values():
                if stale or parked.admit != admit:
                    self._replan(parked, admit, room)
            due = min(p.due for p in self.parked.values())
            kick = self._kick
            yield env.timeout(max(0.0, due - env.now)) | kick
            if kick.triggered:
                self._kick = env.event()
            self.settle(env.now)
            for index in [i for i, p in self.parked.items() if p.due <= env.now]:
                self.parked.pop(index).release.succeed()

    def ride(self, pod: Pod) -> Generator[simpy.Event, object, None]:
        """After a refused attempt that ended now: returns when the pod's next attempt is due."""
        env = self.node.env
        parked = Parked(pod, env.now, env.event())
        admit = self.node.endpoint_create.core.admit_time(env.now) - MARGIN
        self._replan(parked, admit, self._room_for_a_404())
        if parked.times:
            self.parked[pod.index] = parked
            if not self._kick.triggered:
                self._kick.succeed()
            yield parked.release
        else:
            yield env.timeout(parked.due - env.now)
        pod.take_backoff()
