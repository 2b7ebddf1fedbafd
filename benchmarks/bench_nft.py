"""What `ctsim nft calibrate` costs beside what it measures, and what ctwatch's table count costs.

Needs root, `nft` and `nsenter`. For each size of today's layout (one
endpoint per Service), in a throwaway namespace:

- the Python side of calibrate: writing the ruleset (CPU time of this
  process), against the `nft` process's CPU time loading it;
- calibrate's wall time per size (namespace made and removed, load, listing,
  one more Service) against the `nft` CPU it reports: the overhead the
  calibration itself adds;
- ctwatch's count of the loaded table (one GETTABLE, one sets dump: CPU of
  this process), against a `nft -j list table` of the same table.

Prints ratios within this run; nothing is compared with budgets.

    sudo python benchmarks/bench_nft.py [--sizes 1000,2000,4000,8000]
"""

from __future__ import annotations

import argparse
import time

from ctwatch.sources.kube_proxy import count_table

from ctsim.core.nft_layout import EndpointMix, Layout
from ctsim.kernel import nft_calibrate, nft_ruleset
from ctsim.kernel.netns_conntrack import temporary_netns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000")
    args = ap.parse_args()
    nft_calibrate.probe()
    mix = EndpointMix.every(1)
    print(f"{'Services':>9} {'write (py)':>11} {'nft load':>9} {'py/nft':>7} {'measure wall':>13} {'wall/nft':>9} "
          f"{'count (py)':>11} {'nft -j list':>12} {'count/list':>11}")  # fmt: skip
    for n in (int(s) for s in args.sizes.split(",")):
        t0 = time.process_time()
        script = nft_ruleset.full(Layout.TODAY, n, mix)
        write_s = time.process_time() - t0
        w0 = time.perf_counter()
        sample = nft_calibrate.measure(Layout.TODAY, n, 1)
        wall = time.perf_counter() - w0
        with temporary_netns("bench-nft") as ns:
            nft_calibrate.run_nft(ns, ["-f", "-"], script)
            c0 = time.process_time()
            table = count_table("ip", ns)
            count_s = time.process_time() - c0
            listed = nft_calibrate.run_nft(ns, ["-j", "list", "table", "ip", "kube-proxy"])
        assert table.anonymous_maps == n
        print(
            f"{n:>9,} {write_s:>10.3f}s {sample.full_s:>8.2f}s {write_s / sample.full_s:>7.3f} {wall:>12.2f}s "
            f"{wall / (sample.full_s + sample.list_s + sample.partial_s):>9.2f} {count_s:>10.3f}s "
            f"{listed.cpu_s:>11.3f}s {count_s / listed.cpu_s:>11.2f}"
        )


if __name__ == "__main__":
    main()
