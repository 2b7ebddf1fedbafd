"""When events fire: a timer at an exact instant, and the events skipped where nothing can tell."""

from __future__ import annotations

from collections.abc import Generator

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from ctsim.sim.clock import Deadline, advance, any_of, process_after, process_now, start_processes, timeout_at


def _fires_at(now: float, t: float) -> float:
    env = simpy.Environment(initial_time=now)
    fired: list[float] = []
    timeout_at(env, t).callbacks.append(lambda _: fired.append(env.now))  # type: ignore[union-attr]
    env.run()
    return fired[0]


def test_a_deadline_no_delay_reaches() -> None:
    now, t = 8.20284366197183, 61.68677771850212  # a context deadline parking re-created
    assert now + (t - now) != t
    assert _fires_at(now, t) == t


@given(st.floats(0, 1e7), st.floats(0, 1e6))
def test_it_fires_at_the_instant_given(now: float, ahead: float) -> None:
    t = now + ahead
    assert _fires_at(now, t) == t


@given(st.floats(0, 1e6), st.floats(0, 10), st.floats(0, 10))
def test_it_keeps_its_place_among_timeouts(now: float, a: float, b: float) -> None:
    """Ordered by instant, then by when it was made, as SimPy orders its own timeouts."""
    env = simpy.Environment(initial_time=now)
    log: list[str] = []
    env.timeout(a).callbacks.append(lambda _: log.append("timeout"))  # type: ignore[union-attr]
    timeout_at(env, now + b).callbacks.append(lambda _: log.append("at"))  # type: ignore[union-attr]
    env.run()
    assert log == (["at", "timeout"] if now + b < now + a else ["timeout", "at"])


def test_a_deadline_fires_only_if_armed_and_keeps_the_place_it_took_when_made() -> None:
    env = simpy.Environment()
    log: list[str] = []
    unarmed, armed = Deadline(env, 5.0), Deadline(env, 5.0)
    env.timeout(5.0).callbacks.append(lambda _: log.append("made after"))  # type: ignore[union-attr]
    for name, deadline in (("unarmed", unarmed), ("armed", armed)):
        deadline.callbacks.append(lambda _, name=name: log.append(name))  # type: ignore[union-attr]

    def arm_later() -> Generator[simpy.Event, None, None]:
        yield env.timeout(2.0)
        armed.arm()

    env.process(arm_later())
    env.run()
    assert log == ["armed", "made after"]  # armed at 2 s, yet ahead of a timeout made after it
    assert not unarmed.triggered


def test_advance_moves_the_clock_only_when_nothing_comes_first() -> None:
    env = simpy.Environment(initial_time=1.0)
    env.timeout(2.0)  # due at 3.0
    assert advance(env, 1.5) and env.now == 2.5
    assert not advance(env, 0.5) and env.now == 2.5  # an event at 3.0 was queued first: it must run first
    assert not advance(env, 1.0) and env.now == 2.5


class _Stage:
    """A bystander whose steps fall on whole seconds, and workers that log two steps at one instant."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.log: list[tuple[float, str]] = []
        self.env.process(self.bystander())

    def bystander(self) -> Generator[simpy.Event, None, None]:
        for _ in range(4):
            self.log.append((self.env.now, "bystander"))
            yield self.env.timeout(1)

    def worker(self, i: int) -> Generator[simpy.Event, None, None]:
        self.log.append((self.env.now, f"worker {i}"))
        yield self.env.timeout(0)
        self.log.append((self.env.now, f"worker {i} again"))

    def run(self) -> list[tuple[float, str]]:
        self.env.run()
        return self.log


def _started(delays: list[int], at_once: bool) -> list[tuple[float, str]]:
    """Workers made after the bystander, each waiting ``delay`` first."""
    stage = _Stage()
    env = stage.env

    def waited(i: int, delay: int) -> Generator[simpy.Event, None, None]:
        yield env.timeout(delay)
        yield from stage.worker(i)

    if at_once:
        start_processes(env, lambda: [process_after(env, d, stage.worker(i)) for i, d in enumerate(delays)])
    else:
        for i, d in enumerate(delays):
            env.process(waited(i, d))
    return stage.run()


@given(st.lists(st.integers(0, 3), max_size=6))
def test_processes_started_after_a_delay_keep_their_place(delays: list[int]) -> None:
    """Whole-second delays land the workers on the bystander's instants, where only event order decides."""
    assert _started(delays, at_once=True) == _started(delays, at_once=False)


def _spawned(times: list[int], at_once: bool) -> list[tuple[float, str]]:
    """Timers that each start a worker, on the bystander's instants."""
    stage = _Stage()
    env = stage.env

    def spawn(i: int) -> None:  # the last thing its timer's step does, and the timer wakes only it
        worker = stage.worker(i)
        started = process_now(env, worker) if at_once else env.process(worker)
        started.callbacks.append(lambda _: stage.log.append((env.now, f"worker {i} ended")))  # type: ignore[union-attr]

    for i, t in enumerate(times):
        env.timeout(t).callbacks.append(lambda _, i=i: spawn(i))  # type: ignore[union-attr]
    return stage.run()


@given(st.lists(st.integers(0, 4), max_size=6))
def test_a_process_started_now_where_its_start_would_run_next_is_the_same_run(times: list[int]) -> None:
    assert _spawned(times, at_once=True) == _spawned(times, at_once=False)


def _race_world(times: list[int], a_at: int, b_at: int, race: str) -> list[tuple[float, str]]:
    """Noise processes logging at ``times``, and one waiter on the first of two timers (``a | b`` or ``any_of``)."""
    env = simpy.Environment()
    log: list[tuple[float, str]] = []

    def noise(i: int, t: int) -> Generator[simpy.Event, object, None]:
        yield env.timeout(t)
        log.append((env.now, f"noise {i}"))
        yield env.timeout(0)
        log.append((env.now, f"noise {i} again"))

    def waiter() -> Generator[simpy.Event, object, None]:
        a, b = env.timeout(a_at), env.timeout(b_at)
        yield (a | b) if race == "condition" else any_of(env, a, b)
        log.append((env.now, f"woken, a {a.processed}, b {b.processed}"))
        yield env.timeout(0)
        log.append((env.now, "after"))

    for i, t in enumerate(times):
        env.process(noise(i, t))
    env.process(waiter())
    env.run()
    return log


@given(st.lists(st.integers(0, 4), max_size=5), st.integers(0, 4), st.integers(0, 4))
def test_any_of_wakes_its_waiter_where_anyof_would(times: list[int], a_at: int, b_at: int) -> None:
    """Inline where nothing else is due at the instant, a round later otherwise: the same order of everything."""
    assert _race_world(times, a_at, b_at, "any_of") == _race_world(times, a_at, b_at, "condition")


def test_an_unwatched_process_ends_without_an_event_but_not_without_its_error() -> None:
    env = simpy.Environment()
    steps = 0

    def quiet() -> Generator[simpy.Event, object, None]:
        yield env.timeout(1)

    def failing() -> Generator[simpy.Event, object, None]:
        yield env.timeout(1)
        raise RuntimeError("a bug in a pod's worker")

    start_processes(env, lambda: process_after(env, 0, quiet(), unwatched=True))
    while env.peek() != float("inf"):
        env.step()
        steps += 1
    assert steps == 3  # the start, its timer, the worker's timeout: no end event
    start_processes(env, lambda: process_after(env, 0, failing(), unwatched=True))
    with pytest.raises(RuntimeError, match="a bug"):
        env.run()
