"""The ``ctwatch`` command line, with node_exporter's flag style (``--path.procfs``, ``--web.listen-address``).

``ctwatch`` runs the exporter; ``ctwatch rules`` prints the alerting rules for
the thresholds given. Bad input: one line on stderr, exit code 2.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ctsim.cli.command import run_cli, whole_number, with_flags
from ctsim.core.errors import InputError
from ctwatch.collector import Config, all_settings
from ctwatch.sources import REGISTRY

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from ctwatch.assess import Thresholds
    from ctwatch.exposition import SnapshotCollector
    from ctwatch.watcher import Watcher
    from ctwatch.webconfig import WebConfig

app = typer.Typer(
    add_completion=False, pretty_exceptions_enable=False, invoke_without_command=True, rich_markup_mode=None
)
Str = Optional[str]  # noqa: UP045 - typer reads Optional at runtime
DEFAULT_LISTEN = ":10962"  # outside 9100-9999, as Prometheus asks of new exporters
MIN_INTERVAL = 1.0  # seconds between collections; faster only burns CPU


# The thresholds ctwatch runs with, and the rules generated for them, take the same flags.
WarningRatio = Annotated[
    str,
    typer.Option(
        "--warning-ratio", metavar="RATIO", help="Warn when the burst projection passes this share of the deadline."
    ),
]
CriticalRatio = Annotated[
    str, typer.Option("--critical-ratio", metavar="RATIO", help="Critical from this share of the deadline.")
]


def parse_listen(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--web.listen-address: expected [host]:port, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_ratios(warning_ratio: str, critical_ratio: str) -> tuple[float, float]:
    from ctsim.core.quantity import parse_float

    warning = parse_float(warning_ratio, "--warning-ratio", low=0.01, high=10.0)
    critical = parse_float(critical_ratio, "--critical-ratio", low=0.01, high=10.0)
    if critical <= warning:
        raise InputError(f"--critical-ratio: must be above --warning-ratio ({warning:g}), got {critical:g}")
    return warning, critical


def _version(value: bool) -> None:
    if value:
        from ctwatch import __version__

        print(f"ctwatch {__version__}")
        raise typer.Exit()


def _thresholds(burst: str, deadline: str, warning_ratio: str, critical_ratio: str) -> Thresholds:
    """What the projection is held against: the burst, the deadline, the two ratios."""
    from ctsim.core.bounds import MAX_DEADLINE, MAX_PODS
    from ctsim.core.quantity import parse_count, parse_duration
    from ctwatch.assess import Thresholds

    warning, critical = parse_ratios(warning_ratio, critical_ratio)
    return Thresholds(
        burst=parse_count(burst, "--burst", minimum=1, maximum=MAX_PODS),  # the bounds ctsim run's flags meet
        deadline_s=parse_duration(deadline, "--deadline", minimum=1.0, maximum=MAX_DEADLINE),
        warning_ratio=warning,
        critical_ratio=critical,
    )


def _fallback_rate(rate: str | None, calibration: str | None) -> tuple[float, str]:
    """The walk rate used until one is measured (and always, when given): --rate, the calibration, or published."""
    from ctsim.core.bounds import MAX_WALK_RATE
    from ctsim.core.calibration import load
    from ctsim.core.profiles import PUBLISHED_ENTRIES_PER_S
    from ctsim.core.quantity import parse_count

    if rate is not None:
        return float(parse_count(rate, "--rate", minimum=1, maximum=MAX_WALK_RATE)), "configured"
    if calibration is not None:
        return load(calibration).per_entry_entries_per_s, "calibrated"
    return PUBLISHED_ENTRIES_PER_S, "published"


def _enabled(flag: bool | None, disable_defaults: bool) -> bool:
    """node_exporter's rule: a collector is on unless disabled, or off under --collector.disable-defaults."""
    return (not disable_defaults) if flag is None else flag


