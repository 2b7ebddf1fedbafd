"""Regenerates docs/validation.md: published reports of this failure, each modelled and checked.

    python -m ctsim.cli.validation            # rewrite the generated part in place
    python -m ctsim.cli.validation --check    # exit 1 if the committed doc differs from today's model

Each report holds its facts as the reporter gave them, the flags that model
it (and which of them are fitted, not reported), and checks: a figure the
reporter saw beside the model's. Its verdict follows from the checks, never
from a word written here: every check holds, it reproduces; some, partly;
none, it does not.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctsim.cli.docs import fill, regenerate
from ctsim.core.quantity import format_duration
from ctsim.inputs.given import command_line
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

DOC = Path(__file__).resolve().parents[2] / "docs" / "validation.md"

Json = dict[str, Any]


@dataclass(frozen=True)
class Check:
    """One figure the reporter saw, and the model's: ``read`` takes it from ``--json``, ``holds`` compares."""

    figure: str
    reported: str
    read: Callable[[Json], float | None]
    holds: Callable[[float], bool]
    show: Callable[[float], str] = format_duration
    run: str = "main"  # which of the report's runs it reads: "main" or "fix"


@dataclass(frozen=True)
class Report:
    key: str
    title: str
    url: str
    release: str
    facts: str
    flags: dict[str, str]
    fitted: tuple[str, ...]  # flags chosen to match, not given by the report, each with why
    checks: tuple[Check, ...]
    fix: dict[str, str] = field(default_factory=dict)  # a second run: the report's fix or its upgrade
    differs: str = ""  # where the model and the report part, in words (shown when a check fails)


def _lat(figure: str, q: str, api_call: str | None = None) -> Callable[[Json], float | None]:
    def read(d: Json) -> float | None:
        value = d["latency_s"][figure]
        if api_call is not None:
            value = value[api_call]
        return None if value is None else float(value[q])

    return read


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _ratio(value: float) -> str:
    return f"{value:.1%}"


def _family(name: str, key: str) -> Callable[[Json], float]:
    return lambda d: float(d["families"][name][key])


def _runs(family: str) -> Callable[[Json], float]:
    return lambda d: float(d["gc"]["runs"][family])


def _ready_max(d: Json) -> float | None:
    return d["pods"]["ready_latency_s"]["max"]


def _full(d: Json) -> float:
    v6 = d["families"]["ipv6"]
    return v6["entries_at_end"] / v6["max_entries"]


