"""Cilium releases as the model sees them: how a CT walk is done and what it costs.

The only difference between the profiles is the walk. Cilium 1.16 and 1.17
walk a CT map with ``bpf_map_get_next_key`` + ``bpf_map_lookup_elem`` per
entry; batched walks (``BPF_MAP_LOOKUP_BATCH``, kernel >= 5.6; commit be4d5738,
"Use batched iterator for CTMap GC", merged 2025-01-09) first ship in
v1.18.0-pre.1. Deletes stay one syscall each in every release.
"""

from __future__ import annotations

from typing import NamedTuple

from ctsim.errors import pick

# Spec §1: 14,916 syscalls in 35 ms on the incident node = ~426,000 syscalls/s,
# two per entry walked.
PUBLISHED_SYSCALLS_PER_S = 426_000.0
PUBLISHED_ENTRIES_PER_S = PUBLISHED_SYSCALLS_PER_S / 2  # 213,000
# Batched lookups are ~10x cheaper per entry: an inference, not a measurement
# on the incident node (`ctsim calibrate` measures this machine's).
BATCH_SPEEDUP = 10.0


class Profile(NamedTuple):
    name: str
    walk: str  # "per-entry" or "batched"
    walk_rate: float  # entries per second walked
    delete_seconds: float  # one bpf_map_delete_elem per deleted entry
    source: str


PROFILES: dict[str, Profile] = {
    "cilium-1.16": Profile(
        name="cilium-1.16",
        walk="per-entry",
        walk_rate=PUBLISHED_ENTRIES_PER_S,
        delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
        source="published: 426,000 syscalls/s, 2 per entry (incident write-up)",
    ),
    "cilium-1.17": Profile(
        name="cilium-1.17",
        walk="per-entry",
        walk_rate=PUBLISHED_ENTRIES_PER_S,
        delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
        source="published: 426,000 syscalls/s, 2 per entry (1.17 still walks per entry)",
    ),
    "cilium-1.18": Profile(
        name="cilium-1.18",
        walk="batched",
        walk_rate=PUBLISHED_ENTRIES_PER_S * BATCH_SPEEDUP,
        delete_seconds=1.0 / PUBLISHED_SYSCALLS_PER_S,
        source="inferred: published per-entry rate x10 for BPF_MAP_LOOKUP_BATCH",
    ),
}


def get_profile(name: str) -> Profile:
    return pick(PROFILES, name, "--profile", "profile")
