"""ctwatch's alerting rules, generated from one place so their thresholds are the flags'.

``ctwatch rules`` prints them (plain rule file, or a PrometheusRule for the
Prometheus Operator); ``watchdog/deploy/`` ships that output with the
defaults, and a test keeps them equal. Every alert links its runbook section
(``ctwatch.runbook``): by default on the ctwatch that fired it, which serves
the runbook at ``/runbook``, so the link opens wherever the exporter's
address does; ``--runbook-base`` points them at your own copy instead.

The alerts never go silent because data vanished: ctwatch keeps exporting a
family's last good projection while its sources fail (with
``ctwatch_projection_age_seconds``), so a firing critical keeps firing; a
source down, a stale projection, and ctwatch itself down or absent each
alert of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ctsim.core.quantity import format_duration
from ctwatch.runbook import RUNBOOK_PATH, anchor

# Where a default runbook_url points: the firing ctwatch's own page, or for
# CtwatchDown (that ctwatch does not answer) the first ctwatch of the job that
# does. CtwatchAbsent has none to point at: without a base it carries no link,
# and its description is its runbook.
SERVED = "http://{{ $labels.instance }}" + RUNBOOK_PATH
# The node an alert is about: the shipped monitors keep ``instance`` as the scraped host:port (so the link
# above opens) and put the node's name in ``node``; a scrape without that relabelling names it by instance.
NODE = "{{ with $labels.node }}{{ . }}{{ else }}{{ $labels.instance }}{{ end }}"
ANOTHER = (
    'http://{{{{ with sortByLabel "instance" (query `up{{{job}}} == 1`) }}}}'
    '{{{{ . | first | label "instance" }}}}{{{{ end }}}}' + RUNBOOK_PATH
)


@dataclass(frozen=True)
class RuleSettings:
    warning_ratio: float = 0.5
    critical_ratio: float = 1.0
    source_down_for: float = 600.0  # seconds
    stale_after: float = 900.0  # seconds a kept projection may age before it alerts
    job: str = "ctwatch"
    runbook_base: str | None = None  # None: the page ctwatch serves


def template_error(text: str) -> str | None:
    """Why ``text`` is not a Go template Prometheus can expand (unclosed or empty ``{{ }}``); None where it is.

    Only the actions' shape is checked, which is what a URL base with a ``$labels`` in it can get wrong;
    promtool's full check of the rules file stays the test's.
    """
    rest = text
    while (start := rest.find("{{")) >= 0 or "}}" in rest:
        end = rest.find("}}")
        if start < 0 or (0 <= end < start):
            return "a '}}' with no '{{' before it"
        end = rest.find("}}", start + 2)
        if end < 0:
            return "a '{{' that is never closed"
        action = rest[start + 2 : end].strip(" -")
        if not action or "{{" in action:
            return f"'{rest[start : end + 2]}' is not a template action"
        if action.count('"') % 2 or action.count("`") % 2:
            return f"'{rest[start : end + 2]}' has an unterminated string"
        rest = rest[end + 2 :]
    return None


def runbook_url(s: RuleSettings, alert: str) -> str | None:
    """The alert's runbook section: under ``--runbook-base``, else on a ctwatch that answers."""
    if s.runbook_base is not None:
        base = s.runbook_base
    elif alert == "CtwatchAbsent":
        return None
    elif alert == "CtwatchDown":
        base = ANOTHER.format(job=f'job="{s.job}"')
    else:
        base = SERVED
    return f"{base}#{anchor(alert)}"


def _rule(
    s: RuleSettings, alert: str, expr: str, for_s: float, severity: str, summary: str, description: str
) -> dict[str, Any]:
    annotations = {"summary": summary, "description": description}
    url = runbook_url(s, alert)
    if url is not None:
        annotations["runbook_url"] = url
    return {
        "alert": alert,
        "expr": expr,
        "for": _prom_duration(for_s),
        "labels": {"severity": severity},
        "annotations": annotations,
    }


def _prom_duration(seconds: float) -> str:
    whole = int(seconds)
    if whole % 3600 == 0:
        return f"{whole // 3600}h"
    if whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{whole}s"


def _pct(ratio: float) -> str:
    return f"{ratio * 100:g} %"


