"""A real Prometheus server (Debian's ``prometheus``) on a free loopback port, and pages for it to scrape.

The server is the test's own: its config, its TSDB in the test's tmp dir,
stopped and waited for when the test ends. Pages are served from one real
HTTP server, one path per node, and found through a file_sd target list
whose labels set each target's ``instance`` and ``__metrics_path__``, as
Kubernetes service discovery sets a pod's.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.http import free_port, send, serve
from tests.support.needs import need_binary

READY_TIMEOUT_S = 60.0


@contextlib.contextmanager
def pages(render: Callable[[str], str | None]) -> Iterator[str]:
    """Serves ``render(path)`` as a metrics page (404 when None); yields host:port."""

    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        body = render(handler.path)
        if body is None:
            send(handler, "not found", status=404)
        else:
            send(handler, body)

    with serve(respond) as address:
        yield address


@contextlib.contextmanager
def prometheus(
    tmp: Path,
    sd: list[dict[str, Any]] | None = None,
    scrape_interval: str = "1s",
    tsdb: Path | None = None,
    web_config: dict[str, Any] | None = None,
    auth: httpx.Auth | None = None,
    verify: Any = True,
    scheme: str = "http",
    route_prefix: str = "",
    relabel_configs: list[dict[str, Any]] | None = None,
) -> Iterator[str]:
    """Starts Prometheus; yields its base URL once it is ready. ``tsdb``: a data dir to serve (backfilled)."""
    binary = need_binary("prometheus")
    tmp.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": "1m"}}
    if sd is not None:
        (tmp / "targets.json").write_text(json.dumps(sd))
        config["scrape_configs"] = [
            {
                "job_name": "fixtures",
                "scrape_interval": scrape_interval,
                "scrape_timeout": scrape_interval,
                "honor_labels": True,
                "file_sd_configs": [{"files": [str(tmp / "targets.json")], "refresh_interval": "1s"}],
                **({"relabel_configs": relabel_configs} if relabel_configs else {}),
            }
        ]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    args = [
        binary,
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tsdb or tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=30d",
        "--log.level=warn",
    ]
    if route_prefix:  # served under a path, as Thanos's and Mimir's query APIs are
        args += [f"--web.route-prefix={route_prefix}", f"--web.external-url={scheme}://127.0.0.1:{port}{route_prefix}"]
    if web_config is not None:
        (tmp / "web.yml").write_text(yaml.safe_dump(web_config))
        args.append(f"--web.config.file={tmp / 'web.yml'}")
    log = open(tmp / "prometheus.log", "wb")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"{scheme}://127.0.0.1:{port}{route_prefix}"
    try:
        _wait_ready(proc, url, auth, verify, tmp / "prometheus.log")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, auth: httpx.Auth | None, verify: Any, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", auth=auth, verify=verify, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus not ready in {READY_TIMEOUT_S:g}s: {log.read_text()[-2000:]}")


def wait_for(url: str, expr: str, want: float, timeout_s: float = 60.0, **kw: Any) -> None:
    """Until the instant query ``expr`` returns ``want`` (e.g. every target scraped twice)."""
    deadline = time.monotonic() + timeout_s
    got: Any = None
    while time.monotonic() < deadline:
        try:
            r = httpx.post(f"{url}/api/v1/query", data={"query": expr}, timeout=5, **kw).json()
        except httpx.TransportError:  # a slow answer on a busy machine is not a wrong one: ask again
            time.sleep(0.25)
            continue
        result = r.get("data", {}).get("result", [])
        got = float(result[0]["value"][1]) if result else None
        if got == want:
            return
        time.sleep(0.25)
    raise AssertionError(f"{expr} = {got}, not {want}, after {timeout_s:g}s")


def backfill(tmp: Path, openmetrics: str) -> Path:
    """A TSDB made by ``promtool tsdb create-blocks-from openmetrics``: exact samples at exact times."""
    promtool = need_binary("promtool")
    source = tmp / "backfill.om"
    source.write_text(openmetrics)
    data = tmp / "data"
    out = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"promtool: {out.stdout[-1000:]} {out.stderr[-1000:]}")
    return data


Series = tuple[str, dict[str, str], Callable[[float], float]]  # metric, labels, value at unix time t


def history(series: list[Series], end: float, step: float, samples: int) -> str:
    """OpenMetrics text of gauges sampled every ``step`` up to ``end``, for ``backfill``."""
    times = [end - (samples - 1 - k) * step for k in range(samples)]
    return openmetrics([(name, labels, [(t, value(t)) for t in times]) for name, labels, value in series])


Points = tuple[str, dict[str, str], list[tuple[float, float]]]  # metric, labels, (unix time, value) samples


def openmetrics(series: list[Points]) -> str:
    """OpenMetrics text of gauges, each sample at its own time (a series may start and stop anywhere), for
    ``backfill``: prometheus-client writes it."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.openmetrics.exposition import generate_latest
    from prometheus_client.registry import Collector, CollectorRegistry

    families: dict[str, GaugeMetricFamily] = {}
    for name, labels, points in series:
        if name not in families:
            families[name] = GaugeMetricFamily(name, name, labels=list(labels))
        for t, v in points:
            families[name].add_metric(list(labels.values()), v, timestamp=t)

    class _History(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            yield from families.values()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_History())
    return generate_latest(registry).decode()
