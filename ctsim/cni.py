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
    TOO_MANY_REQUESTS,
    TOO_MANY_REQUESTS_PACED,
    Sandbox,
    delete_endpoint_fast,
    delete_endpoint_handler,
    put_endpoint,
)
from ctsim.node import Node

CLIENT_TIMEOUT = 90.0  # pkg/api ClientTimeout
TEARDOWN_TIMEOUT = 60.0  # containerd's deferred CNI DEL


def cni_add(node: Node, sandbox: Sandbox, deadline_s: float) -> Generator[simpy.Event, object, str]:
    """One CNI ADD; returns "ok", "429" or "timeout"."""
    env, c = node.env, node.counters
    c.add_attempts += 1
    deadline = env.now + deadline_s
    ctx = env.timeout(deadline_s)
    handler = env.process(put_endpoint(node, sandbox, ctx, deadline))
    yield handler | ctx
    if handler.triggered and handler.value == OK:
        c.add_ok += 1
        return OK
    if handler.triggered and handler.value in (TOO_MANY_REQUESTS, TOO_MANY_REQUESTS_PACED):
        c.add_429 += 1
        c.add_429_paced += handler.value == TOO_MANY_REQUESTS_PACED
        return TOO_MANY_REQUESTS
    c.add_timeouts += 1
    return "timeout"


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
    handler = env.process(delete_endpoint_handler(node, sandbox, ctx, deadline))
    yield handler | ctx
    if handler.triggered:
        if handler.value == NOT_FOUND:
            c.del_404 += 1
        return True
    c.del_timeouts += 1
    return False
