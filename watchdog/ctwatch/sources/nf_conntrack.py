"""The kernel's nf_conntrack table: count and limit, from procfs or from netlink in a netns.

``<procfs>/sys/net/netfilter/nf_conntrack_{count,max}`` is what node_exporter's
conntrack collector reads; with ``--netns`` the same numbers come from
``IPCTNL_MSG_CT_GET_STATS`` in that namespace (one message, never a dump).
"""

from __future__ import annotations

from pathlib import Path

from ctsim.core.errors import InputError
from ctwatch.collector import Collector, Cycle, Setting, register_collector
from ctwatch.readings import MapReading, SourceResult

NAME = "nf_conntrack"


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def collect(procfs: str, netns: str | None = None) -> list[MapReading]:
    if netns:
        from ctsim.kernel.netns_conntrack import stats

        entries, max_entries = stats(netns)
    else:
        base = Path(procfs) / "sys" / "net" / "netfilter"
        entries = _read_int(base / "nf_conntrack_count")
        max_entries = _read_int(base / "nf_conntrack_max")
    if not 0 < max_entries <= 1 << 32 or not 0 <= entries <= max_entries:
        # nf_conntrack_max is an unsigned int, and the count never stays above it: a procfs (or a fixture)
        # that says otherwise is not the kernel's table, and the source is down rather than exported.
        raise ValueError(f"nf_conntrack_count {entries} with nf_conntrack_max {max_entries} is not a conntrack table")
    return [MapReading(NAME, "all", "nf_conntrack", entries, max_entries)]


def _collect(cycle: Cycle, result: SourceResult) -> None:
    result.readings = [*collect(cycle.config["procfs"], cycle.config["netns"])]


def _procfs(text: str) -> str:
    if not text.strip():
        raise InputError("--path.procfs: empty path")
    return text


SETTINGS = (
    Setting("procfs", "/proc", "--path.procfs", "PATH", "procfs mountpoint.", "/proc", _procfs),
    Setting("netns", None, "--netns", "NAME", "Read nf_conntrack of this named netns over netlink.", "", str),
)
register_collector(Collector(NAME, "Kernel nf_conntrack.", _collect, settings=SETTINGS))
