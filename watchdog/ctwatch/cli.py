"""The ``ctwatch`` command line, with node_exporter's flag style (``--path.procfs``, ``--web.listen-address``)."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated, Optional

import typer

from ctsim.errors import InputError, run_cli

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
Str = Optional[str]  # noqa: UP045 - typer reads Optional at runtime
DEFAULT_LISTEN = ":10962"  # outside 9100-9999, as Prometheus asks of new exporters


def parse_listen(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--web.listen-address: expected [host]:port, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@app.command()
def main_command(
    procfs: Annotated[str, typer.Option("--path.procfs", help="procfs mountpoint.")] = "/proc",
    bpffs: Annotated[
        str, typer.Option("--path.bpffs", help="bpffs mountpoint (Cilium pins under tc/globals/).")
    ] = "/sys/fs/bpf",
    netns: Annotated[Str, typer.Option("--netns", help="Read nf_conntrack of this named netns over netlink.")] = None,
    metrics_url: Annotated[
        str, typer.Option("--cilium.metrics-url", help="The Cilium agent's metrics.")
    ] = "http://127.0.0.1:9962/metrics",
    metrics_timeout: Annotated[
        str, typer.Option("--cilium.metrics-timeout", help="Give up on the agent after this.")
    ] = "2s",
    sample_budget: Annotated[
        str, typer.Option("--bpf.sample-budget", help="Time spent timing the walk rate per cycle (0s: never).")
    ] = "20ms",
    nf: Annotated[
        bool, typer.Option("--collector.nf_conntrack/--no-collector.nf_conntrack", help="Kernel nf_conntrack.")
    ] = True,
    bpf: Annotated[bool, typer.Option("--collector.bpf/--no-collector.bpf", help="Cilium's pinned CT maps.")] = True,
    cilium: Annotated[
        bool, typer.Option("--collector.cilium_metrics/--no-collector.cilium_metrics", help="Cilium's metrics.")
    ] = True,
    listen: Annotated[str, typer.Option("--web.listen-address", help="Serve /metrics here.")] = DEFAULT_LISTEN,
    textfile: Annotated[
        Str, typer.Option("--textfile", help="Also write each collection here (node_exporter's textfile collector).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one collection and exit.")] = False,
    interval: Annotated[str, typer.Option("--interval", help="Time between collections.")] = "15s",
    burst: Annotated[str, typer.Option("--burst", help="Pod creates assumed to queue on the CT lock at once.")] = "10",
    deadline: Annotated[str, typer.Option("--deadline", help="cilium-cni's API client timeout.")] = "90s",
    rate: Annotated[Str, typer.Option("--rate", help="Fallback walk rate, entries/s, when none is measured.")] = None,
    calibration: Annotated[
        Str, typer.Option("--calibration", help="Fallback walk rate from `ctsim calibrate`.")
    ] = None,
    warning_ratio: Annotated[
        str, typer.Option("--warning-ratio", help="Warn when the burst projection passes this share of the deadline.")
    ] = "0.5",
    critical_ratio: Annotated[
        str, typer.Option("--critical-ratio", help="Critical from this share of the deadline.")
    ] = "1.0",
) -> None:
    """Warn through Prometheus before conntrack scrubs outgrow the CNI deadline."""
    from prometheus_client import generate_latest, start_http_server, write_to_textfile

    from ctsim.calibration import load
    from ctsim.profiles import PUBLISHED_ENTRIES_PER_S
    from ctsim.quantity import parse_count, parse_duration, parse_float
    from ctwatch.assess import Assessor, Thresholds
    from ctwatch.exposition import SnapshotCollector, new_registry
    from ctwatch.watcher import Config, Watcher, log_event

    thresholds = Thresholds(
        burst=parse_count(burst, "--burst", minimum=1),
        deadline_s=parse_duration(deadline, "--deadline"),
        warning_ratio=parse_float(warning_ratio, "--warning-ratio", low=0.0, high=10.0),
        critical_ratio=parse_float(critical_ratio, "--critical-ratio", low=0.0, high=10.0),
    )
    if rate is not None:
        fallback, fallback_source = float(parse_count(rate, "--rate", minimum=1)), "configured"
    elif calibration is not None:
        fallback, fallback_source = load(calibration).per_entry_entries_per_s, "calibrated"
    else:
        fallback, fallback_source = PUBLISHED_ENTRIES_PER_S, "published"
    config = Config(
        procfs=procfs,
        bpffs=bpffs,
        netns=netns,
        metrics_url=metrics_url,
        metrics_timeout_s=parse_duration(metrics_timeout, "--cilium.metrics-timeout"),
        bpf_sample_budget_s=parse_duration(sample_budget, "--bpf.sample-budget", allow_zero=True),
        enable_nf_conntrack=nf,
        enable_bpf=bpf,
        enable_cilium_metrics=cilium,
    )
    period = parse_duration(interval, "--interval")
    host, port = parse_listen(listen)
    watcher = Watcher(config, Assessor(thresholds, fallback, fallback_source))
    enabled = tuple(n for n, on in (("nf_conntrack", nf), ("bpf", bpf), ("cilium_metrics", cilium)) if on)
    collector = SnapshotCollector(thresholds, enabled)
    registry = new_registry(collector)

    if once:
        collector.update(watcher.collect())
        if textfile:
            write_to_textfile(textfile, registry)
        sys.stdout.write(generate_latest(registry).decode())
        return

    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise InputError(f"--web.listen-address: cannot listen on {listen}: {exc.strerror or exc}") from None
    log_event("listening", address=listen, interval_s=period, sources=list(enabled))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        collector.update(watcher.collect())
        if textfile:
            try:
                write_to_textfile(textfile, registry)  # atomic: a temp file, then rename
            except OSError as exc:
                log_event("textfile write failed", path=textfile, error=str(exc))
        stop.wait(period)


def main() -> None:
    run_cli(app, "ctwatch")
