"""50 concurrent scrapers against a live ctwatch on loopback (target: p99 < 100 ms, no errors).

Starts the real ``ctwatch`` on the fixture procfs (nothing privileged),
measures a lone scraper's latency first (the floor, same run), then 50
scrapers at once, 20 requests each, and prints percentiles and their ratio
to the floor.

    python benchmarks/bench_ctwatch_http.py
"""

from __future__ import annotations

import concurrent.futures
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRAPERS = 50
PER_SCRAPER = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> tuple[bool, float]:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
            ok = r.status == 200
    except (urllib.error.URLError, OSError):
        ok = False
    return ok, time.perf_counter() - start


def pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100)[q - 1]


def main() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctwatch", "--path.procfs", str(ROOT / "tests" / "ctwatch" / "fixtures" / "proc"),
         "--collector.disable-defaults", "--collector.nf_conntrack", "--web.listen-address", f"127.0.0.1:{port}",
         "--web.max-requests", "0"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        while not scrape(f"http://127.0.0.1:{port}/healthz")[0]:
            time.sleep(0.1)
        lone = [scrape(url)[1] for _ in range(200)]
        with concurrent.futures.ThreadPoolExecutor(SCRAPERS) as pool:
            results = list(pool.map(lambda _: scrape(url), range(SCRAPERS * PER_SCRAPER)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    lat = [t for _, t in results]
    errors = sum(not ok for ok, _ in results)
    floor = statistics.median(lone)
    print(f"lone scraper: p50 {floor * 1e3:.1f} ms, p99 {pct(lone, 99) * 1e3:.1f} ms (the floor)")
    print(f"{SCRAPERS} at once, {len(results)} requests: p50 {pct(lat, 50) * 1e3:.1f} ms, "
          f"p99 {pct(lat, 99) * 1e3:.1f} ms ({pct(lat, 99) / floor:.1f}x the lone p50), {errors} errors; "
          f"target p99 < 100 ms, no errors")  # fmt: skip


if __name__ == "__main__":
    main()
