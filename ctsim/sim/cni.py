"""cilium-cni and containerd: the client side of pod network set-up and teardown.

cilium-cni's API client gives up after 90 s (``ClientTimeout``), limiter wait
included. When ADD fails, containerd's deferred teardown calls DEL with a fresh
60 s timeout (``sandbox_run.go``); a DEL that times out leaves the sandbox for
a later kubelet sync to tear down. While a starting agent does not answer
(``ctsim.sim.bootstrap``), each call first polls it: ADD for 30 s
(``ClientConnectTimeout``), then fails; DEL for its fallback's connect
timeout, then queues the deletion and succeeds.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from enum import StrEnum
from typing import NamedTuple

import simpy

from ctsim.core.defaults import CLIENT_CONNECT_POLL, CLIENT_CONNECT_TIMEOUT
from ctsim.core.rate import CANCELLED, REFUSED, REFUSED_PACED
from ctsim.sim.clock import Deadline
from ctsim.sim.endpoint import Answer, Sandbox, create_endpoint, delete_endpoint_fast, delete_endpoint_handler
from ctsim.sim.limiter import APILimiter, Call, Handler
from ctsim.sim.node import AgentAPI, Node


class AddOutcome(StrEnum):
    """How a CNI ADD ended, as kubelet sees it."""

    OK = "ok"
    TOO_MANY_REQUESTS = "429"
    TIMEOUT = "timeout"
    NO_AGENT = "no agent"  # ClientConnectTimeout passed with the agent not answering


# The members as module globals for the hot paths: an Enum attribute costs ~70 ns on 3.11, a global ~6 ns.
_ADD_OK, _ADD_429, _ADD_TIMEOUT, _ADD_NO_AGENT = AddOutcome
_ANSWERED_OK, _NOT_FOUND = Answer.OK, Answer.NOT_FOUND


class Arrived(NamedTuple):
    """When a call reached its limiter (time, arrival number), and what it was given then: slot weight, mean read."""

    order: tuple[float, int]
    weight: int
    mean: float


def add_call(node: Node, sandbox: Sandbox, deadline_s: float, arrived: Arrived | None = None) -> Call:
    """PUT /endpoint through the limiter, from cilium-cni's client with its ``deadline_s`` timeout.

    ``arrived``: the call reached the limiter then and waits for a slot still
    (a parked pod's); else it arrives now.
    """
    at = node.env.now if arrived is None else arrived.order[0]
    deadline = at + deadline_s
    ctx = Deadline(node.env, deadline)  # the limiter arms it once it can matter
    return _call(node.endpoint_create, ctx, lambda req: create_endpoint(node, sandbox, req, ctx, deadline), arrived)


def del_call(node: Node, sandbox: Sandbox, arrived: Arrived | None = None, timeout_s: float | None = None) -> Call:
    """DELETE /endpoint through the limiter, with containerd's teardown timeout (or ``timeout_s``); see ``add_call``."""
    if timeout_s is None:
        timeout_s = node.teardown_seconds
    at = node.env.now if arrived is None else arrived.order[0]
    deadline = at + timeout_s
    ctx = node.env.timeout(timeout_s) if arrived is None else Deadline(node.env, deadline)
    # endpoint-delete has no max wait: only a gone client ends its wait.
    return _call(node.endpoint_delete, ctx, lambda req: delete_endpoint_handler(node, sandbox, req, deadline), arrived)


def _call(limiter: APILimiter, ctx: simpy.Event, handler: Handler, arrived: Arrived | None) -> Call:
    if arrived is None:
        return limiter.call(ctx, handler)
    return Call.queued(limiter, ctx, handler, arrived.order, arrived.weight, arrived.mean)


def cni_add(
    node: Node, sandbox: Sandbox, deadline_s: float, call: Call | None = None
) -> Generator[simpy.Event, object, str]:
    """One CNI ADD, and how it ended. ``call``: one already waiting in the limiter."""
    c = node.counters
    began = None
    if call is None:
        c.add_attempts += 1
        if node.api is not None and node.api.down:
            began = node.env.now
            if not (yield from _connect(node, node.api, CLIENT_CONNECT_TIMEOUT)):
                c.add_no_agent += 1
                node.latency.cni_add.values.append(node.env.now - began)
                return _ADD_NO_AGENT
        call = add_call(node, sandbox, deadline_s)
    answer = yield call
    node.latency.cni_add.values.append(node.env.now - (call.order[0] if began is None else began))
    if isinstance(answer, simpy.Process) and answer.value is _ANSWERED_OK:
        c.add_ok += 1
        return _ADD_OK
    if answer in (REFUSED, REFUSED_PACED):
        c.add_429 += 1
        c.add_429_paced += answer == REFUSED_PACED
        return _ADD_429
    c.add_cancelled_in_limiter += answer == CANCELLED
    c.add_timeouts += 1
    return _ADD_TIMEOUT


def cni_del(
    node: Node, sandbox: Sandbox, call: Call | None = None, timeout_s: float | None = None
) -> Generator[simpy.Event, object, bool]:
    """One CNI DEL; False when it timed out. ``call``: see ``cni_add``; ``timeout_s``: see ``del_call``."""
    c = node.counters
    if call is None:
        c.del_calls += 1
        api = node.api
        if api is not None and api.down:
            began = node.env.now
            if not (yield from _connect(node, api, api.del_connect_timeout)):  # queued: the agent deletes it later
                api.queued.append(sandbox)
                api.deletes_queued += 1
                node.latency.cni_del.values.append(node.env.now - began)
                return True
        if delete_endpoint_fast(node, sandbox):
            c.del_404 += 1
            node.latency.cni_del.values.append(0.0)
            return True
        call = del_call(node, sandbox, timeout_s=timeout_s)
    answer = yield call
    node.latency.cni_del.values.append(node.env.now - call.order[0])
    if isinstance(answer, simpy.Process):
        c.del_404 += answer.value is _NOT_FOUND
        return True
    c.del_timeouts += 1
    return False


def _connect(node: Node, api: AgentAPI, timeout_s: float) -> Generator[simpy.Event, object, bool]:
    """``NewDefaultClientWithTimeout``: poll ``GetConfig`` every 0.5 s until the agent answers or ``timeout_s``."""
    env, k = node.env, node.time_scale
    began = env.now
    gave_up = env.timeout(timeout_s / k)
    yield env.any_of([api.serving, gave_up])
    if not api.serving.triggered:
        return False
    polls = math.ceil((env.now - began) * k / CLIENT_CONNECT_POLL - 1e-9)  # the first poll after it answered
    answered_at = began + polls * CLIENT_CONNECT_POLL / k
    if answered_at > began + timeout_s / k:
        return False
    if answered_at > env.now:
        yield env.timeout(answered_at - env.now)
    return True
