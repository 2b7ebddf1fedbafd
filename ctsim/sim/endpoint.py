"""The agent's endpoint API: create (PUT /endpoint/{id}) and delete, with their scrubs.

Sources: ``pkg/endpoint/bpf.go`` (``scrubIPsInConntrackTable``),
``daemon/cmd/endpoint.go`` (``createEndpoint``, ``errorDuringCreation``);
v1.16.5. The handler keeps working after the client gave up: it cannot
return before the create scrub releases the endpoint lock, and then runs a
second full scrub to delete the half-made endpoint.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from enum import StrEnum

import simpy

from ctsim.core.rate import LimitedRequest
from ctsim.sim.clock import any_of, process_now
from ctsim.sim.lock import FIFOLock
from ctsim.sim.node import Node
from ctsim.sim.walk import walk


class Answer(StrEnum):
    """What the agent's endpoint handlers answer."""

    OK = "ok"
    FAILED = "failed"  # the create gave up: errorDuringCreation
    NOT_FOUND = "404"  # DELETE of an endpoint that is not there


# The members as module globals for the hot paths: an Enum attribute costs ~70 ns on 3.11, a global ~6 ns.
_OK, _FAILED, _NOT_FOUND = Answer


@dataclass
class Endpoint:
    """A pod's endpoint in the agent; its lock is the endpoint's own write lock."""

    lock: FIFOLock
    deleted: bool = False


@dataclass(slots=True)
class Sandbox:
    """One attempt's pod sandbox, as containerd and cilium-cni see it."""

    pod: int
    attempt: int
    endpoint: Endpoint | None = field(default=None)


def scrub_ips_in_conntrack_table(node: Node, caller_deadline: float) -> Generator[simpy.Event, object, None]:
    """``scrubIPsInConntrackTable``: walks every global CT map of every family, IPv4 then IPv6."""
    for family in node.families:
        yield from walk(node, family, collect_garbage=False, caller_deadline=caller_deadline)


def _create_scrub(node: Node, ep: Endpoint, deadline: float) -> Generator[simpy.Event, object, None]:
    """The scrub under the endpoint's lock. Its first step runs as create's start (see ``create_endpoint``)."""
    lock = ep.lock
    if not lock.take_now():
        yield lock.request()
    node.counters.create_scrubs += 1
    yield from scrub_ips_in_conntrack_table(node, deadline)
    lock.release()


def _regenerate(
    node: Node, ep: Endpoint, scrub: simpy.Process, deadline: float, since: float
) -> Generator[simpy.Event, object, bool]:
    """``regenerateBPF``: holds a build permit while waiting for the CT clean.

    ``since``: create's start. A permit that is free is taken then, even
    where the scrub's first step has already moved the clock (see
    ``create_endpoint``), or a start queued first made its grant an event;
    one held by others is taken at its grant. waitingForCTClean runs from the
    permit to the scrub's end.
    """
    permits = node.build_permits
    if not permits.take_now():
        held = permits.holders >= permits.capacity or bool(permits.waiters)
        yield permits.request()
        if held:
            since = node.env.now
    yield scrub  # waitingForCTClean
    waited = node.env.now - since
    if ep.deleted or node.env.now >= deadline:
        node.latency.ct_clean_wait_failed.add(waited)
        permits.release()
        return False
    node.latency.ct_clean_wait_ok.add(waited)
    yield node.env.timeout(node.regeneration_seconds)
    permits.release()
    return True


def delete_endpoint(node: Node, ep: Endpoint, caller_deadline: float) -> Generator[simpy.Event, object, bool]:
    """``deleteEndpointQuiet`` → ``leaveLocked``: the delete scrub, at most once.

    Its callers (a handler's process, create's) are each woken alone, so a
    free lock is taken without an event when nothing else is due now.
    """
    lock = ep.lock
    if not lock.take_now():
        yield lock.request()
    if ep.deleted:
        lock.release()
        return False
    ep.deleted = True
    node.counters.delete_scrubs += 1
    yield from scrub_ips_in_conntrack_table(node, caller_deadline)
    lock.release()
    return True


def create_endpoint(
    node: Node, sandbox: Sandbox, req: LimitedRequest, ctx: simpy.Event, deadline: float
) -> Generator[simpy.Event, object, str]:
    """``putEndpointIDHandler`` once the limiter admitted ``req``: ``createEndpoint``.

    ``ctx`` fires when cilium-cni's client gives up.
    """
    env = node.env
    ep = Endpoint(lock=FIFOLock(env))
    sandbox.endpoint = ep
    # Each first step runs here, where its start event would run next, unless another start is queued first.
    # The scrub's takes its endpoint's lock, and the family's and walks if nothing else is due now (to its
    # end, clock moved, if nothing is due before then); the regeneration's takes a build permit. What this
    # step does after each touches neither, and no other event can run in between.
    start = env.now
    scrub = process_now(env, _create_scrub(node, ep, deadline))
    regeneration = process_now(env, _regenerate(node, ep, scrub, deadline, start))
    yield any_of(env, regeneration, ctx)
    if regeneration.triggered and regeneration.value and env.now < deadline:
        node.endpoint_create.finish(req, success=True)
        return _OK
    # errorDuringCreation: the client is gone; remove what was made (second scrub).
    yield from delete_endpoint(node, ep, deadline)
    node.endpoint_create.finish(req, success=False)
    return _FAILED


def delete_endpoint_fast(node: Node, sandbox: Sandbox) -> bool:
    """DELETE /endpoint answered at once with 404: no endpoint, and a free limiter slot or none needed.

    Most DELs after a 429 end here. Up to 1.17 the handler ends them with
    ``r.Error()`` after the limiter (``daemon/cmd/endpoint.go``), so they
    never re-tune it; a slot taken and given back in the same instant changes
    nothing, so no process is needed. From 1.18.0 (0fd97811e5) the handler
    looks the endpoint up first and answers 404 without the limiter at all.
    """
    if has_endpoint(sandbox):
        return False
    if node.delete_404_first:
        return True
    return node.endpoint_delete.answer_at_once()


def has_endpoint(sandbox: Sandbox) -> bool:
    """The sandbox has an endpoint that is not deleted yet: DELETE must scrub."""
    ep = sandbox.endpoint
    return ep is not None and not ep.deleted


def delete_endpoint_handler(
    node: Node, sandbox: Sandbox, req: LimitedRequest, deadline: float
) -> Generator[simpy.Event, object, str]:
    """DELETE /endpoint once admitted: 404 when the endpoint is already gone, else the delete scrub."""
    found = False
    if has_endpoint(sandbox):
        assert sandbox.endpoint is not None
        found = yield from delete_endpoint(node, sandbox.endpoint, deadline)
    node.endpoint_delete.finish(req, success=found)  # a 404 is r.Error(): no re-tuning
    return _OK if found else _NOT_FOUND
