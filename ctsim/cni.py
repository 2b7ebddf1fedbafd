"""cilium-cni and containerd: the client side of pod network set-up and teardown.

cilium-cni's API client gives up after 90 s (``ClientTimeout``), limiter wait
included. When ADD fails, containerd's deferred teardown calls DEL with a fresh
60 s timeout (``sandbox_run.go``); a DEL that times out leaves the sandbox for
a later kubelet sync to tear down.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from ctsim.endpoint import (
    NOT_FOUND,
    OK,
    Sandbox,
    create_endpoint,
    delete_endpoint_fast,
    delete_endpoint_handler,
)
from ctsim.limiter import CANCELLED, REFUSED, REFUSED_PACED
from ctsim.node import Node

CLIENT_TIMEOUT = 90.0  # pkg/api ClientTimeout
TEARDOWN_TIMEOUT = 60.0  # containerd's deferred CNI DEL
TOO_MANY_REQUESTS = "429"
TIMEOUT = "timeout"


def cni_add(node: Node, sandbox: Sandbox, deadline_s: float) -> Generator[simpy.Event, object, str]:
    """One CNI ADD; returns "ok", "429" or "timeout"."""
    env, c = node.env, node.counters
    c.add_attempts += 1
    deadline = env.now + deadline_s
    ctx = env.timeout(deadline_s)
    answer = yield node.endpoint_create.call(ctx, lambda req: create_endpoint(node, sandbox, req, ctx, deadline))
    if isinstance(answer, simpy.Process) and answer.value == OK:
        c.add_ok += 1
        return OK
    if answer in (REFUSED, REFUSED_PACED):
        c.add_429 += 1
        c.add_429_paced += answer == REFUSED_PACED
        return TOO_MANY_REQUESTS
    c.add_cancelled_in_limiter += answer == CANCELLED
    c.add_timeouts += 1
    return TIMEOUT


def cni_del(node: Node, sandbox: Sandbox) -> Generator[simpy.Event, object, bool]:
    """One CNI DEL from containerd's teardown; False when it timed out."""
    env, c = node.env, node.counters
    timeout_s = TEARDOWN_TIMEOUT / node.time_scale
    c.del_calls += 1
    if delete_endpoint_fast(node, sandbox):
        c.del_404 += 1
        return True
    deadline = env.now + timeout_s
    ctx = env.timeout(timeout_s)
    # endpoint-delete has no max wait: only a gone client ends its wait.
    answer = yield node.endpoint_delete.call(ctx, lambda req: delete_endpoint_handler(node, sandbox, req, deadline))
    if isinstance(answer, simpy.Process):
        c.del_404 += answer.value == NOT_FOUND
        return True
    c.del_timeouts += 1
    return False