def groups(s: RuleSettings) -> list[dict[str, Any]]:
    job = f'job="{s.job}"'
    rules = [
        _rule(
            s,
            "CtwatchScrubBurstNearDeadline",
            f"ctwatch_burst_deadline_ratio >= {s.warning_ratio:g}",
            600,
            "warning",
            "A burst of pod creates would use {{ $value | humanizePercentage }} of the CNI deadline",
            "On " + NODE + " ({{ $labels.family }}) a burst of pods queued on the CT lock is projected "
            f"to take {{{{ $value | humanizePercentage }}}} of the CNI deadline "
            f"(warning from {_pct(s.warning_ratio)}). Shorten conntrack-gc-interval (e.g. 60s) "
            "or cap the CT map before pods start timing out.",
        ),
        _rule(
            s,
            "CtwatchScrubBurstExceedsDeadline",
            f"ctwatch_burst_deadline_ratio >= {s.critical_ratio:g}",
            120,
            "critical",
            "Pod creates in a burst will time out behind conntrack scrubs",
            "On " + NODE + " ({{ $labels.family }}) a burst of pods queued on the CT lock is projected "
            f"to take {{{{ $value | humanizePercentage }}}} of the CNI deadline (critical from "
            f'{_pct(s.critical_ratio)}): creates will fail with "Cilium API client timeout exceeded" '
            "and may not recover.",
        ),
        _rule(
            s,
            "CtwatchScrubWillOutgrowDeadline",
            f"ctwatch_seconds_until_deadline < 6 * 3600 and ctwatch_burst_deadline_ratio < {s.critical_ratio:g}",
            900,
            "warning",
            "At its current growth the CT table reaches the deadline in {{ $value | humanizeDuration }}",
            "On " + NODE + " ({{ $labels.family }}) the conntrack table grows fast enough that a burst "
            "of pod creates will outlast the CNI deadline within {{ $value | humanizeDuration }}.",
        ),
        _rule(
            s,
            "KubeProxyFullSyncNearHealthz",
            f"ctwatch_kube_proxy_full_sync_deadline_ratio >= {s.warning_ratio:g}",
            600,
            "warning",
            "kube-proxy's full nftables sync would take {{ $value | humanizePercentage }} of its /healthz threshold",
            "On " + NODE + " kube-proxy's table (counted by ctwatch) projects a full sync, the one every "
            "kube-proxy start-up and every failed sync runs, at {{ $value | humanizePercentage }} of "
            f"2 x syncPeriod (warning from {_pct(s.warning_ratio)}). The table grows with every Service in the "
            "cluster: move one-endpoint Services to a kube-proxy with the stop-gap (PR #140723), or plan the "
            "cluster's Services with `ctsim nft run`.",
        ),
        _rule(
            s,
            "KubeProxyFullSyncExceedsHealthz",
            f"ctwatch_kube_proxy_full_sync_deadline_ratio >= {s.critical_ratio:g}",
            120,
            "critical",
            "A kube-proxy restart on " + NODE + " will fail /healthz for the whole of its full sync",
            "On " + NODE + " the projected full nftables sync is {{ $value | humanizePercentage }} of "
            "kube-proxy's /healthz threshold: a restarted kube-proxy reports unhealthy until it ends, and a "
            "liveness probe on /healthz restarts it into another full sync. Do not restart kube-proxy on "
            "this node until the table is smaller.",
        ),
        _rule(
            s,
            "CtwatchSourceDown",
            "ctwatch_source_up == 0",
            s.source_down_for,
            "warning",
            "ctwatch cannot read {{ $labels.source }} on " + NODE,
            f"For {format_duration(s.source_down_for)} or more. ctwatch keeps serving the other sources and the "
            "last good projection; see its log for the reason.",
        ),
        _rule(
            s,
            "CtwatchProjectionStale",
            f"ctwatch_projection_age_seconds > {s.stale_after:g}",
            0,
            "warning",
            "ctwatch's projection for {{ $labels.family }} on " + NODE + " is {{ $value | humanizeDuration }} old",
            "No source has counted this family's CT maps since then; the levels shown are the last good ones.",
        ),
        _rule(
            s,
            "CtwatchDown",
            f"up{{{job}}} == 0",
            300,
            "warning",
            "Prometheus cannot scrape ctwatch on " + NODE,
            "Nothing warns of conntrack scrubs on this node while ctwatch is down.",
        ),
        _rule(
            s,
            "CtwatchAbsent",
            f"absent(up{{{job}}})",
            900,
            "warning",
            f"No ctwatch target (job {s.job}) is being scraped",
            "ctwatch is not deployed, or Prometheus lost its targets: no node is watched for scrub stalls.",
        ),
    ]
    for rule in rules:
        if rule["for"] in ("0s", "0m", "0h"):
            del rule["for"]
    return [{"name": "ctwatch", "rules": rules}]


def alerts(s: RuleSettings | None = None) -> list[str]:
    return [r["alert"] for g in groups(s or RuleSettings()) for r in g["rules"]]


HEADER = """\
# Prometheus alerting rules for ctwatch, generated by `ctwatch rules{args}`.
# Regenerate with your thresholds rather than editing: they must match the
# --warning-ratio/--critical-ratio ctwatch runs with. Runbooks: each ctwatch's
# /runbook page, or --runbook-base.
"""


def render(s: RuleSettings, fmt: str = "rules", args: str = "") -> str:
    """The rule file (``rules``) or the Prometheus Operator's PrometheusRule (``prometheusrule``)."""
    doc: dict[str, Any] = {"groups": groups(s)}
    if fmt == "prometheusrule":
        doc = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {
                "name": "ctwatch",
                "namespace": "kube-system",
                "labels": {"app.kubernetes.io/name": "ctwatch", "app.kubernetes.io/part-of": "ctsim"},
            },
            "spec": doc,
        }
    body = yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)
    return HEADER.format(args=args) + body
