from ctsim.sim.ctmap import new_map


def test_lru_evicts_expired_entries_first() -> None:
    m = new_map("ct", 100, established=10, expired=80)
    m.insert(now=0, count=20, expiry=100)  # 10 over capacity
    assert m.present == 100
    assert m.live_evicted == 0
    assert m.expired(0) == 70


def test_lru_evicts_live_entries_when_nothing_else_is_left() -> None:
    m = new_map("ct", 100, established=90)
    m.insert(now=0, count=20, expiry=100)
    assert m.present == 100
    assert m.live_evicted == 10


def test_gc_deletes_only_expired_cohorts() -> None:
    m = new_map("ct", 1000, established=5, expired=100)
    m.insert(now=0, count=50, expiry=30)
    m.insert(now=0, count=50, expiry=90)
    assert m.delete_expired(60) == 150
    assert m.present == 55
    assert m.live(60) == 55


def test_cost_does_not_grow_with_entries() -> None:
    m = new_map("ct", 16_777_216, established=1_000_000, expired=15_000_000)
    assert m.cohorts == 1


def test_connections_that_outgrow_the_map_count_their_own_excess_as_evicted() -> None:
    """New flows beyond the capacity are inserted and pushed out by the rest (LRU): counted, not lost."""
    m = new_map("ct", 1000, established=0, expired=0)
    m.insert(60.0, 5000, 120.0)
    assert m.present == 1000 and m.live_evicted == 4000
    # 6,000 more, 0.03 s apart from 120 s, each living 200 s: the first 1,000 push out the 1,000 before them
    # (dead by 120 s), the other 5,000 push out each other, each 30 s after it opened: live.
    m.insert_arrivals(120.0, 0, 6000, 0.03, 200.0)
    assert m.present == 1000 and m.live_evicted == 4000 + 5000 and m.runs == 1
    # Living 20 s instead: the first 1,000 push out the run before (opened 270-300 s, live to 470-500 s), the
    # rest each other, 30 s after opening: dead.
    m.insert_arrivals(400.0, 0, 3000, 0.03, 20.0)
    assert m.present == 1000 and m.live_evicted == 9000 + 1000
