"""The agent's endpoint API: create (PUT /endpoint/{id}) and delete, with their scrubs.

Sources: ``pkg/endpoint/bpf.go`` (``scrubIPsInConntrackTable``),
``daemon/cmd/endpoint.go`` (``createEndpoint``, ``errorDuringCreation``);
spec §5, §6. The handler keeps working after the client gave up: it cannot
return before the create scrub releases the endpoint lock, and then runs a
second full scrub to delete the half-made endpoint.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ctsim.limiter import Cancelled, Ticket, TooManyRequests
from ctsim.node import Node
from ctsim.walk import walk

OK = "ok"
TOO_MANY_REQUESTS = "429"
CANCELLED = "cancelled"
FAILED = "failed"


@dataclass
class Endpoint:
    """A pod's endpoint in the agent; its lock is the endpoint's own write lock."""

    lock: simpy.Resource
    deleted: bool = False


@dataclass(slots=True)
class Sandbox:
    """One attempt's pod sandbox, as containerd and cilium-cni see it."""

    pod: int
    attempt: int
    endpoint: Endpoint | None = field(default=None)


def scrub_ips_in_conntrack_table(node: Node, caller_deadline: float) -> Generator[simpy.Event, object, None]:
    """``scrubIPsInConntrackTable``: walks every global CT map of every family."""
    for family in node.families:
        yield from walk(node, family, collect_garbage=False, caller_deadline=caller_deadline)


def _create_scrub(node: Node, ep: Endpoint, deadline: float) -> Generator[simpy.Event, object, None]:
    with ep.lock.request() as req:
        yield req
        node.counters.create_scrubs += 1
        yield from scrub_ips_in_conntrack_table(node, deadline)


def _regenerate(
    node: Node, ep: Endpoint, scrub: simpy.Process, deadline: float
) -> Generator[simpy.Event, object, bool]:
    """``regenerateBPF``: holds a build permit while waiting for the CT clean."""
    with node.build_permits.request() as permit:
        yield permit
        yield scrub  # waitingForCTClean
        if ep.deleted or node.env.now >= deadline:
            return False
        yield node.env.timeout(node.regeneration_seconds)
    return True


def delete_endpoint(node: Node, ep: Endpoint, caller_deadline: float) -> Generator[simpy.Event, object, bool]:
    """``deleteEndpointQuiet`` → ``leaveLocked``: the delete scrub, at most once."""
    with ep.lock.request() as req:
        yield req
        if ep.deleted:
            return False
        ep.deleted = True
        node.counters.delete_scrubs += 1
        yield from scrub_ips_in_conntrack_table(node, caller_deadline)
    return True


def put_endpoint(
    node: Node, sandbox: Sandbox, ticket: Ticket, ctx: simpy.Event, deadline: float
) -> Generator[simpy.Event, object, str]:
    """The create handler, once the limiter gave it a ticket (see ``cni_add``).

    ``ctx`` fires when cilium-cni's client gives up.
    """
    env = node.env
    try:
        req = yield from node.endpoint_create.wait(ticket, ctx)
    except TooManyRequests:
        return TOO_MANY_REQUESTS
    except Cancelled:
        node.counters.add_cancelled_in_limiter += 1
        return CANCELLED
    ep = Endpoint(lock=simpy.Resource(env, capacity=1))
    sandbox.endpoint = ep
    scrub = env.process(_create_scrub(node, ep, deadline))
    regeneration = env.process(_regenerate(node, ep, scrub, deadline))
    yield regeneration | ctx
    if regeneration.triggered and regeneration.value and env.now < deadline:
        node.endpoint_create.finish(req, success=True)
        return OK
    # errorDuringCreation: the client is gone; remove what was made (second scrub).
    yield from delete_endpoint(node, ep, deadline)
    node.endpoint_create.finish(req, success=False)
    return FAILED


def delete_endpoint_fast(node: Node, sandbox: Sandbox) -> bool:
    """DELETE /endpoint answered at once with 404: no endpoint and a free limiter slot.

    Most DELs in a 429 storm end here; skipping the process keeps them cheap.
    """
    ep = sandbox.endpoint
    if ep is not None and not ep.deleted:
        return False
    return node.endpoint_delete.pass_through()


def delete_endpoint_handler(
    node: Node, sandbox: Sandbox, ctx: simpy.Event, deadline: float
) -> Generator[simpy.Event, object, str]:
    """DELETE /endpoint: 404 when the endpoint is already gone, else the delete scrub."""
    try:
        limiter = node.endpoint_delete
        ticket = limiter.reserve()
        if ticket is None:  # endpoint-delete has no token bucket: never happens
            return TOO_MANY_REQUESTS
        req = yield from limiter.wait(ticket, ctx)
    except Cancelled:
        return CANCELLED
    ep = sandbox.endpoint
    found = False
    if ep is not None and not ep.deleted:
        found = yield from delete_endpoint(node, ep, deadline)
    node.endpoint_delete.finish(req, success=True)
    return OK if found else "404"
