"""Cilium releases, 1.16 to 1.20: a version as a user knows it, and what that release does in the modelled paths.

Each rule below is a fact of ``../shared/docs/cilium-releases.md`` (and
docs/model.md, "Releases"), read from each release branch's code. Where a
patch decides, the patch decides: 1.18.0-1.18.1 keep v1.16.5's GC interval
caching, 1.18.2 (backport caa264c05c of 529cdc9a96) caches it after the
max-interval cap; 1.17.9 and 1.18.3 signal a full CT map only on -ENOMEM.
A rule the model does not play says so (``ReleaseRules.unplayed``).
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

from ctsim.core.errors import InputError


class Release(NamedTuple):
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"

    @property
    def line(self) -> str:
        """``1.18``: the release line, as ``--profile cilium-1.18`` names it."""
        return f"{self.major}.{self.minor}"


# The newest patch of each line we know of (cilium-releases.md §0): what ``--profile cilium-1.N`` plays.
# 1.16 is the incident's v1.16.5, the default: the main job reads as its write-up.
NEWEST: dict[tuple[int, int], Release] = {
    (1, 16): Release(1, 16, 5),
    (1, 17): Release(1, 17, 18),
    (1, 18): Release(1, 18, 12),
    (1, 19): Release(1, 19, 8),
    (1, 20): Release(1, 20, 2),
}
OLDEST, LATEST = min(NEWEST), max(NEWEST.values())
DEFAULT_RELEASE = NEWEST[(1, 16)]

_VERSION = re.compile(r"^v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?$")


def parse_release(text: str, flag: str = "--cilium-version") -> Release:
    """``1.20.2``, ``v1.19.3`` or ``1.18`` (its newest patch we know). Older than 1.16 is refused."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise InputError(f"{flag}: {text!r} is not a Cilium version (1.20.2, v1.19.3 or 1.18)")
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) < OLDEST:
        raise InputError(f"{flag}: {text.strip()} is older than 1.16, the oldest release ctsim models")
    if match.group(3) is None:
        return NEWEST.get((major, minor), Release(major, minor, 0))
    return Release(major, minor, int(match.group(3)))


def newest(line: str) -> Release:
    """The newest patch ctsim knows of a release line (``1.18`` -> v1.18.12): what ``--profile cilium-1.18`` plays."""
    major, minor = line.split(".")
    return NEWEST[(int(major), int(minor))]


def played(release: Release) -> tuple[Release, str]:
    """The release a run plays for ``release``, and a note where it is not that release ("" where it is)."""
    if release > LATEST:
        return LATEST, f"Cilium {release} is newer than the newest release ctsim knows: played as {LATEST}"
    return release, ""


class IntervalCache(enum.StrEnum):
    """Where ``GetInterval`` keeps the interval the next pass scales from."""

    # v1.16.5 to v1.18.1: ``calculateInterval`` writes ``cachedGCInterval`` before the max-interval cap, and only
    # when the ratio is not 0 (ctmap.go:852-919 at ad6882773c).
    UNCAPPED = "uncapped"
    # v1.18.2 on: the GC loop caches the interval after the cap, on every full pass (gc.go:196-227 at 5bd307a8f6).
    CAPPED = "capped"


class CTFillSignal(enum.StrEnum):
    """When the datapath asks for an early GC pass because a CT insert failed (``SIGNAL_CT_FILL_UP``)."""

    ANY_FAILURE = "any failed insert"  # v1.16.5, 1.17.0-1.17.8, 1.18.0-1.18.2 (conntrack.h:1001-1005)
    ENOMEM = "only on -ENOMEM"  # 1.17.9+, 1.18.3+ (e26284484c)
    NEVER = "never"  # 1.19.0+ (01dbe8dae0)


class ReleaseRules(NamedTuple):
    """What one release does in the paths ctsim models."""

    release: Release
    batched_walk: bool  # BPF_MAP_LOOKUP_BATCH (1.18.0, be4d573875); else get_next_key + lookup per entry
    interval_cache: IntervalCache
    ct_fill_signal: CTFillSignal
    gc_walks_all_families: bool  # 1.19.0 (1b95bf097d): a signalled pass walks every family
    batch_lookup_required: bool  # 1.19.0 (15a73ae82e): the agent does not start without it
    delete_404_before_limiter: bool  # 1.18.0 (0fd97811e5): DELETE of a missing endpoint takes no limiter slot
    gc_interval_gauge: bool  # 1.18.0 (82610768bf): cilium_datapath_conntrack_gc_interval_seconds
    gc_duration_reads_zero: bool  # 1.18.0-1.19.x: the batched path observes 0 s (fixed in 1.20.0, 44a281d119)
    gc_after_endpoint_restore: bool  # 1.19.0 (8303db21c5): the GC starts once restored endpoints regenerated
    cni_del_connect_timeout_s: float  # 10 s; 1.19.0: 1.5 s (f372e54f27)
    # v1.16.0-1.16.6: ``Enable()`` blocks bootstrap until the initial scan, and log.Fatal's after 30 s
    # (gc.go:223-228 at ad6882773c); non-blocking from 1.16.7 (a0a5571e74) and 1.17.0 (fea19ec9c7).
    initial_scan_blocks: bool

    def starts_up(self, bootstrap_s: float) -> bool:
        """A fresh agent's start-up shows in a run (``sim.bootstrap``): its API waits, or its GC does."""
        return bool(bootstrap_s) or self.initial_scan_blocks or self.gc_after_endpoint_restore

    def unplayed(self, agent_down: bool) -> list[str]:
        """What this release does that the model does not play, in words a run's note can carry.

        ``agent_down``: the run has the agent's API down for a while (a fresh agent's bootstrap).
        """
        out = []
        if agent_down and self.cni_del_connect_timeout_s < 10.0:
            out.append(
                "a DEL that finds the socket directory but no socket sleeps 5 s up to 3 times first (66a4e8e451): "
                "the run takes the socket as there"
            )
        return out


def rules(r: Release) -> ReleaseRules:
    """The release's behaviour, rule by rule (cilium-releases.md §1, §2)."""
    v119 = r >= (1, 19, 0)
    if v119:
        fill = CTFillSignal.NEVER
    elif r >= (1, 18, 3) or (r.minor == 17 and r >= (1, 17, 9)):
        fill = CTFillSignal.ENOMEM
    else:
        fill = CTFillSignal.ANY_FAILURE
    return ReleaseRules(
        release=r,
        batched_walk=r >= (1, 18, 0),
        interval_cache=IntervalCache.CAPPED if r >= (1, 18, 2) else IntervalCache.UNCAPPED,
        ct_fill_signal=fill,
        gc_walks_all_families=v119,
        batch_lookup_required=v119,
        delete_404_before_limiter=r >= (1, 18, 0),
        gc_interval_gauge=r >= (1, 18, 0),
        gc_duration_reads_zero=(1, 18, 0) <= r < (1, 20, 0),
        gc_after_endpoint_restore=v119,
        cni_del_connect_timeout_s=1.5 if v119 else 10.0,
        initial_scan_blocks=r < (1, 16, 7),
    )
