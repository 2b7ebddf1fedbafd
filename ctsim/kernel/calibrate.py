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
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True)
class BucketProbe:
    """A batched walk's cost per bucket: the same entries in a small and a large map, CPU time."""

    entries: int
    capacities: tuple[int, int]
    walk_seconds: tuple[float, float]

    @property
    def seconds_per_bucket(self) -> float:
        small, large = self.capacities
        return max(0.0, (self.walk_seconds[1] - self.walk_seconds[0]) / (large - small))

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "capacities": list(self.capacities),
            "walk_seconds": list(self.walk_seconds),
            "seconds_per_bucket": self.seconds_per_bucket,
        }


def bucket_seconds(key_size: int, trials: int = 5) -> BucketProbe:
    """Seconds per bucket a batched walk visits, full or not: (t(1Mi) - t(64Ki)) / (1Mi - 64Ki), CPU time.

    Both maps hold the same ``BUCKET_PROBE_ENTRIES``, so their entries' cost cancels. Each walk is
    under a millisecond, where a busy neighbour (a hyperthread sibling, a cache) only ever adds
    time: the fastest of ``trials`` is the stable figure (the median failed CI beside other work).
    """
    seconds = []
    for capacity in BUCKET_PROBE_CAPACITIES:
        with new_ct_map(BUCKET_PROBE_ENTRIES, key_size, capacity=capacity) as m:
            seconds.append(min(_timed(lambda m=m: m.count(4096))[1] for _ in range(trials)))
    return BucketProbe(BUCKET_PROBE_ENTRIES, BUCKET_PROBE_CAPACITIES, (seconds[0], seconds[1]))


def delete_seconds(m: BPFMap, key_size: int, n: int) -> float:
    """Seconds per ``BPF_MAP_DELETE_ELEM`` of an existing entry."""
    keys = [ct_key(i, key_size) for i in range(n)]
    deleted, seconds = _timed(lambda: sum(m.delete(k) for k in keys))
    return seconds / max(deleted, 1)


@dataclass(frozen=True)
class Samples:
    """Repeated measurements of one figure: the median is the figure, the spread how far to trust it."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        return (max(self.samples) - min(self.samples)) / self.median if self.samples else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": min(self.samples),
            "max": max(self.samples),
            "spread": self.spread,
            "samples": list(self.samples),
        }


@dataclass
class Plan:
    entries: int = 1 << 20
    trials: int = 5
    family: str = "ipv4"
    sizes: tuple[int, ...] = (1 << 16, 1 << 18, 1 << 20)
    deletes: int = 50_000
    nf_entries: int = 5_000


@dataclass(frozen=True)
class SizePoint:
    """Both walks' rates on a map of one size: the per-entry cost curve."""

    entries: int
    per_entry_entries_per_s: float
    batch_entries_per_s: float


@dataclass(frozen=True)
class BpfMeasurement:
    """The walks, the delete and the bucket term on one throwaway CT map."""

    entries: int
    key_size: int
    value_size: int
    present: int
    per_entry: Samples  # entries/s of get_next_key + lookup
    batch: dict[int, Samples]  # entries/s of LOOKUP_BATCH, by batch size
    delete_seconds_per_entry: float
    scaling: tuple[SizePoint, ...]
    batch_buckets: BucketProbe

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "key_size": self.key_size,
            "value_size": self.value_size,
            "present": self.present,
            "per_entry": {**self.per_entry.to_dict(), "syscalls_per_s": 2 * self.per_entry.median},
            "batch": {str(b): xs.to_dict() for b, xs in self.batch.items()},
            "delete": {"seconds_per_entry": self.delete_seconds_per_entry},
            "scaling": [asdict(p) for p in self.scaling],
            "batch_buckets": self.batch_buckets.to_dict(),
        }


