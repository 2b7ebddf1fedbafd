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
