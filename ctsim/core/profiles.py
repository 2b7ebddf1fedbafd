"""Cilium releases as the model sees them: how a CT walk is done and what it costs.

A profile is a release line's walk: how it is done and what it costs. What
else a release does (its GC interval caching, its signals, its handlers) is
``ctsim.core.releases``, patch by patch; ``--profile cilium-1.N`` plays the
newest patch of 1.N ctsim knows, ``--cilium-version`` any. Cilium 1.16 and 1.17
walk a CT map with ``bpf_map_get_next_key`` + ``bpf_map_lookup_elem`` per
entry; batched walks (``BPF_MAP_LOOKUP_BATCH``, kernel >= 5.6; commit be4d5738,
"Use batched iterator for CTMap GC", merged 2025-01-09) first ship in
v1.18.0-pre.1. Deletes stay one syscall each in every release.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from ctsim.core.errors import pick

# Spec §1: 14,916 syscalls in 35 ms on the incident node = ~426,000 syscalls/s,
# two per entry walked.
PUBLISHED_SYSCALLS_PER_S = 426_000.0
PUBLISHED_ENTRIES_PER_S = PUBLISHED_SYSCALLS_PER_S / 2  # 213,000
# Batched walks, from measurements on the project's 2-core VM (spec §8, §16): per entry,
# BPF_MAP_LOOKUP_BATCH (4,096 a call) walked ~2.1 M entries/s where get_next_key + lookup
# walked ~145 k/s; and it visits every bucket of the hash, full or not: a batched count of
# 1,000 entries took 0.43 ms at 64Ki capacity and 15.1 ms at 16Mi, 0.878 ns per bucket.
# The incident node walks per entry at 213,000/s, 1.47x the VM's 145 k/s; both batched
# figures are taken to scale by that. `ctsim calibrate` measures all three on your kernel.
VM_PER_ENTRY_PER_S = 145_000.0
VM_BATCH_PER_S = 2_100_000.0
VM_BUCKET_SECONDS = (15.1e-3 - 0.43e-3) / (16 * 2**20 - 64 * 2**10)
NODE_OVER_VM = PUBLISHED_ENTRIES_PER_S / VM_PER_ENTRY_PER_S


class WalkKind(StrEnum):
    """How a release's scrub walks a CT map: an entry per two syscalls, or LOOKUP_BATCH of many."""

    PER_ENTRY = "per-entry"  # get_next_key + lookup (1.16, 1.17)
    BATCHED = "batched"  # BPF_MAP_LOOKUP_BATCH, visiting every bucket (1.18)

    @property
    def syscall(self) -> str:
        return "BPF_MAP_LOOKUP_BATCH" if self is WalkKind.BATCHED else "get_next_key + lookup"


class Profile(NamedTuple):
    name: str
    walk: WalkKind
    walk_rate: float  # entries per second walked
    delete_seconds: float  # one bpf_map_delete_elem per deleted entry
    source: str
    bucket_seconds: float = 0.0  # a batched walk's cost per bucket of the map's capacity
    upgrade: str = ""  # the release with batched walks that run's advice and plan offer ("": none to offer)

    @property
    def release(self) -> str:
        return self.name.removeprefix("cilium-")


PROFILES: dict[str, Profile] = {
    "cilium-1.16": Profile(
        name="cilium-1.16",
        walk=WalkKind.PER_ENTRY,
        walk_rate=PUBLISHED_ENTRIES_PER_S,
        delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
        source="published: 426,000 syscalls/s, 2 per entry (incident write-up)",
        upgrade="cilium-1.18",
    ),
    "cilium-1.17": Profile(
        name="cilium-1.17",
        walk=WalkKind.PER_ENTRY,
        walk_rate=PUBLISHED_ENTRIES_PER_S,
        delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
        source="published: 426,000 syscalls/s, 2 per entry (1.17 still walks per entry)",
        upgrade="cilium-1.18",
    ),
    **{
        f"cilium-{line}": Profile(
            name=f"cilium-{line}",
            walk=WalkKind.BATCHED,
            walk_rate=VM_BATCH_PER_S * NODE_OVER_VM,
            delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
            source=(
                "scaled: BPF_MAP_LOOKUP_BATCH as measured on the project's VM (2.1M entries/s, 0.88 ns per "
                "bucket), x1.47 for the incident node's published per-entry rate"
            ),
            bucket_seconds=VM_BUCKET_SECONDS / NODE_OVER_VM,
        )
        for line in ("1.18", "1.19", "1.20")  # the same batched walk (cilium-releases.md §2.4)
    },
}


DEFAULT_PROFILE = "cilium-1.16"


def choices() -> str:
    """Every profile and its walk, for --help: ``cilium-1.16, cilium-1.17 (per-entry walks) or ...``."""
    by_walk: dict[WalkKind, list[str]] = {}
    for p in PROFILES.values():
        by_walk.setdefault(p.walk, []).append(p.name)
    kinds = {WalkKind.PER_ENTRY: "per-entry walks", WalkKind.BATCHED: "batched"}
    return " or ".join(f"{', '.join(names)} ({kinds[walk]})" for walk, names in by_walk.items())


def get_profile(name: str) -> Profile:
    return pick(PROFILES, name, "--profile", "profile")


def profile_for(line: str) -> Profile:
    """The profile of a release line (``1.20``): how its scrub walks."""
    return PROFILES[f"cilium-{line}"]
