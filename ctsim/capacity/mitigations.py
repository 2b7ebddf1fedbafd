"""What would end a run's storm soonest: each mitigation simulated with the user's own inputs.

``ctsim run`` advises from these, never from a rule of thumb: a setting the
run already uses is not offered, and each one offered was run through the
model on the same node, for at most ``HORIZON``, with what it costs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from ctsim.core.floats import left_sum
from ctsim.core.profiles import get_profile
from ctsim.core.quantity import format_duration
from ctsim.core.releases import newest
from ctsim.inputs.scenario import Scenario, resolve
from ctsim.sim.model import simulate
from ctsim.sim.result import Result, Verdict

HORIZON = "1h"  # a mitigation that has not resolved the burst by then is not one
HORIZON_S = 3600.0
MAX_INTERVAL = 3600.0  # the conntrack-gc-max-interval offered


class Mitigation:
    """One setting, what the model says it does to this run's burst, and its cost.

    It keeps the figures the advice prints, not the run: a mitigation of a
    100,000-pod storm would otherwise hold its 100,000 pods while the next
    one is simulated.
    """

    __slots__ = ("action", "argv", "cost", "counters", "flag", "pods", "pods_ready", "resolved_at", "verdict")

    def __init__(self, flag: str, action: str, result: Result, cost: str, argv: list[str]) -> None:
        self.flag, self.action, self.cost = flag, action, cost
        # The flags that, added after the run's own, make ``ctsim run`` play this mitigation: its figures exactly.
        self.argv = [*argv, "--horizon", HORIZON]
        self.verdict, self.pods, self.pods_ready = result.verdict, len(result.pods), result.pods_ready
        self.resolved_at = result.recovered_at  # when every pod was Ready (None: not within ``HORIZON``)
        self.counters = result.counters

    def to_dict(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "argv": self.argv,
            "action": self.action,
            "verdict": self.verdict,
            "all_ready_s": self.resolved_at,
            "pods_ready": self.pods_ready,
            "add_429": self.counters.add_429,
            "cost": self.cost,
        }


def _gc_cost(r: Result) -> str:
    """The GC's CPU: its first pass over the table as it was, then the share of a core its passes take."""
    passes = r.gc.passes
    if not passes:
        return "no GC pass within the run"
    first = passes[0]
    later = passes[1:]
    span = r.ended_at - first.end
    share = left_sum(p.end - p.start for p in later) / span if later and span > 0 else 0.0
    return f"GC: a first pass of {format_duration(first.end - first.start)}, then {share:.1%} of one core"


class _Candidate(NamedTuple):
    flag: str  # as the advice names it
    action: str  # what it means, and what it assumes
    change: dict[str, Any]  # the Given's inputs it replaces
    argv: list[str]  # the same as flags: what ``ctsim run`` needs added to play it


def _candidates(s: Scenario) -> list[_Candidate]:
    """The settings this run does not already use, each with what it assumes."""
    out: list[_Candidate] = []
    told = s.given.gc_next_pass is not None  # a next pass the user gave: each GC mitigation sets its own
    if not s.gc_interval or s.gc_interval > 60:
        out.append(
            _Candidate(
                "--gc-interval 60s",
                "set conntrack-gc-interval to 60s (the agent restarts: a pass now)",
                {"gc_interval": 60.0, **({"gc_next_pass": 0.0} if told else {})},
                ["--gc-interval", "60s", *(["--gc-next-pass", "0"] if told else [])],
            )
        )
    adaptive = not s.gc_interval
    if adaptive and (not s.gc_max_interval or s.gc_max_interval > MAX_INTERVAL) and s.gc_first_pass > MAX_INTERVAL:
        # A warm agent's next pass is mid-cycle: half the 1h it now sleeps.
        out.append(
            _Candidate(
                "--gc-max-interval 1h",
                "set conntrack-gc-max-interval to 1h: passes at most 1h apart, so the next one comes on average "
                "30m after the burst (on the table as given: `ctsim plan` shows the smaller steady table it leads to)",
                {"gc_max_interval": MAX_INTERVAL, **({"gc_next_pass": MAX_INTERVAL / 2} if told else {})},
                ["--gc-max-interval", "1h", *(["--gc-next-pass", "30m"] if told else [])],
            )
        )
    upgrade = get_profile(s.profile).upgrade
    if upgrade and s.given.rate is None:  # --rate fixes every walk
        to = get_profile(upgrade)
        action = f"upgrade to Cilium {to.release} (batched walks)"
        if s.given.cilium_version is None:
            out.append(_Candidate(f"--profile {to.name}", action, {"profile": to.name}, ["--profile", to.name]))
        else:  # the release given is replaced by the newest patch of the upgrade's line
            change = {"profile": to.name, "cilium_version": newest(to.release)}
            argv = ["--profile", to.name, "--cilium-version", to.release]
            out.append(_Candidate(f"--cilium-version {to.release}", action, change, argv))
    return out


def simulate_mitigations(s: Scenario) -> list[Mitigation]:
    """Each mitigation this run does not use, simulated for ``HORIZON``; soonest resolved first."""
    found = []
    for c in _candidates(s):
        # Until resolved, as the run itself, but for at most HORIZON.
        mitigated = replace(resolve(replace(s.given, **c.change, horizon=None)), horizon=HORIZON_S)
        r = simulate(mitigated)
        upgrade = "profile" in c.change  # an upgrade: its cost is not the GC's
        cost = "an upgrade" if upgrade else _gc_cost(r)
        action = f"{c.action}; walk rate {r.scenario.rate_source}" if upgrade else c.action
        found.append(Mitigation(c.flag, action, r, cost, c.argv))
        del r  # only its figures are kept: its pods go before the next is built
    found.sort(key=lambda m: (m.resolved_at is None, m.resolved_at or 0.0))
    return found


def describe(m: Mitigation, named: bool = True) -> str:
    """``--gc-interval 60s: all 50 Ready by 3m10s, degraded (GC walks 2.1 % …)``: one mitigation, one clause.

    Its verdict is said: a mitigation whose burst still collapses first is not hidden behind "all Ready".
    """
    n = m.pods
    if m.resolved_at is None:
        what = f"{m.pods_ready}/{n} Ready after {HORIZON}"
    else:
        what = f"all {n} Ready by {format_duration(m.resolved_at)}"
    how = " at the first attempt, ok" if m.verdict == Verdict.OK else f", {m.verdict}"
    return f"{m.flag + ': ' if named else ''}{what}{how} ({m.cost})"
