"""kubelet's pod worker: its random stream and its retry cadence."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from ctsim.sim.pod import BACKOFF, BACKOFF_JITTER, Draws, backoff


@given(seed=st.integers(0, 2**64), n=st.integers(0, 300))
def test_a_pods_draws_are_its_seeded_random_stream(seed: int, n: int) -> None:
    reference, draws = random.Random(seed), Draws(seed)
    assert [draws.random() for _ in range(n)] == [reference.random() for _ in range(n)]


@given(seed=st.integers(0, 2**64), steps=st.lists(st.booleans(), max_size=400))
def test_a_peek_is_the_next_draw_across_blocks(seed: int, steps: list[bool]) -> None:
    """Parking peeks a back-off when it queues a DEL and draws it later; block ends must not tell."""
    reference, draws = random.Random(seed), Draws(seed)
    expected = reference.random()
    for peek in steps:
        if peek:
            assert draws.peek() == expected
        else:
            assert draws.random() == expected
            expected = reference.random()


@given(seed=st.integers(0, 2**64), steps=st.lists(st.sampled_from(["draw", "peek", "release"]), max_size=600))
def test_a_released_stream_goes_on_where_it_was(seed: int, steps: list[str]) -> None:
    """A finished run frees its pods' drawn-ahead blocks: what they would draw next must not change."""
    reference, draws = random.Random(seed), Draws(seed)
    expected = reference.random()
    for step in steps:
        if step == "release":
            draws.release()
            assert len(draws._block) == 0
        elif step == "peek":
            assert draws.peek() == expected
        else:
            assert draws.random() == expected
            expected = reference.random()


def test_a_long_stream_stays_the_same_in_blocks_of_bounded_size() -> None:
    """Two days of retries draw thousands of values: every block past the cap is re-seeded, never longer."""
    reference, draws = random.Random(11), Draws(11)
    for _ in range(5_000):
        assert draws.random() == reference.random()
        assert len(draws._block) <= Draws.BLOCK


def test_backoff_is_wait_jitter_10s_half() -> None:
    draws = Draws(7)
    values = [backoff(draws) for _ in range(500)]
    assert all(BACKOFF <= v < BACKOFF * (1 + BACKOFF_JITTER) for v in values)