def measure_bpf(plan: Plan, progress: Progress | None = None) -> BpfMeasurement:
    key_size = CT_KEY_SIZES[plan.family]
    with new_ct_map(plan.entries, key_size, progress) as m:
        present = m.count()
        per_entry: list[float] = []
        batches: dict[int, list[float]] = {b: [] for b in BATCH_SIZES}
        for _ in range(plan.trials):
            per_entry.append(per_entry_rate(m))
            for b in BATCH_SIZES:
                batches[b].append(batch_rate(m, b))
            if progress:
                progress("walk", 1, plan.trials)
        delete = delete_seconds(m, key_size, min(plan.deletes, present))
    scaling = []
    for size in plan.sizes:
        with new_ct_map(size, key_size) as m:
            scaling.append(
                SizePoint(
                    size,
                    statistics.median(per_entry_rate(m) for _ in range(3)),
                    statistics.median(batch_rate(m, 4096) for _ in range(3)),
                )
            )
        if progress:
            progress("scaling", 1, len(plan.sizes))
    buckets = bucket_seconds(key_size)
    if progress:
        progress("buckets", 1, 1)
    return BpfMeasurement(
        entries=plan.entries,
        key_size=key_size,
        value_size=CT_VALUE_SIZE,
        present=present,
        per_entry=Samples(tuple(per_entry)),
        batch={b: Samples(tuple(xs)) for b, xs in batches.items()},
        delete_seconds_per_entry=delete,
        scaling=tuple(scaling),
        batch_buckets=buckets,
    )


@dataclass(frozen=True)
class NfConntrackMeasurement:
    """nf_conntrack in a throwaway namespace: the dump a count by listing pays, and the count query."""

    netns: str
    entries: int
    kernel_count: int
    kernel_max: int
    fill_entries_per_s: float
    dump_entries_per_s: Samples
    count_query_seconds: Samples

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dump_entries_per_s"] = self.dump_entries_per_s.to_dict()
        d["count_query_seconds"] = self.count_query_seconds.to_dict()
        return d


def measure_nf_conntrack(entries: int, progress: Progress | None = None) -> NfConntrackMeasurement:
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
    return NfConntrackMeasurement(
        netns=name,
        entries=added,
        kernel_count=kernel_count,
        kernel_max=kernel_max,
        fill_entries_per_s=added / fill_seconds,
        dump_entries_per_s=Samples(tuple(dumps)),
        count_query_seconds=Samples(tuple(counts)),
    )


@dataclass(frozen=True)
class Measurement:
    """``ctsim calibrate``'s answer: what the calibration file holds (``to_dict``), the figures run takes first."""

    measured_at: str
    kernel: str
    machine: str
    cpus: int | None
    bpf: BpfMeasurement
    nf_conntrack: NfConntrackMeasurement | None = None

    @property
    def per_entry_entries_per_s(self) -> float:
        return self.bpf.per_entry.median

    @property
    def batch_entries_per_s(self) -> float:
        return self.bpf.batch[4096].median

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "measured_at": self.measured_at,
            "host": {"kernel": self.kernel, "machine": self.machine, "cpus": self.cpus},
            "per_entry_entries_per_s": self.per_entry_entries_per_s,
            "batch_entries_per_s": self.batch_entries_per_s,
            "delete_seconds_per_entry": self.bpf.delete_seconds_per_entry,
            "batch_bucket_seconds": self.bpf.batch_buckets.seconds_per_bucket,
            "bpf": self.bpf.to_dict(),
        }
        if self.nf_conntrack is not None:
            doc["nf_conntrack"] = self.nf_conntrack.to_dict()
        return doc


def calibrate(plan: Plan, progress: Progress | None = None, nf_conntrack: bool = True) -> Measurement:
    probe()
    bpf = measure_bpf(plan, progress)
    return Measurement(
        measured_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        kernel=platform.release(),
        machine=platform.machine(),
        cpus=os.cpu_count(),
        bpf=bpf,
        nf_conntrack=measure_nf_conntrack(plan.nf_entries, progress) if nf_conntrack and plan.nf_entries > 0 else None,
    )
