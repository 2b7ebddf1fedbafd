"""A Deployment's rolling update (``--rollout``): surge, availability, and each old pod's DEL after a new Ready."""

from __future__ import annotations

import pytest

from ctsim.core.errors import InputError
from ctsim.inputs.given import flags_of, parse_given
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import Model


def test_the_strategy_rounds_as_kubernetes_does() -> None:
    s = resolve_flags(pods="1", rollout="10")  # 25 % of 10: surge 2.5 up to 3, unavailable down to 2
    assert (s.rollout, s.max_surge, s.max_unavailable) == (10, 3, 2)
    s = resolve_flags(pods="1", rollout="10", max_surge="1", max_unavailable="0")
    assert (s.max_surge, s.max_unavailable) == (1, 0)
    g = parse_given(rollout="10", max_surge="50%", max_unavailable="1")
    assert parse_given(**flags_of(g)) == g


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ({"rollout": "4", "max_surge": "0", "max_unavailable": "0%"}, "cannot both be 0"),
        ({"max_surge": "1"}, "no --rollout"),
        ({"rollout": "4", "max_surge": "150%"}, "at most 100%"),
        ({"rollout": "4", "max_unavailable": "1.5"}, "cannot read"),
    ],
)
def test_a_strategy_kubernetes_refuses_is_refused(flags: dict[str, str], says: str) -> None:
    with pytest.raises(InputError, match=says):
        resolve_flags(pods="1", **flags)


def test_old_pods_go_only_as_new_ones_become_ready() -> None:
    model = Model(resolve_flags(entries="1M", pods="1", rollout="20"))
    result = model.run()
    rollout = model.rollout
    assert rollout is not None
    new = [p for p in model.pods if p.index in rollout.pods]
    assert len(new) == 20 and all(p.ready for p in new)
    # At t=0: surge 5 new pods, 5 old deleted (20 - 5 stay available), then 5 more new in the room they left.
    assert sum(d.asked_at == 0.0 for d in rollout.deletions) == 5
    assert sum(p.created_at < 1.0 for p in new) == 10
    # Every later deletion is asked at the instant a new pod became Ready.
    ready_at = {p.ready_at for p in new}
    assert all(d.asked_at in ready_at for d in rollout.deletions if d.asked_at > 0)
    d = result.to_dict()
    assert d["rollout"]["new_ready"] == 20 and d["rollout"]["old_deleted"] == 20
    assert d["rollout"]["done_at_s"] == max(p.ready_at for p in new)
    assert d["deletes"]["requested"] == 20 and d["lock"]["delete_scrubs"] >= 20
    assert d["inputs"]["rollout"] == {"pods": 20, "max_surge": 5, "max_unavailable": 5}


def test_without_unavailability_the_first_old_pod_waits_for_a_new_ready() -> None:
    model = Model(resolve_flags(entries="1M", pods="1", rollout="4", max_surge="1", max_unavailable="0"))
    model.run()
    rollout = model.rollout
    assert rollout is not None
    assert min(d.asked_at for d in rollout.deletions) > 0.0
    assert rollout.done_at is not None
