"""``ctsim calibrate``: measure this kernel's CT walk rates on real, throwaway maps.

Maps are shaped like Cilium's (``BPF_MAP_TYPE_LRU_HASH``, 14-byte IPv4 or
38-byte IPv6 keys, 56-byte values) but are never pinned and never Cilium's:
closing the fd frees them. nf_conntrack is measured in a network namespace
created and removed here.
"""

from __future__ import annotations

import errno
import os
import platform
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ctsim.core.defaults import CT_KEY_SIZES, CT_VALUE_SIZE
from ctsim.core.errors import InputError
from ctsim.kernel.bpf import BPF_MAP_TYPE_LRU_HASH, BPFError, BPFMap

FILL_CHUNK = 65_536
BATCH_SIZES = (256, 1024, 4096)

Progress = Callable[[str, int, int], None]  # (task, advance, total)


class NoPrivilege(InputError):
    """The kernel refused to create a BPF map: not root, no CAP_BPF, or seccomp."""


def ct_key(i: int, key_size: int) -> bytes:
    """A distinct tuple: daddr, saddr, dport, sport, nexthdr, flags (IPv6 pads addresses)."""
    if key_size == CT_KEY_SIZES["ipv4"]:
        return struct.pack("<IIHHBB", i, 0x7F000001, 80, i & 0xFFFF, 6, 0)
    addr = i.to_bytes(16, "little")
    return addr + b"\x7f" + bytes(15) + struct.pack("<HHBB", 80, i & 0xFFFF, 6, 0)


def probe() -> None:
    """Fails fast, in one line, where the kernel will not let us make maps."""
    try:
        BPFMap.create(BPF_MAP_TYPE_LRU_HASH, CT_KEY_SIZES["ipv4"], CT_VALUE_SIZE, 16, name="ctsim_probe").close()
    except BPFError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES, errno.ENOSYS):
            raise NoPrivilege(
                f"cannot create BPF maps here ({os.strerror(exc.errno or 0)}: needs root or CAP_BPF, "
                "and no seccomp filter on bpf(2)); pass --rate to `ctsim run` or use the published 213,000 entries/s"
            ) from None
        raise


def new_ct_map(
    entries: int, key_size: int, progress: Progress | None = None, task: str = "fill", capacity: int | None = None
) -> BPFMap:
    """An LRU hash map of ``capacity`` (default: ``entries``) filled with ``entries`` entries by batch updates."""
    m = BPFMap.create(BPF_MAP_TYPE_LRU_HASH, key_size, CT_VALUE_SIZE, capacity or entries, name="ctsim_calib")
    try:
        value = bytes(CT_VALUE_SIZE)
        for base in range(0, entries, FILL_CHUNK):
            n = min(FILL_CHUNK, entries - base)
            keys = b"".join(ct_key(i, key_size) for i in range(base, base + n))
            m.update_batch(keys, value * n, n)
            if progress:
                progress(task, n, entries)
    except BaseException:
        m.close()
        raise
    return m


# Largest map calibrate makes: Cilium's LimitTableMax (and what max_entries, a
# u32, can hold on any kernel without the kernel refusing the allocation).
MAX_ENTRIES = 1 << 24
MAX_NF_ENTRIES = 1_000_000  # entries added to a throwaway namespace's nf_conntrack


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    """``fn()``'s result and the CPU time (user + system) of this thread spent in it.

    A walk is syscalls on one thread: its CPU time is its cost. Wall time
    would add whatever else the machine ran meanwhile (a busy node measures
    the same rate as an idle one this way).
    """
    start = time.thread_time()
    n = fn()
    return n, max(time.thread_time() - start, 1e-9)


def _timed_wall(fn: Callable[[], int]) -> tuple[int, float]:
    """``fn()``'s result and the wall time it took: for netlink, where pyroute2 may work off this thread."""
    start = time.perf_counter()
    n = fn()
    return n, max(time.perf_counter() - start, 1e-9)


def per_entry_rate(m: BPFMap) -> float:
    """Entries/s of a get_next_key + lookup walk of the whole map."""
    n, seconds = _timed(lambda: sum(1 for _ in m.walk()))
    return n / seconds


def batch_rate(m: BPFMap, batch_size: int) -> float:
    n, seconds = _timed(lambda: m.count(batch_size))
    return n / seconds


# A batched walk's bucket term: the same few entries in a small and a large map.
BUCKET_PROBE_ENTRIES = 1_000
BUCKET_PROBE_CAPACITIES = (1 << 16, 1 << 20)


