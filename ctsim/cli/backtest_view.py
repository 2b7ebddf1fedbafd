"""``ctsim backtest``'s report: what the node saw beside what the model predicts, each figure with its source."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctsim.cli.tables import plain_console
from ctsim.core.printable import printable
from ctsim.fleet.backtest import TOLERANCE_S, TOLERANCE_SHARE, Backtest

_AGREEMENT_STYLE = {"agrees": "green", "slower": "bold red", "faster": "yellow"}


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} s"


def _n(value: float | None) -> str:
    return "— (no series)" if value is None else f"{value:,.0f}"


def render(b: Backtest, console: Console | None = None) -> None:
    console = console or plain_console()
    w = b.window.to_dict()
    console.print(
        Text(f"Backtest of {printable(b.node)}: {w['from_rfc3339']} to {w['to_rfc3339']} ({b.window.seconds:,.0f} s)"),
        style="bold",
    )
    taken = ", ".join(f"{k} {v} ({series})" for k, (v, series) in b.live.items()) or "nothing"
    console.print(Text(f"The node at --from, from its series: {taken}"))
    agreement = b.agreement()
    table = Table("", "observed", "predicted", "agreement", "observed from", box=None, padding=(0, 2))
    obs, pred = b.observed_latency, b.predicted_latency

    def row(label: str, o: str, p: str, key: str | None, source: str) -> None:
        a = agreement.get(key, "") if key else ""
        table.add_row(label, o, p, Text(a, style=_AGREEMENT_STYLE.get(a, "")), Text(source))

    row("pods created", str(len(b.seen)), str(len(b.result.pods)), None, "kube_pod_created, kube_pod_info{node}")
    for q in ("p50", "p90", "max"):
        row(f"creation to Ready {q}", _s(obs[q]), _s(pred[q]), f"ready_latency_{q}", "kube_pod_status_ready_time")
    row(
        "not Ready at --to",
        str(b.observed_not_ready),
        str(b.predicted_not_ready),
        "not_ready",
        "no kube_pod_status_ready_time by --to",
    )
    row("HTTP 429 (endpoint-create)", _n(b.refused.value), str(b.result.counters.add_429), None, b.refused.source)
    row(
        "sandbox failures",
        _n(b.sandbox_failures.value),
        str(b.predicted_sandbox_failures),
        None,
        b.sandbox_failures.source,
    )
    labels = {
        "ct_clean_wait_ok_p50": "waitingForCTClean p50",
        "ct_clean_wait_ok_p90": "waitingForCTClean p90",
        "limiter_wait_endpoint_create_max": "endpoint-create wait max",
    }
    for name, f in b.compared_figures().items():
        label = labels.get(name) or f"GC runs {name.removeprefix('gc_runs_')} (passes + scrubs)"
        count = name.startswith("gc_runs_")
        show = _n if count else _s
        o = "— (no series)" if f["observed"] is None else show(f["observed"])
        p = "—" if f["predicted"] is None else show(f["predicted"])
        row(label, o, p, name if f["agreement"] else None, f["source"])
    console.print(table)
    style = {"agrees": "bold green"}.get(b.verdict, "bold red")
    console.print(
        Text.assemble(
            "Verdict: ",
            (b.verdict, style),
            f" (agreement: within {TOLERANCE_S:g} s + {TOLERANCE_SHARE:.0%} of the predicted latency; not Ready "
            f"within 10 % of the pods); the model alone says {b.result.verdict}",
        )
    )
    for note in b.notes:
        console.print(Text(f"note: {note}", style="dim"))