def collector_toggles(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds ``--collector.<name>/--no-collector.<name>`` for every registered collector; ``command`` gets
    ``collectors={name: True | False | None}`` (None: not given)."""
    toggles: dict[str, tuple[Any, Any]] = {
        f"collector_{name}": (
            Annotated[
                Optional[bool],  # noqa: UP045
                typer.Option(f"--collector.{name}/--no-collector.{name}", help=c.help),
            ],
            None,
        )
        for name, c in REGISTRY.items()
    }

    def build(values: dict[str, Any]) -> dict[str, Any]:
        return {"collectors": {name: values[f"collector_{name}"] for name in REGISTRY}}

    return with_flags(command, toggles, build, {"collectors"}, last=True)


def collector_settings(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds every registered collector's own flags (``Setting.flag``), first in --help; ``command`` gets
    ``settings={key: the flag's text, or None}``, parsed by ``parse_settings`` for the collectors that are on."""
    flagged = {key: s for key, s in all_settings().items() if s.flag is not None}
    flags: dict[str, tuple[Any, Any]] = {
        f"setting_{key}": (
            Annotated[
                Optional[str],  # noqa: UP045
                typer.Option(s.flag, metavar=s.metavar, help=s.help, show_default=bool(s.shown)),
            ],
            s.shown or None,
        )
        for key, s in flagged.items()
    }

    def build(values: dict[str, Any]) -> dict[str, Any]:
        return {"settings": {key: values[f"setting_{key}"] for key in flagged}}

    return with_flags(command, flags, build, {"settings"})


def parse_settings(texts: dict[str, str | None], on: dict[str, bool]) -> dict[str, object]:
    """Each enabled collector's flags, parsed by the collector's own parser (which names the flag it refuses)."""
    out: dict[str, object] = {}
    for name, c in REGISTRY.items():
        for s in c.settings if on.get(name, True) else ():
            text = texts.get(s.key)
            if text is not None and s.parse is not None:
                out[s.key] = s.parse(text)
    return out


@app.callback()
@collector_toggles
@collector_settings
def main_command(
    ctx: typer.Context,
    collectors: dict[str, bool | None],
    settings: dict[str, str | None],
    disable_defaults: Annotated[
        bool, typer.Option("--collector.disable-defaults", help="Only the collectors enabled explicitly.")
    ] = False,
    listen: Annotated[
        str, typer.Option("--web.listen-address", metavar="[HOST]:PORT", help="Serve /metrics here.")
    ] = DEFAULT_LISTEN,
    max_requests: Annotated[
        int,
        typer.Option(
            "--web.max-requests",
            metavar="INT",
            help="Concurrent /metrics requests (0: no limit).",
            click_type=whole_number("--web.max-requests", 0),
        ),
    ] = 40,
    web_config: Annotated[
        Str,
        typer.Option("--web.config.file", metavar="FILE", help="TLS and basic auth, in the exporter-toolkit's format."),
    ] = None,
    textfile: Annotated[
        Str,
        typer.Option(
            "--textfile",
            metavar="FILE.prom",
            help="Also write each collection here, for node_exporter's textfile collector (which reads only *.prom; "
            "'-': the page on stdout, with --once).",
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one collection and exit.")] = False,
    interval: Annotated[
        str, typer.Option("--interval", metavar="DURATION", help="Time between collections (at least 1s).")
    ] = "15s",
    burst: Annotated[
        str, typer.Option("--burst", metavar="COUNT", help="Pod creates assumed to queue on the CT lock at once.")
    ] = "10",
    deadline: Annotated[
        str, typer.Option("--deadline", metavar="DURATION", help="cilium-cni's API client timeout.")
    ] = "90s",
    rate: Annotated[
        Str, typer.Option("--rate", metavar="ENTRIES/S", help="Walk rate, entries/s: used instead of sampling.")
    ] = None,
    calibration: Annotated[
        Str,
        typer.Option(
            "--calibration", metavar="FILE", help="Walk rate from `ctsim calibrate`: used instead of sampling."
        ),
    ] = None,
    warning_ratio: WarningRatio = "0.5",
    critical_ratio: CriticalRatio = "1.0",
    log_level: Annotated[
        str, typer.Option("--log.level", metavar="LEVEL", help="debug, info, warn or error.")
    ] = "info",
    log_format: Annotated[str, typer.Option("--log.format", metavar="logfmt|json", help="logfmt or json.")] = "logfmt",
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Warn through Prometheus before conntrack scrubs outgrow the CNI deadline."""
    if ctx.invoked_subcommand is not None:
        return
    from ctsim.core.quantity import parse_duration
    from ctwatch import logs
    from ctwatch.assess import Assessor
    from ctwatch.exposition import SnapshotCollector, new_registry
    from ctwatch.watcher import Watcher

    # Checked in this order, so the first bad flag is the one named.
    try:
        logs.configure(log_level, log_format)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    thresholds = _thresholds(burst, deadline, warning_ratio, critical_ratio)
    fallback, fallback_source = _fallback_rate(rate, calibration)
    on = {name: _enabled(flag, disable_defaults) for name, flag in collectors.items()}
    config = Config(toggles=on, once=once, **parse_settings(settings, on))
    if not config.enabled():  # a page without a count, and /healthz saying all is well: nothing to watch
        raise InputError(
            "every collector is off (--no-collector.*, --collector.disable-defaults): turn one on, e.g. --collector.bpf"
        )
    period = parse_duration(interval, "--interval", minimum=MIN_INTERVAL, maximum=86400.0)
    host, port = parse_listen(listen)
    if textfile is not None:
        _check_textfile(textfile, once)
    from ctwatch import webconfig

    web = webconfig.load(web_config) if web_config is not None else None
    pinned = rate is not None or calibration is not None
    watcher = Watcher(config, Assessor(thresholds, fallback, fallback_source, pinned=pinned))
    collector = SnapshotCollector(thresholds, tuple(config.enabled()))
    serving = Serving(listen, host, port, period, max_requests, web, textfile, once)
    _run(watcher, collector, new_registry(collector, process=True), serving)


def _check_textfile(textfile: str, once: bool) -> None:
    """node_exporter's textfile collector reads ``*.prom`` only: any other name would be written and never read."""
    from ctsim.core.files import STDOUT, check_writable

    if textfile == STDOUT:
        if not once:
            raise InputError(
                "--textfile -: standard output takes one page, with --once; as a daemon, name a .prom file"
            )
        check_writable(textfile, "--textfile")
        return
    check_writable(textfile, "--textfile", suffix=".prom")


@dataclass(frozen=True)
class Serving:
    """How the exporter runs, from the flags."""

    listen: str
    host: str
    port: int
    period: float
    max_requests: int
    web: WebConfig | None
    textfile: str | None
    once: bool


def _run(watcher: Watcher, collector: SnapshotCollector, registry: CollectorRegistry, serving: Serving) -> None:
    """Collect once and print, or serve and collect every ``period`` until SIGTERM."""
    from prometheus_client import generate_latest

    from ctsim.core.files import write_atomic
    from ctwatch.logs import log_event
    from ctwatch.readings import WalkRate, readings_of
    from ctwatch.web import serve

    once, textfile, listen, period = serving.once, serving.textfile, serving.listen, serving.period
    if once:
        snapshot = watcher.collect()
        collector.update(snapshot)
        if not snapshot.families:  # a node without Cilium, or with its maps out of reach
            down = [name for name, r in snapshot.results.items() if not r.up]
            why = f"sources down: {', '.join(down)}" if down else "no source reported a CT map"
            log_event("no projection: no Cilium CT map was counted, so no ctwatch_level", level="warn", reason=why)
        spreads = {w.family: w.spread for w in readings_of(snapshot.results, WalkRate)}
        for f in snapshot.families:  # a one-shot rate is one moment's: say how far its samples ranged
            spread = spreads.get(f.family)
            if f.rate_source == "measured" and spread is not None:
                log_event(
                    "walk rate", family=f.family, entries_per_second=round(f.rate), samples=f.rate_samples,
                    slowest_below_fastest=f"{spread:.0%}",
                    note="contention on this CPU only slows samples; --calibration pins the rate",
                )  # fmt: skip
        page = generate_latest(registry).decode()
        if textfile and textfile != "-":  # "-": the page below is the textfile
            write_atomic(textfile, page)
        sys.stdout.write(page)
        return
    try:
        server = serve(
            serving.host, serving.port, registry, lambda: collector.healthy, serving.max_requests, serving.web
        )
    except OSError as exc:
        raise InputError(f"--web.listen-address: cannot listen on {listen}: {exc.strerror or exc}") from None
    log_event("listening", address=listen, interval_s=period, sources=list(collector.enabled))
    stop = threading.Event()
    from ctwatch.collector import STOPPING

    def terminate(*_: object) -> None:
        stop.set()
        STOPPING.set()  # a collection waiting on a slow source gives up now

    signal.signal(signal.SIGTERM, terminate)
    textfile_failing = False
    try:
        while not stop.is_set():
            collector.update(watcher.collect())
            if textfile:
                try:
                    write_atomic(textfile, generate_latest(registry).decode())  # a temp file, then rename
                    if textfile_failing:
                        log_event("textfile written again", path=textfile)
                    textfile_failing = False
                except (OSError, InputError) as exc:
                    if not textfile_failing:
                        log_event("textfile write failed", level="warn", path=textfile, error=str(exc))
                    textfile_failing = True
            stop.wait(period)
    finally:
        server.shutdown()


@app.command(short_help="Print the alerting rules for these thresholds (redirect to a .yml file).")
def rules(
    warning_ratio: WarningRatio = "0.5",
    critical_ratio: CriticalRatio = "1.0",
    source_down_for: Annotated[
        str, typer.Option("--source-down-for", metavar="DURATION", help="Alert when a source stays down this long.")
    ] = "10m",
    stale_after: Annotated[
        str, typer.Option("--stale-after", metavar="DURATION", help="Alert when a kept projection is older than this.")
    ] = "15m",
    job: Annotated[
        str, typer.Option("--job", metavar="NAME", help="Prometheus job label of the ctwatch targets.")
    ] = "ctwatch",
    runbook_base: Annotated[
        str | None,
        typer.Option(
            "--runbook-base",
            metavar="URL",
            help="Where your copy of docs/watchdog.md is served, e.g. https://wiki.example/ctwatch "
            "(runbook_url prefix; Prometheus templates allowed). Default: each ctwatch's own /runbook "
            "page, http://{{ $labels.instance }}/runbook.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", metavar="rules|prometheusrule", help="rules (a rule file) or prometheusrule.")
    ] = "rules",
) -> None:
    """Print the alerting rules for these thresholds (redirect to a .yml file)."""
    import shlex

    from ctsim.core.quantity import parse_duration
    from ctwatch.rules import RuleSettings, render, template_error

    if fmt not in ("rules", "prometheusrule"):
        raise InputError(f"--format: rules or prometheusrule, got {fmt!r}")
    if not job.strip() or '"' in job or "\\" in job or "`" in job:  # it goes into PromQL and a template
        raise InputError(f"--job: not a usable job label: {job!r}")
    warning, critical = parse_ratios(warning_ratio, critical_ratio)
    settings = RuleSettings(
        warning_ratio=warning,
        critical_ratio=critical,
        source_down_for=parse_duration(source_down_for, "--source-down-for", minimum=60.0, maximum=86400.0),
        stale_after=parse_duration(stale_after, "--stale-after", minimum=60.0, maximum=86400.0),
        job=job,
        runbook_base=runbook_base,
    )
    if runbook_base is not None and not runbook_base.strip():
        raise InputError("--runbook-base: empty; give the URL where docs/watchdog.md is served")
    if runbook_base is not None and (broken := template_error(runbook_base)):
        raise InputError(f"--runbook-base: {broken}: Prometheus could not load the rules")
    if runbook_base is not None and not runbook_base.startswith(("http://", "https://")):
        print(
            f"ctwatch: warning: runbook_url is {runbook_base}#..., a path an alert cannot open; "
            "pass --runbook-base with the http(s) URL where your copy of docs/watchdog.md is served",
            file=sys.stderr,
        )
    args = " ".join(shlex.quote(a) for a in sys.argv[2:])
    sys.stdout.write(render(settings, fmt, f" {args}" if args else ""))


def main() -> None:
    run_cli(app, "ctwatch")
