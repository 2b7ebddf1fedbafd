"""kubelet's pod worker: create a sandbox, and on failure retry with a new one.

Sandbox failures are retried after ``wait.Jitter(10s, 0.5)`` = 10–15 s with no
exponential growth (``pod_workers.go``); each retry is a new sandbox and a new
CNI ADD. A sandbox whose teardown timed out is torn down again first by the
next sync (``kuberuntime_manager.go`` ``SyncPod``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

import simpy

from ctsim.sim.cni import AddOutcome, cni_add, cni_del
from ctsim.sim.endpoint import Sandbox
from ctsim.sim.limiter import Call
from ctsim.sim.node import Node
from ctsim.sim.parking import Parking, Resume
from ctsim.sim.pod import ADD, BACK_OFF, DEL_AFTER_ADD, DEL_STALE, Pod, Step, backoff

_ADD_OK = AddOutcome.OK  # a module global: read faster than the Enum attribute on 3.11


def pod_worker(
    node: Node, pod: Pod, deadline_s: float, parking: Parking | None = None
) -> Generator[simpy.Event, object, None]:
    """One pod's sync loop from its first ADD: on failure containerd's DEL, back-off, a new sandbox.

    It is started at ``pod.created_at`` (``clock.process_after``).

    A sandbox whose DEL timed out is torn down first at the next sync; once
    it is, the new sandbox's ADD follows at once. With ``parking``, steps that
    can only be refused are handed to it (``ctsim.sim.parking``): from a back-off,
    a step its own timer (its start, a back-off) brought it to, or the
    teardown's DEL; the loop picks up where parking leaves the pod.
    """
    env = node.env
    stale: Sandbox | None = None  # a sandbox whose teardown timed out
    sandbox: Sandbox | None = None  # this attempt's
    call: Call | None = None  # a call already waiting in the limiter (a pod coming back from parking)
    step = ADD
    own_timer = True  # this instant came from the pod's own jittered timer: no other event shares it
    while True:
        # A step due now is played at once, in this process's turn. It parks the pod only if what follows
        # from it comes at the pod's own instants: its own timer brought it here, or it is the teardown's
        # DEL, which is answered at once or ends in containerd's timeout and a back-off.
        if (
            parking is not None
            and call is None
            and (own_timer or step is DEL_AFTER_ADD)
            and parking.worth_it(pod)
            and parking.admits(sandbox if step is DEL_AFTER_ADD else stale)
        ):
            step, stale, sandbox, call = yield from _parked(parking, pod, stale, sandbox, env.now, step)
            own_timer = False
            continue
        own_timer = False
        if step is BACK_OFF:
            delay = backoff(pod.rng) / node.time_scale
            step = DEL_STALE if stale is not None else ADD
            if parking is None or not parking.worth_it(pod) or not parking.admits(stale):
                yield env.timeout(delay)
                own_timer = True
                continue
            step, stale, sandbox, call = yield from _parked(parking, pod, stale, sandbox, env.now + delay, step)
            continue
        if step is DEL_STALE:
            assert stale is not None
            torn_down = yield from cni_del(node, stale, call)
            call = None
            pod.stale_sandbox = not torn_down
            if torn_down:
                stale, step = None, ADD
            else:
                step = BACK_OFF
        elif step is ADD:
            if call is None:
                if pod.attempts:
                    node.retry_intervals.append(env.now - pod.last_attempt_at)
                pod.attempts += 1
                pod.last_attempt_at = env.now
                sandbox = Sandbox(pod=pod.index, attempt=pod.attempts)
            assert sandbox is not None
            outcome = yield from cni_add(node, sandbox, deadline_s, call)
            call = None
            if outcome is _ADD_OK:
                pod.ready_at = env.now
                node.pod_ready(pod)
                return
            pod.failures += 1
            step = DEL_AFTER_ADD
        else:  # containerd's deferred teardown
            assert sandbox is not None
            torn_down = yield from cni_del(node, sandbox, call)
            call = None
            if not torn_down:
                stale, pod.stale_sandbox = sandbox, True
            step = BACK_OFF


def _parked(
    parking: Parking, pod: Pod, stale: Sandbox | None, sandbox: Sandbox | None, at: float, step: Step
) -> Generator[simpy.Event, object, tuple[Step, Sandbox | None, Sandbox | None, Call | None]]:
    """Hands the pod's ``step`` at ``at`` to parking; returns where the pod goes on (step, sandboxes, call)."""
    resume = cast("Resume", (yield parking.park(pod, stale, sandbox, at, step)))
    return resume.step, resume.stale, resume.sandbox, resume.call
