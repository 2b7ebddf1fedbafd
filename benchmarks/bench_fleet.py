"""``ctsim fleet`` at 1,000 and 10,000 nodes read from a real Prometheus, and ``--simulate`` on 1 and 2 processes.

The fleet is ctwatch's series for every node, backfilled into a TSDB by
``promtool tsdb create-blocks-from openmetrics`` (a scraped fleet of 10,000
targets would need a page server faster than this 2-core VM has; the
queries Prometheus answers are the same). The floor is measured in the same
run: the seconds the queries themselves took (``Client.seconds``, the wait
for Prometheus's answers). Reported: the whole read-and-rank over that
floor (target <= 5x), the query count at both sizes (target: the same),
and the peak memory of one ``ctsim fleet --json`` process (target < 200 MB).

``--simulate 100``: the model on the 100 riskiest rows, on 1 and 2 processes,
alternating, the fastest of two each (target >= 1.7x; wall time, so it needs
two free cores to mean anything).

Run: ``python benchmarks/bench_fleet.py`` (needs Debian's prometheus).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctsim.cli.fleet_view import json_doc
from ctsim.core.profiles import get_profile
from ctsim.fleet.prometheus import Client
from ctsim.fleet.risk import Assumptions, assess, rank
from ctsim.fleet.series import Query, read_fleet
from ctsim.fleet.simulate import simulate
from ctsim.inputs.given import Given
from tests.support.prometheus import Series, backfill, history, prometheus

STEP = 60.0
SAMPLES = 6  # deriv() over 5 minutes


def _series(nodes: int) -> list[Series]:
    """ctwatch's series of ``nodes`` nodes; a fifth of them hold still, the others grow."""
    out: list[Series] = []
    for i in range(nodes):
        node = f"node-{i:05d}"
        cap = 1 << (18 + i % 7)
        tcp = (i * 7919) % cap
        tcp_map = {"instance": node, "source": "bpf", "family": "ipv4", "map": "cilium_ct4_global"}
        any_map = {**tcp_map, "map": "cilium_ct_any4_global"}
        one = {"instance": node}
        out += [
            ("ctwatch_entries", tcp_map, lambda t, tcp=tcp, per_s=(i % 5) / 6: tcp + per_s * (t % 3600)),
            ("ctwatch_entries", any_map, lambda t, n=tcp // 4: n),
            ("ctwatch_max_entries", tcp_map, lambda t, cap=cap: cap),
            ("ctwatch_max_entries", any_map, lambda t, cap=cap: cap // 2),
            ("ctwatch_walk_rate_entries_per_second", {**one, "family": "ipv4", "source": "measured"},
             lambda t, r=150_000 + 1_000 * (i % 50): r),
            ("ctwatch_burst_pods", one, lambda t: 10),
            ("ctwatch_deadline_seconds", one, lambda t: 90),
            ("ctwatch_level", {**one, "family": "ipv4"}, lambda t: 0),
            ("ctwatch_source_up", {**one, "source": "bpf"}, lambda t: 1),
        ]  # fmt: skip
    return out


def _tsdb(tmp: Path, nodes: int, end: float) -> Path:
    return backfill(tmp, history(_series(nodes), end, STEP, SAMPLES))


def _read_and_rank(url: str, end: float) -> tuple[float, float, int, list]:
    """(whole seconds, query seconds, queries, rows): the fastest of three."""
    best = None
    for _ in range(3):
        start = time.perf_counter()
        with Client(url) as client:
            read = read_fleet(client, Query(window="5m", at=end))
            rows = rank([assess(f, Assumptions(profile=get_profile("cilium-1.16"))) for f in read.nodes.values()])
            json_doc(rows, read, url, "instance", client.seconds)
            whole, queried = time.perf_counter() - start, client.seconds
        if best is None or whole < best[0]:
            best = (whole, queried, client.queries, rows)
    assert best is not None
    return best


def _peak_rss_mb(url: str, end: float) -> float:
    """The peak RSS of one ``ctsim fleet --json`` process: VmHWM, as that process reports it at exit.

    Not getrusage's ru_maxrss: Linux carries it across fork and exec, so a child of this (large)
    benchmark would report the benchmark's own peak.
    """
    code = (
        "import sys\n"
        "from ctsim.cli.app import main\n"
        f"sys.argv = ['ctsim', 'fleet', '--prometheus-url', {url!r}, '--time', '{end:.0f}', '--window', '5m',"
        " '--json']\n"
        "try:\n    main()\n"
        "finally:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "    print(hwm, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return int(out.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    end = float(int(time.time()) - 30)
    for nodes in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            t = time.perf_counter()
            data = _tsdb(tmp, nodes, end)
            made = time.perf_counter() - t
            with prometheus(tmp / "server", tsdb=data) as url:
                whole, queried, queries, rows = _read_and_rank(url, end)
                rss = _peak_rss_mb(url, end) if nodes == 10_000 else None
                print(
                    f"{nodes:>6,} nodes: read and ranked in {whole:.3f} s; the queries took {queried:.3f} s: "
                    f"{whole / queried:.2f}x the floor (target <= 5x); {queries} queries; {len(rows):,} rows "
                    f"(TSDB made in {made:.1f} s)"
                )
                if rss is not None:
                    print(f"{'':>14}one `ctsim fleet --json` process: peak RSS {rss:.0f} MB (target < 200 MB)")
                if nodes == 1_000:
                    _simulate(rows)


def _simulate(rows: list) -> None:
    if (os.cpu_count() or 1) < 2:
        print("one core: no --simulate scaling to measure")
        return
    wall: dict[int, float] = {}
    for n in (1, 2, 1, 2):
        start = time.perf_counter()
        simulate(rows, 100, Given(), {}, processes=n)
        wall[n] = min(wall.get(n, float("inf")), time.perf_counter() - start)
    print(
        f"--simulate 100: 1 process {wall[1]:.2f} s, 2 processes {wall[2]:.2f} s: "
        f"{wall[1] / wall[2]:.2f}x (target >= 1.7x)"
    )


if __name__ == "__main__":
    main()
