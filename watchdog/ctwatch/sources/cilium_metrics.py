"""Cilium agent's own metrics: map pressure and the GC's view, parsed with prometheus-client.

``cilium_bpf_map_pressure{map_name="ct4_global"}`` is count/max, refreshed by
the agent every 30 s by a batched count: with the map's capacity it gives the
entry count for free. The GC interval metric exists from 1.18 on (v1.18.0-pre.1).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctsim.core.bounds import check
from ctsim.core.defaults import CILIUM_PRESSURE_MAPS
from ctsim.core.errors import InputError
from ctsim.core.releases import Release, parse_release
from ctwatch import scrape
from ctwatch.collector import Collector, Cycle, Setting, register_collector
from ctwatch.readings import AgentRelease, Pressure, SourceResult
from ctwatch.scrape import BadMetrics

if TYPE_CHECKING:
    from prometheus_client.core import GaugeMetricFamily

NAME = "cilium_metrics"


@dataclass(frozen=True)
class AgentGC:
    """The agent's conntrack GC as its page tells it; None where the page has no such series."""

    interval_s: float | None = None  # cilium_datapath_conntrack_gc_interval_seconds (1.18 on)
    duration_sum_s: float | None = None  # _gc_duration_seconds_sum, over every label
    runs: float | None = None  # _gc_duration_seconds_count, over every label
    alive_entries: float | None = None  # cilium_datapath_conntrack_gc_entries{status="alive"}, summed


# One request to the agent at a time: a request left waiting on a trickling agent is not joined by another.
_IN_FLIGHT = threading.Semaphore(1)


def fetch(url: str, timeout_s: float) -> str:
    return scrape.fetch(url, timeout_s, _IN_FLIGHT)


def parse(page: str) -> tuple[dict[str, float], AgentGC | None, Release | None]:
    """(pressure by pinned map name, the GC's series where the page has any, the agent's release)."""
    from prometheus_client.parser import text_string_to_metric_families

    pressure: dict[str, float] = {}
    gc: dict[str, float] = {}
    implausible: list[str] = []
    release: Release | None = None
    try:
        families = list(text_string_to_metric_families(page))
    except Exception as exc:  # the parser raises several types on garbage
        raise BadMetrics(f"unparsable metrics page: {exc}") from exc
    for family in families:
        for sample in family.samples:
            if sample.name == "cilium_bpf_map_pressure":
                name = CILIUM_PRESSURE_MAPS.get(sample.labels.get("map_name", ""))
                if name and _plausible(sample, "pressure", implausible):
                    pressure[name] = float(sample.value)
            elif sample.name == "cilium_datapath_conntrack_gc_interval_seconds":
                if _plausible(sample, "gc_interval", implausible):
                    gc["interval_s"] = float(sample.value)
            elif sample.name == "cilium_datapath_conntrack_gc_duration_seconds_sum":
                gc["duration_sum_s"] = gc.get("duration_sum_s", 0.0) + float(sample.value)
            elif sample.name == "cilium_datapath_conntrack_gc_duration_seconds_count":
                gc["runs"] = gc.get("runs", 0.0) + float(sample.value)
            elif sample.name == "cilium_datapath_conntrack_gc_entries" and sample.labels.get("status") == "alive":
                gc["alive_entries"] = gc.get("alive_entries", 0.0) + float(sample.value)
            elif sample.name == "cilium_version":
                with contextlib.suppress(InputError):  # a version we cannot read is no version
                    release = parse_release(sample.labels.get("version", "").split("-")[0])  # 1.18.0-rc.1: 1.18.0
    if implausible and not pressure:  # what the page says of the CT maps cannot be: the source is down, and why
        raise BadMetrics("; ".join(implausible))
    if not pressure and not gc and release is None:
        raise BadMetrics("no cilium_bpf_map_pressure, conntrack GC metrics or cilium_version on the page")
    return pressure, AgentGC(**gc) if gc else None, release


def _plausible(sample: object, kind: str, implausible: list[str]) -> bool:
    """Within the bounds of the flag the figure stands for (``ctsim.core.bounds``); else left out, and named."""
    value = float(sample.value)  # type: ignore[attr-defined]
    why = check(kind, value)
    if why is None:
        return True
    labels = ",".join(f'{k}="{v}"' for k, v in sample.labels.items())  # type: ignore[attr-defined]
    implausible.append(f"{sample.name}{{{labels}}} = {value:.6g} is implausible ({why}): left out")  # type: ignore[attr-defined]
    return False


def collect(url: str, timeout_s: float) -> tuple[dict[str, float], AgentGC | None, Release | None]:
    return parse(fetch(url, timeout_s))


def _collect(cycle: Cycle, result: SourceResult) -> None:
    pressure, gc, release = collect(cycle.config["metrics_url"], cycle.config["metrics_timeout_s"])
    result.readings = [*(Pressure(NAME, name, ratio) for name, ratio in pressure.items()), *([gc] if gc else [])]
    if release is not None:
        result.readings.append(AgentRelease(NAME, release))


def _expose(result: SourceResult) -> Iterator[GaugeMetricFamily]:
    """The agent's GC interval, as ctwatch read it (where the agent exports it)."""
    from prometheus_client.core import GaugeMetricFamily

    for gc in result.of(AgentGC):
        if gc.interval_s is not None:
            yield GaugeMetricFamily(
                "ctwatch_cilium_gc_interval_seconds",
                "Cilium's current conntrack GC interval (cilium_datapath_conntrack_gc_interval_seconds).",
                value=gc.interval_s,
            )


def _timeout(text: str) -> float:
    from ctsim.core.quantity import parse_duration

    return parse_duration(text, "--cilium.metrics-timeout", minimum=0.01, maximum=60.0)


DEFAULT_URL = "http://127.0.0.1:9962/metrics"
SETTINGS = (
    Setting(
        "metrics_url", DEFAULT_URL, "--cilium.metrics-url", "URL", "The Cilium agent's metrics (http or https).",
        DEFAULT_URL, scrape.url_setting("--cilium.metrics-url"),
    ),
    Setting(
        "metrics_timeout_s", 2.0, "--cilium.metrics-timeout", "DURATION", "Give up on the agent after this.", "2s",
        _timeout,
    ),
)  # fmt: skip
register_collector(Collector(NAME, "Cilium's metrics.", _collect, settings=SETTINGS, expose=_expose))
