"""What an operator applies: the kustomization renders, every manifest is schema-valid, the dashboard parses."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.support.needs import need_binary

DEPLOY = Path(__file__).parents[2] / "watchdog" / "deploy"
KUBERNETES = "1.32.0"
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # CRDs: no upstream schema to check against


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    kubectl = need_binary("kubectl")
    p = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def test_the_kustomization_renders_the_whole_set(rendered: list[dict]) -> None:
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == ["ConfigMap", "DaemonSet", "PrometheusRule", "Service", "ServiceMonitor"]
    assert {d["metadata"]["namespace"] for d in rendered} == {"kube-system"}


def test_every_kubernetes_manifest_passes_the_schema(rendered: list[dict]) -> None:
    for doc in rendered:
        if doc["kind"] not in OPERATOR_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    # The check can fail: a misspelt field in the DaemonSet is refused.
    (ds,) = [d for d in rendered if d["kind"] == "DaemonSet"]
    broken = copy.deepcopy(ds)
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_operator_resources_point_at_ctwatch() -> None:
    """ServiceMonitor and PodMonitor (CRDs, checked by shape): the job and port the alerts expect."""
    for name, endpoints in (("servicemonitor.yaml", "endpoints"), ("podmonitor.yaml", "podMetricsEndpoints")):
        doc = yaml.safe_load((DEPLOY / name).read_text())
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        assert doc["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "ctwatch"}
        assert doc["spec"]["jobLabel"] == "app.kubernetes.io/name"  # job="ctwatch", as CtwatchDown expects
        (endpoint,) = doc["spec"][endpoints]
        assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"


def test_the_daemonset_probes_healthz_and_mounts_no_token() -> None:
    ds = yaml.safe_load((DEPLOY / "daemonset.yaml").read_text())
    pod = ds["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_the_dockerfile_pins_its_base_and_labels_the_image() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM (\S+)", text, re.M)
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    for label in ("title", "description", "version", "licenses"):
        assert f"org.opencontainers.image.{label}=" in text


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    promtool = need_binary("promtool")
    dash = json.loads((DEPLOY / "ctwatch-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 9
    wanted = ("ctwatch_entries", "ctwatch_max_entries", "ctwatch_projected_burst_seconds", "ctwatch_deadline_seconds",
              "ctwatch_safe_burst_pods", "ctwatch_level", "ctwatch_source_up")  # fmt: skip
    assert all(any(w in e for e in exprs) for w in wanted)
    # promtool parses PromQL when it checks rules: each query becomes a recording rule.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": e.replace("$node", ".*")} for i, e in enumerate(exprs)
    ]}]}  # fmt: skip
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    p = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    # And it would say so: a broken query fails.
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "rate(ctwatch_level"}]}]})
    )
    assert subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, check=False).returncode != 0


def test_a_runbook_link_opens_with_the_shipped_relabelling(tmp_path: Path) -> None:
    """A real Prometheus scrapes a real ctwatch with the ServiceMonitor's relabelling: `instance` stays host:port,
    the node's name lands in `node`, and the alerts' runbook link, filled from those labels, opens."""
    import re
    import subprocess
    import sys
    import time

    import httpx
    from ctwatch.rules import SERVED

    from tests.ctwatch.env import copy_procfs
    from tests.support.http import free_port
    from tests.support.prometheus import prometheus, wait_for

    monitor = yaml.safe_load((DEPLOY / "servicemonitor.yaml").read_text())
    (endpoint,) = monitor["spec"]["endpoints"]
    snake = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    relabel = [{snake.get(k, k): v for k, v in r.items()} for r in endpoint["relabelings"]]
    port = free_port()
    ctwatch = subprocess.Popen(
        [sys.executable, "-m", "ctwatch", "--path.procfs", str(copy_procfs(tmp_path)), "--collector.disable-defaults",
         "--collector.nf_conntrack", "--web.listen-address", f"127.0.0.1:{port}", "--interval", "1s"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        sd = [
            {
                "targets": [f"127.0.0.1:{port}"],
                "labels": {"job": "ctwatch", "__meta_kubernetes_pod_node_name": "node-b"},
            }
        ]
        with prometheus(tmp_path / "p", sd, relabel_configs=relabel) as url:
            wait_for(url, "count(ctwatch_source_up)", 1.0)
            answer = httpx.post(f"{url}/api/v1/query", data={"query": "ctwatch_source_up"}, timeout=10).json()
        labels = answer["data"]["result"][0]["metric"]
        assert labels["node"] == "node-b" and labels["instance"] == f"127.0.0.1:{port}", labels
        # The template, filled as Alertmanager fills it from the alert's labels.
        link = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], SERVED)
        deadline = time.monotonic() + 30  # beside busy processes a page can take seconds
        status, text = None, ""
        while status != 200 and time.monotonic() < deadline:
            try:
                page = httpx.get(link, timeout=5)
                status, text = page.status_code, page.text
            except httpx.TransportError as exc:
                status, text = None, repr(exc)
            if status != 200:
                time.sleep(0.2)
        assert status == 200 and "CtwatchScrubBurstExceedsDeadline" in text, (link, status, text[:300])
    finally:
        ctwatch.terminate()
        ctwatch.wait(timeout=30)
