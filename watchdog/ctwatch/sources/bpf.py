"""Cilium's pinned CT maps, opened read-only: capacity, count and the live walk rate.

``max_entries`` comes from ``BPF_OBJ_GET_INFO_BY_FD`` (one syscall). Counting
means walking (a BPF map keeps no element count): by ``BPF_MAP_LOOKUP_BATCH``
in bounded memory, and only as often as a CPU budget allows, because on a
16Mi map a count costs seconds of CPU. The walk rate is timed on a short,
bounded sample of ``get_next_key`` + ``lookup``, never the whole map, in the
walking thread's CPU time: a busy node stretches the wall time of a sample,
not its CPU time, so the rate does not drop because other work ran.
"""

from __future__ import annotations

import errno
import math
import os
import time
from dataclasses import dataclass, field

from ctsim.core.defaults import CT_KEY_SIZES, CT_VALUE_SIZE
from ctsim.core.profiles import WalkKind
from ctsim.core.releases import Release, parse_release, rules
from ctsim.kernel.bpf import BPFError, BPFMap
from ctwatch.collector import Collector, Cycle, Setting, register_collector
from ctwatch.logs import log_event
from ctwatch.readings import CT_MAPS, AgentRelease, MapReading, Pressure, SourceResult, WalkRate, readings_of

NAME = "bpf"


class UnexpectedMap(Exception):
    """A pinned object that is not shaped like a Cilium CT map."""


@dataclass
class _Cached:
    entries: int
    counted_at: float
    cost_s: float


@dataclass
class BPFSource:
    """Keeps each map's last count and re-counts within ``cpu_budget`` of one core."""

    bpffs: str
    sample_budget_s: float = 0.02
    samples_per_cycle: int = 1  # ``--once`` takes a whole window of samples: it has no earlier cycles to rank
    cpu_budget: float = 0.005  # share of one core counting may use, on average
    batch_size: int = 4096
    _cache: dict[str, _Cached] = field(default_factory=dict)
    spread: dict[str, float] = field(default_factory=dict)  # family -> (fastest - second fastest) / fastest, this cycle
    samples: dict[str, int] = field(default_factory=dict)  # family -> walk-rate samples taken this cycle
    batched: bool = False  # time the walk as 1.18+ agents do it: BPF_MAP_LOOKUP_BATCH in their chunks
    batch_unsupported: bool = False  # this kernel refused a batch lookup: sampled per entry, as 1.18 falls back

    def path(self, name: str) -> str:
        return os.path.join(self.bpffs, "tc", "globals", name)

    def collect(
        self, now: float, skip_count: frozenset[str] = frozenset()
    ) -> tuple[list[MapReading], dict[str, float]]:
        """Readings for every CT map present; walk rates by family. Raises when none is readable.

        Maps in ``skip_count`` are not counted: a cheaper source (Cilium's
        pressure metric) already knows their size.
        """
        readings: list[MapReading] = []
        rates: dict[str, float] = {}
        self.spread, self.samples = {}, {}  # this cycle's only
        found = False
        for family, names in CT_MAPS.items():
            for name in names:
                path = self.path(name)
                if not os.path.exists(path):
                    self._cache.pop(name, None)
                    continue
                found = True
                with BPFMap.open_pinned(path, read_only=True) as m:
                    if m.key_size != CT_KEY_SIZES[family] or m.value_size != CT_VALUE_SIZE:
                        raise UnexpectedMap(
                            f"{path}: key {m.key_size} B / value {m.value_size} B, "
                            f"not a Cilium CT map ({CT_KEY_SIZES[family]} B / {CT_VALUE_SIZE} B)"
                        )
                    entries = None if name in skip_count else self._count(name, m, now)
                    readings.append(MapReading(NAME, family, name, entries, m.max_entries))
                    if family not in rates and self.sample_budget_s > 0:
                        sample = self._sample_batched if self.batched and not self.batch_unsupported else None
                        sample = sample or self._sample_rate
                        samples = sorted(r for _ in range(self.samples_per_cycle) if (r := sample(m)))
                        if samples:  # the assessor's rule within the cycle: the second fastest
                            rates[family] = samples[-2] if len(samples) > 1 else samples[0]
                            self.samples[family] = len(samples)
                            if len(samples) > 1:
                                self.spread[family] = (samples[-1] - samples[0]) / samples[-1]
        if not found:
            raise FileNotFoundError(f"no Cilium CT map pinned under {os.path.join(self.bpffs, 'tc', 'globals')}")
        return readings, rates

    def _count(self, name: str, m: BPFMap, now: float) -> int:
        cached = self._cache.get(name)
        if cached is not None and now - cached.counted_at < cached.cost_s / self.cpu_budget:
            return cached.entries
        start = time.process_time()
        entries = m.count(self.batch_size)
        self._cache[name] = _Cached(entries, now, max(time.process_time() - start, 1e-4))
        return entries

    def _sample_rate(self, m: BPFMap) -> float | None:
        """Entries per CPU second of get_next_key + lookup, for at most ``sample_budget_s`` of CPU.

        A wall-clock bound of ten budgets stops a sample that a starved
        thread cannot finish; fewer than 256 entries are no sample.
        """
        walked = 0
        cpu_start, wall_start = time.thread_time(), time.perf_counter()
        wall_limit = wall_start + 10 * self.sample_budget_s
        for _ in m.walk():
            walked += 1
            if walked % 64 == 0 and (
                time.thread_time() - cpu_start >= self.sample_budget_s or time.perf_counter() >= wall_limit
            ):
                break
        cpu = time.thread_time() - cpu_start
        return walked / cpu if walked >= 256 and cpu > 0 else None

    def _sample_batched(self, m: BPFMap) -> float | None:
        """Entries per CPU second of ``BPF_MAP_LOOKUP_BATCH`` in the agent's chunks, buckets included.

        The chunk is Cilium's (``2^ceil(log2(sqrt(2 x max_entries)))``, doubled
        on ENOSPC up to 3 times: cilium-releases.md §2.4). A batch visits every
        bucket it passes, full or not, so the time per entry found carries the
        empty buckets between entries: on a map whose entries spread over its
        buckets, entries / this rate is the whole walk. A walk that ends within
        the budget is the whole map, timed exactly.
        """
        chunk = 1 << math.ceil(math.log2(math.sqrt(2 * m.max_entries)))
        walked, complete = 0, True
        cpu_start, wall_start = time.thread_time(), time.perf_counter()
        wall_limit = wall_start + 10 * self.sample_budget_s
        try:
            for n in m.lookup_batch(chunk, grow=3):
                walked += n
                if time.thread_time() - cpu_start >= self.sample_budget_s or time.perf_counter() >= wall_limit:
                    complete = False
                    break
        except BPFError as exc:
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, 524):  # 524: the kernel's ENOTSUPP
                raise
            self.batch_unsupported = True
            return self._sample_rate(m)
        cpu = time.thread_time() - cpu_start
        if walked == 0 or cpu <= 0 or (walked < 256 and not complete):
            return None
        return walked / cpu