REPORTS = (
    Report(
        key="incident",
        title="The incident write-up (seed 001): 16M entries, 50 pods, the storm that never drained",
        url="../shared/seeds/001 (the write-up the preset and the walk rate were built from)",
        release="v1.16.5",
        facts="Scrubs of 35–80 s; every pod retried every 60–90 s; nothing Ready until the 12 h GC pass; "
        "`--conntrack-gc-interval 60s` resolved it.",
        flags={"entries": "16M", "pods": "50"},
        fitted=(
            "the walk rate (published: 426,000 syscalls/s, 2 per entry), 99 % expired and the churn are the "
            "analytics preset's, built from this write-up: the match is circular",
        ),
        checks=(
            Check("one full scrub at t=0", "35–80 s", lambda d: d["walk_seconds"], lambda v: 35 <= v <= 80),
            Check(
                "retry interval p50", "60–90 s", lambda d: d["pods"]["retry_interval_s"]["p50"], lambda v: 60 <= v <= 90
            ),
            Check("stall ended by the GC pass", "yes", lambda d: d["stall"]["ended_by_gc_pass_at_s"], lambda v: v > 0),
            Check("all Ready, with `--gc-interval 60s`", "within minutes", _ready_max, lambda v: v < 1800, run="fix"),
        ),
        fix={"gc_interval": "60s"},
    ),
    Report(
        key="40820",
        title="cilium #40820: ct6_global filled to 100 %, IPv6 GC runs 64 against IPv4's 902",
        url="https://github.com/cilium/cilium/issues/40820",
        release="1.18.x (before 1.18.2)",
        facts="`cilium_datapath_conntrack_gc_runs_total` ipv4 = 902 and ipv6 = 64 since the agent started (about "
        "a week); `ct6_global` full; the fix (529cdc9a96, 1.18.2) keeps the full pass's deadline.",
        flags={
            "cilium_version": "1.18.1",
            "entries": "2M",
            "ipv6_entries": "100k",
            "ipv6_max_entries": "1Mi",
            "ipv6_churn": "200/min",
            "pods": "1",
            "agent_state": "fresh",
            "horizon": "7d",
            "ct_fill_signals": "ipv4=5.4/h",
        },
        fitted=(
            "`--ct-fill-signals ipv4=5.4/h`: IPv4's 902 runs over a week, as signals",
            "the IPv6 map's size and churn: enough to fill it within the week",
        ),
        checks=(
            Check("IPv4 GC runs", "902", _runs("ipv4"), lambda v: 800 <= v <= 1000, _count),
            Check("IPv6 GC runs", "64", _runs("ipv6"), lambda v: 32 <= v <= 128, _count),
            Check("ct6_global full", "100 %", _full, lambda v: v >= 0.99, _ratio),
            Check("ct6_global on 1.18.2", "collected", _full, lambda v: v < 0.1, _ratio, run="fix"),
        ),
        fix={"cilium_version": "1.18.2"},
        differs="Evenly spaced signals never leave the interval's timer a gap to fire in, so the model's IPv6 is "
        "walked twice (the first pass and one timer pass before the signals' cadence took over), not 64 "
        "times: the node's signals paused at times, which --ct-fill-signals does not play.",
    ),
    Report(
        key="39504",
        title="cilium #39504: IPv6 never collected; creates and deletes from 1 s to dozens of seconds",
        url="https://github.com/cilium/cilium/issues/39504",
        release="1.16.9 – 1.16.x",
        facts="Endpoint creation and deletion slowed from ~1 s to dozens of seconds, regeneration mostly "
        "waitingForCTClean; only the IPv6 table was not collected; `--conntrack-gc-interval=1m` fixed it.",
        flags={
            "cilium_version": "1.16.9",
            "entries": "500k",
            "max_entries": "2Mi",
            "churn": "2000/min",
            "ipv6_entries": "50k",
            "ipv6_max_entries": "4Mi",
            "ipv6_churn": "5000/min",
            "pods": "1",
            "agent_state": "fresh",
            "horizon": "3d",
            "ct_fill_signals": "ipv4=6/h",
            "arrival_schedule": "0/s for 2d, 1/h for 1d",
            "delete_schedule": "0/s for 2d, 1/h for 1d",
        },
        fitted=(
            "the signals (`--ct-fill-signals ipv4=6/h`): the report names no signal; something kept IPv4's "
            "passes coming while IPv6's did not",
            "the maps' sizes and churn; the pods, created and deleted hourly on the third day",
        ),
        checks=(
            Check("IPv6 GC runs in 3 days", "none to speak of", _runs("ipv6"), lambda v: v <= 3, _count),
            Check("CNI ADD p50 on day 3", "dozens of seconds", _lat("cni_add", "p50"), lambda v: v >= 10),
            Check("CNI DEL p50 on day 3", "dozens of seconds", _lat("cni_del", "p50"), lambda v: v >= 10),
            Check("waitingForCTClean p50", "most of the create", _lat("ct_clean_wait_ok", "p50"), lambda v: v >= 10),
            Check("CNI ADD p50 with `--gc-interval 1m`", "~1 s", _lat("cni_add", "p50"), lambda v: v <= 3, run="fix"),
        ),
        fix={"gc_interval": "1m"},
    ),
    Report(
        key="35411",
        title="cilium #35411: CNI DEL above 10 s from the delete-time scrub",
        url="https://github.com/cilium/cilium/issues/35411",
        release="1.15.7 – 1.15.x (played as v1.16.5: ctsim models 1.16 on)",
        facts="The maximum CNI delete time spiked to over 10 s; the cause, a full CT walk on every delete "
        "(`deleteEndpoint` → `leaveLocked`).",
        flags={
            "cilium_version": "1.16.5",
            "entries": "2500k",
            "pods": "1",
            "delete_schedule": "1/min for 1h",
            "horizon": "2h",
        },
        fitted=("the table: 2.5M entries (the report gives none), one delete a minute",),
        checks=(Check("CNI DEL max", "over 10 s", _lat("cni_del", "max"), lambda v: v > 10),),
    ),
    Report(
        key="46626",
        title="cilium #46626: adaptive GC every 11–12 s, delete ratios 25–76 % during churn",
        url="https://github.com/cilium/cilium/issues/46626",
        release="1.19.x",
        facts="Under heavy churn the adaptive interval shrank to 11–12 s and each pass deleted 25–76 % of the map.",
        flags={
            "cilium_version": "1.19.4",
            "entries": "100k",
            "max_entries": "512Ki",
            "churn": "1M/min",
            "conn_duration": "5s",
            "pods": "1",
            "agent_state": "fresh",
            "horizon": "1h",
        },
        fitted=(
            "the map's size and churn (the report gives neither): 1M/min into 512Ki entries drives the interval "
            "to its floor; 200,000/min holds it at 32 s with every pass deleting 20.5 %",
        ),
        checks=(
            Check("GC interval, last pass", "11–12 s", lambda d: d["gc"]["intervals_s"][-1], lambda v: 10 <= v <= 12),
            Check(
                "delete ratio p50 over the last 20 passes",
                "25–76 %",
                lambda d: sorted(d["gc"]["max_delete_ratios"][-20:])[10],
                lambda v: 0.25 <= v <= 0.76,
                _ratio,
            ),
        ),
        differs="The model deletes the same share on every pass once the interval settles; the report's ratios "
        "vary with its churn, which it does not give.",
    ),
    Report(
        key="5048",
        title="cilium #5048: waitingForCTClean = 1m33.6s on a failed regeneration",
        url="https://github.com/cilium/cilium/issues/5048",
        release="not given (2022; played as v1.16.5)",
        facts="On an enterprise-scale cluster, with many pods scheduled at once, a regeneration failed after "
        "`waitingForCTClean=1m33.646s` of a 1m33.651s total; creates returned errors.",
        flags={"cilium_version": "1.16.5", "entries": "9M", "pods": "5"},
        fitted=("the table (9M entries) and the burst (5 pods): the report gives neither",),
        checks=(
            Check(
                "waitingForCTClean of failed regenerations, p50 to max",
                "1m34s",
                _lat("ct_clean_wait_failed", "p50"),
                lambda v: 60 <= v <= 180,
            ),
            Check(
                "waitingForCTClean of successful ones, max",
                "(sent to Prometheus)",
                _lat("ct_clean_wait_ok", "max"),
                lambda v: v >= 60,
            ),
        ),
    ),
    Report(
        key="28455",
        title="cilium #28455: waitingForCTClean of 1–2 min, pods stuck for up to an hour",
        url="https://github.com/cilium/cilium/issues/28455",
        release="not given (played as v1.16.5)",
        facts="Endpoint regenerations waited 1–2 minutes for the CT clean; pods stayed in ContainerCreating for "
        "up to an hour.",
        flags={"cilium_version": "1.16.5", "entries": "10M", "pods": "5", "gc_next_pass": "50m"},
        fitted=(
            "the table and the burst",
            "`--gc-next-pass 50m`: when the GC pass that ended the storm came (a burst stalls until one does)",
        ),
        checks=(
            Check(
                "waitingForCTClean p50 (failed creates)",
                "1–2 min",
                _lat("ct_clean_wait_failed", "p50"),
                lambda v: 60 <= v <= 120,
            ),
            Check("the last pod Ready after", "up to 1 h", _ready_max, lambda v: 2700 <= v <= 4500),
        ),
    ),
    Report(
        key="agent-sandbox-1187",
        title="kubernetes-sigs/agent-sandbox #1187: client-side rate limiting on PUT /v1/endpoints",
        url="https://github.com/kubernetes-sigs/agent-sandbox/pull/1187",
        release="not given (kOps on GCE)",
        facts="A stress test launching ~4.4 pods/s across the cluster found each pod's launch spent up to 20 s "
        "waiting in Cilium's endpoint-create limiter.",
        flags={"preset": "standard", "pods": "1", "arrival_schedule": "0.32/s for 10m"},
        fitted=(
            "the per-node rate, 0.32/s: the report gives the cluster's (~4.4/s), not a node's; it sits just above "
            "the warm limiter's 0.315/s (a 3.2 s create), and evenly spaced arrivals wait only that close to it",
        ),
        checks=(
            Check(
                "endpoint-create limiter wait p50",
                "≤ 20 s",
                _lat("limiter_wait", "p50", "endpoint-create"),
                lambda v: 1 <= v <= 20,
            ),
            Check(
                "endpoint-create limiter wait max",
                "up to 20 s",
                _lat("limiter_wait", "max", "endpoint-create"),
                lambda v: 10 <= v <= 30,
            ),
        ),
        differs="Evenly spaced arrivals meet no wait below the limiter's rate (0.32/s for a warm agent's 3.2 s "
        "creates) and waits up to its 60 s max just above it; a report's waits of up to 20 s need arrivals "
        "as bursty as a real scheduler's, which --arrivals does not play.",
    ),
)