def bucket_seconds(key_size: int, trials: int = 5) -> dict[str, Any]:
    """Seconds per bucket a batched walk visits, full or not: (t(1Mi) - t(64Ki)) / (1Mi - 64Ki), CPU time.

    Both maps hold the same ``BUCKET_PROBE_ENTRIES``, so their entries' cost cancels.
    """
    seconds = []
    for capacity in BUCKET_PROBE_CAPACITIES:
        with new_ct_map(BUCKET_PROBE_ENTRIES, key_size, capacity=capacity) as m:
            seconds.append(statistics.median(_timed(lambda m=m: m.count(4096))[1] for _ in range(trials)))
    small, large = BUCKET_PROBE_CAPACITIES
    return {
        "entries": BUCKET_PROBE_ENTRIES,
        "capacities": list(BUCKET_PROBE_CAPACITIES),
        "walk_seconds": seconds,
        "seconds_per_bucket": max(0.0, (seconds[1] - seconds[0]) / (large - small)),
    }


def delete_seconds(m: BPFMap, key_size: int, n: int) -> float:
    """Seconds per ``BPF_MAP_DELETE_ELEM`` of an existing entry."""
    keys = [ct_key(i, key_size) for i in range(n)]
    deleted, seconds = _timed(lambda: sum(m.delete(k) for k in keys))
    return seconds / max(deleted, 1)


def summary(samples: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "spread": (max(samples) - min(samples)) / statistics.median(samples) if samples else 0.0,
        "samples": samples,
    }


@dataclass
class Plan:
    entries: int = 1 << 20
    trials: int = 5
    family: str = "ipv4"
    sizes: tuple[int, ...] = (1 << 16, 1 << 18, 1 << 20)
    deletes: int = 50_000
    nf_entries: int = 5_000


def measure_bpf(plan: Plan, progress: Progress | None = None) -> dict[str, Any]:
    key_size = CT_KEY_SIZES[plan.family]
    out: dict[str, Any] = {"entries": plan.entries, "key_size": key_size, "value_size": CT_VALUE_SIZE}
    with new_ct_map(plan.entries, key_size, progress) as m:
        present = m.count()
        out["present"] = present
        per_entry: list[float] = []
        batches: dict[int, list[float]] = {b: [] for b in BATCH_SIZES}
        for _ in range(plan.trials):
            per_entry.append(per_entry_rate(m))
            for b in BATCH_SIZES:
                batches[b].append(batch_rate(m, b))
            if progress:
                progress("walk", 1, plan.trials)
        out["per_entry"] = summary(per_entry)
        out["per_entry"]["syscalls_per_s"] = 2 * out["per_entry"]["median"]
        out["batch"] = {str(b): summary(xs) for b, xs in batches.items()}
        out["delete"] = {"seconds_per_entry": delete_seconds(m, key_size, min(plan.deletes, present))}
    scaling = []
    for size in plan.sizes:
        with new_ct_map(size, key_size) as m:
            scaling.append(
                {
                    "entries": size,
                    "per_entry_entries_per_s": statistics.median(per_entry_rate(m) for _ in range(3)),
                    "batch_entries_per_s": statistics.median(batch_rate(m, 4096) for _ in range(3)),
                }
            )
        if progress:
            progress("scaling", 1, len(plan.sizes))
    out["scaling"] = scaling
    out["batch_buckets"] = bucket_seconds(key_size)
    if progress:
        progress("buckets", 1, 1)
    return out


def measure_nf_conntrack(entries: int, progress: Progress | None = None) -> dict[str, Any]:
    """Dump rate and the cost of the count query, in a namespace made for it."""
    from ctsim.kernel import netns_conntrack as nfct

    with nfct.temporary_netns("ctsim-calib") as name, nfct.interrupts_between_calls() as check:
        start = time.perf_counter()
        added = nfct.fill(
            name, entries, progress=(lambda n: progress("nf_conntrack", n, entries)) if progress else None
        )
        fill_seconds = time.perf_counter() - start
        dumps = []
        for _ in range(3):
            check()
            n, seconds = _timed_wall(lambda: nfct.dump_count(name))
            dumps.append(n / seconds)
        counts = []
        for _ in range(5):
            check()
            _, seconds = _timed_wall(lambda: nfct.stats(name)[0])
            counts.append(seconds)
        kernel_count, kernel_max = nfct.stats(name)
    return {
        "netns": name,
        "entries": added,
        "kernel_count": kernel_count,
        "kernel_max": kernel_max,
        "fill_entries_per_s": added / fill_seconds,
        "dump_entries_per_s": summary(dumps),
        "count_query_seconds": summary(counts),
    }


def calibrate(plan: Plan, progress: Progress | None = None, nf_conntrack: bool = True) -> dict[str, Any]:
    probe()
    bpf = measure_bpf(plan, progress)
    doc: dict[str, Any] = {
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"kernel": platform.release(), "machine": platform.machine(), "cpus": os.cpu_count()},
        "per_entry_entries_per_s": bpf["per_entry"]["median"],
        "batch_entries_per_s": bpf["batch"]["4096"]["median"],
        "delete_seconds_per_entry": bpf["delete"]["seconds_per_entry"],
        "batch_bucket_seconds": bpf["batch_buckets"]["seconds_per_bucket"],
        "bpf": bpf,
    }
    if nf_conntrack and plan.nf_entries > 0:
        doc["nf_conntrack"] = measure_nf_conntrack(plan.nf_entries, progress)
    return doc
