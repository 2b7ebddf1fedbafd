"""The locks against simpy.Resource: the same grants, in the same order, at the same step."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.sim.clock import advance
from ctsim.sim.lock import FIFOLock, GlobalDeleteLock

# (start, hold) per worker; whole seconds and zero holds make requests, releases and
# hand-overs fall on the same instants, where only the order of events decides.
workers = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=8)


def trace(
    make_lock: Callable[[simpy.Environment], Any], plan: list[tuple[int, int, int]], at_once: bool = False
) -> list[tuple]:
    """``at_once``: each worker, woken alone by its own events, skips the events it may (``sim.clock.advance``)."""
    env = simpy.Environment()
    lock = make_lock(env)
    log: list[tuple] = []

    def wait(delay: float) -> Generator[simpy.Event, object, None]:
        if not (at_once and advance(env, delay)):
            yield env.timeout(delay)

    def worker(i: int, start: int, hold: int, rounds: int) -> Generator[simpy.Event, object, None]:
        yield from wait(start)
        for r in range(rounds + 1):
            if at_once and lock.take_now():
                log.append((env.now, "got", i, r))
                if hold:
                    yield from wait(hold)
                lock.release()
            else:
                with lock.request() as req:
                    yield req
                    log.append((env.now, "got", i, r))
                    if hold:
                        yield from wait(hold)
            log.append((env.now, "released", i, r))
            yield from wait(0)  # an event scheduled right after the release: does the hand-over come first?
            log.append((env.now, "after", i, r))

    def ticker() -> Generator[simpy.Event, object, None]:
        while True:  # a bystander whose events interleave with the lock's
            log.append((env.now, "tick"))
            yield env.timeout(1)

    env.process(ticker())
    for i, (start, hold, rounds) in enumerate(plan):
        env.process(worker(i, start, hold, rounds))
    env.run(until=40)
    return log


@settings(max_examples=300, deadline=None)
@given(workers)
def test_grants_come_in_the_order_and_at_the_step_a_resource_gives_them(plan: list[tuple[int, int, int]]) -> None:
    assert trace(lambda env: GlobalDeleteLock(env, "ipv4"), plan) == trace(
        lambda env: simpy.Resource(env, capacity=1), plan
    )


@settings(max_examples=300, deadline=None)
@given(workers, st.integers(1, 4))
def test_a_lock_of_any_capacity_grants_as_a_resource_of_it(plan: list[tuple[int, int, int]], capacity: int) -> None:
    assert trace(lambda env: FIFOLock(env, capacity), plan) == trace(
        lambda env: simpy.Resource(env, capacity=capacity), plan
    )


@settings(max_examples=300, deadline=None)
@given(workers, st.integers(1, 3))
def test_grants_and_timeouts_taken_at_once_change_nothing(plan: list[tuple[int, int, int]], capacity: int) -> None:
    """A grant or timeout taken without its event, when nothing else is due first, is the same run."""

    def ours(env: simpy.Environment) -> FIFOLock:
        return GlobalDeleteLock(env, "ipv4") if capacity == 1 else FIFOLock(env, capacity)

    assert trace(ours, plan, at_once=True) == trace(lambda env: simpy.Resource(env, capacity=capacity), plan)


def test_it_remembers_its_longest_queue() -> None:
    env = simpy.Environment()
    lock = GlobalDeleteLock(env, "ipv4")

    def walker() -> Generator[simpy.Event, object, None]:
        with lock.request() as req:
            yield req
            yield env.timeout(10)
        lock.record_hold(10)

    for _ in range(4):
        env.process(walker())
    env.run()
    assert (lock.max_queue, lock.max_holders, lock.held_seconds, lock.holders) == (3, 1, 40, 0)