def _collect(cycle: Cycle, result: SourceResult) -> None:
    """Counts only the maps whose pressure a source already gave this cycle: no O(n) count where one has it."""
    from ctwatch.assess import RATE_WINDOW

    cfg = cycle.config
    source = cycle.state.get(NAME)
    if source is None:
        # A one-shot run has no earlier cycles: it samples a whole window now (20 x the budget, 0.4 s at 20ms).
        source = cycle.state[NAME] = BPFSource(
            cfg["bpffs"], sample_budget_s=cfg["bpf_sample_budget_s"], samples_per_cycle=RATE_WINDOW if cfg.once else 1
        )
    known = frozenset(p.map for p in readings_of(cycle.results, Pressure))
    release = cfg["cilium_version"] or next((r.release for r in readings_of(cycle.results, AgentRelease)), None)
    source.batched = release is not None and rules(release).batched_walk
    unsupported = source.batch_unsupported
    readings, rates = source.collect(cycle.clock(), skip_count=known)
    if source.batch_unsupported and not unsupported and release is not None:
        starts = "does not start" if rules(release).batch_lookup_required else "falls back to per-entry walks"
        log_event("no BPF_MAP_LOOKUP_BATCH on this kernel", level="warn", release=str(release), agent=starts)
    walk = WalkKind.BATCHED if source.batched and not source.batch_unsupported else WalkKind.PER_ENTRY
    said = str(release) if release is not None else ""
    result.readings = [
        *readings,
        *(
            WalkRate(family, rate, source.samples.get(family, 1), source.spread.get(family), walk, said)
            for family, rate in rates.items()
        ),
    ]


def _sample_budget(text: str) -> float:
    from ctsim.core.quantity import parse_duration

    return parse_duration(text, "--bpf.sample-budget", allow_zero=True, maximum=1.0)


def _release(text: str) -> Release:
    return parse_release(text, "--cilium.version")


SETTINGS = (
    Setting(
        "cilium_version", None, "--cilium.version", "VERSION",
        "The agent's Cilium release where its metrics are off (1.20.2, 1.18): from 1.18 the walk is timed as the "
        "agent walks, in batches (default: cilium_version from the agent's metrics; else per entry).", "", _release,
    ),
    Setting(
        "bpffs", "/sys/fs/bpf", "--path.bpffs", "PATH", "bpffs mountpoint (Cilium pins under tc/globals/).",
        "/sys/fs/bpf", str,
    ),
    Setting(
        "bpf_sample_budget_s", 0.02, "--bpf.sample-budget", "DURATION",
        "CPU time spent timing the walk rate per cycle (0s: never).", "20ms", _sample_budget,
    ),
)  # fmt: skip
register_collector(Collector(NAME, "Cilium's pinned CT maps.", _collect, reads=("cilium_metrics",), settings=SETTINGS))