@dataclass(frozen=True)
class Outcome:
    report: Report
    rows: list[tuple[Check, float | None, bool]]

    @property
    def held(self) -> int:
        return sum(ok for _, _, ok in self.rows)

    @property
    def verdict(self) -> str:
        if self.held == len(self.rows):
            return "reproduces"
        return "partly" if self.held else "does not reproduce"


def evaluate(report: Report) -> Outcome:
    runs = {"main": simulate(resolve_flags(**report.flags)).to_dict()}
    if report.fix:
        runs["fix"] = simulate(resolve_flags(**{**report.flags, **report.fix})).to_dict()
    rows = []
    for check in report.checks:
        value = check.read(runs[check.run])
        rows.append((check, value, value is not None and check.holds(value)))
    return Outcome(report, rows)


def _command(flags: dict[str, str]) -> str:
    return shlex.join(command_line(dict(flags)))


def render_reports() -> str:
    outcomes = [evaluate(r) for r in REPORTS]
    lines = ["| report | release | verdict | checks held |", "|---|---|---|---|"]
    for o in outcomes:
        r = o.report
        lines.append(
            f"| [{r.title.split(':')[0]}](#{r.key}) | {r.release} | **{o.verdict}** | {o.held}/{len(o.rows)} |"
        )
    for o in outcomes:
        r = o.report
        lines += ["", f'<a id="{r.key}"></a>', f"### {r.title}", "", f"Source: {r.url}. {r.facts}", ""]
        lines += ["```sh", _command(r.flags)]
        if r.fix:
            lines.append(_command({**r.flags, **r.fix}) + "   # the fix")
        lines += ["```", "", "| figure | reported | model | holds |", "|---|---|---|---|"]
        for check, value, ok in o.rows:
            shown = "—" if value is None else check.show(value)
            lines.append(f"| {check.figure} | {check.reported} | {shown} | {'yes' if ok else 'no'} |")
        lines += ["", "Fitted, not reported: " + "; ".join(r.fitted) + "."]
        lines += [
            "",
            f"**{o.verdict.capitalize()}**" + (f": {r.differs}" if o.held < len(o.rows) and r.differs else "."),
        ]
    return "\n".join(lines)


def render(text: str) -> str:
    return fill(text, "reports", render_reports, DOC)


def main(argv: list[str]) -> int:
    return regenerate(DOC, render, argv, "ctsim.cli.validation")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
