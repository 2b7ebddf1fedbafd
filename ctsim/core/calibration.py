"""The calibration file: rates measured by ``ctsim calibrate`` for ``ctsim run``.

JSON, documented in docs/calibration.md. ``ctsim run --calibration FILE``
takes the per-entry walk rate for the cilium-1.16 profile, the batched rate
for cilium-1.18, and the measured cost of one delete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from ctsim.core.errors import InputError
from ctsim.core.files import read_text, write_atomic
from ctsim.core.origin import Origin
from ctsim.core.profiles import Profile, WalkKind

FORMAT = "ctsim-calibration/1"


@dataclass(frozen=True)
class Calibration:
    path: str
    per_entry_entries_per_s: float
    batch_entries_per_s: float
    delete_seconds_per_entry: float
    measured_at: str
    kernel: str
    batch_bucket_seconds: float | None = None  # a batched walk's cost per bucket; None in files from before it

    def walk_rate(self, walk: WalkKind) -> float:
        return self.batch_entries_per_s if walk is WalkKind.BATCHED else self.per_entry_entries_per_s

    def describe(self, walk: WalkKind) -> str:
        from ctsim.core.printable import printable  # the file's words: outside text

        return printable(
            f"calibrated ({walk.syscall}): {self.path}, measured {self.measured_at} on kernel {self.kernel}"
        )


# What a measured rate or cost can be on any machine; outside, the file is wrong.
BOUNDS = {
    "per_entry_entries_per_s": (1.0, 1e9),
    "batch_entries_per_s": (1.0, 1e10),
    "delete_seconds_per_entry": (1e-10, 1.0),
}


OPTIONAL_BOUNDS = {"batch_bucket_seconds": (0.0, 1e-3)}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def load(path: str, flag: str = "--calibration") -> Calibration:
    """Reads and checks a calibration file; every problem is one InputError line."""
    text = read_text(path, flag)
    try:
        doc: Any = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{flag}: {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # Infinity/NaN, 5000-digit integers, deep nesting
        raise InputError(f"{flag}: {path} is not a calibration file ({str(exc)[:80] or 'too deeply nested'})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"{flag}: {path} is not a {FORMAT} file (run `ctsim calibrate --output FILE`)")
    values = {}
    for key, (low, high) in BOUNDS.items():
        value = doc.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
            raise InputError(f"{flag}: {path}: {key} must be a number from {low:g} to {high:g}, got {value!r}")
        values[key] = float(value)
    bucket = doc.get("batch_bucket_seconds")
    if bucket is not None:
        low, high = OPTIONAL_BOUNDS["batch_bucket_seconds"]
        if not isinstance(bucket, int | float) or isinstance(bucket, bool) or not low <= bucket <= high:
            raise InputError(
                f"{flag}: {path}: batch_bucket_seconds must be a number from {low:g} to {high:g}, got {bucket!r}"
            )
        values["batch_bucket_seconds"] = float(bucket)
    host = doc.get("host") if isinstance(doc.get("host"), dict) else {}
    return Calibration(
        path=path,
        measured_at=str(doc.get("measured_at", "?"))[:40],
        kernel=str(host.get("kernel", "?"))[:80],
        **values,
    )


def dump(doc: dict[str, Any], path: str) -> None:
    """Writes the file atomically (a reader never sees half of it)."""
    write_atomic(path, json.dumps({"format": FORMAT, **doc}, indent=2) + "\n")


class WalkRate(NamedTuple):
    """How fast a walk goes, and where that came from: the one rule run, plan and the fleet share."""

    entries_per_s: float
    source: Origin  # as the inputs block and a fleet row say it
    short: str  # as a table cell says it: --rate, calibration, or the profile's name
    delete_seconds: float
    bucket_seconds: float  # a batched walk's cost per bucket of a map's capacity (0: per-entry walks)
    note: str = ""  # what the user gave that this rule did not use


def walk_rate(prof: Profile, rate: float | None, cal: Calibration | None) -> WalkRate:
    """--rate, else the calibration's rate for the profile's walk, else the profile's published one.

    A calibration also gives the delete cost, and a batched walk's bucket cost
    when it measured one, whichever rate wins.
    """
    delete_s, bucket_s = prof.delete_seconds, prof.bucket_seconds
    if cal is not None:
        delete_s = cal.delete_seconds_per_entry
        if prof.walk is WalkKind.BATCHED and cal.batch_bucket_seconds is not None:
            bucket_s = cal.batch_bucket_seconds
    if rate is not None:
        note = (
            f"--calibration {cal.path}: its walk rate is not used, --rate gives every walk (its delete cost is used)"
            if cal is not None
            else ""
        )
        return WalkRate(rate, Origin.flag("--rate"), "--rate", delete_s, bucket_s, note)
    if cal is not None:
        origin = Origin.calibration(cal.describe(prof.walk))
        return WalkRate(cal.walk_rate(prof.walk), origin, "calibration", delete_s, bucket_s)
    return WalkRate(prof.walk_rate, Origin.published(prof.source), prof.name, delete_s, bucket_s)
