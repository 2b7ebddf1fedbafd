"""The calibration file: rates measured by ``ctsim calibrate`` for ``ctsim run``.

JSON, documented in docs/calibration.md. ``ctsim run --calibration FILE``
takes the per-entry walk rate for the cilium-1.16 profile, the batched rate
for cilium-1.18, and the measured cost of one delete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctsim.errors import InputError

FORMAT = "ctsim-calibration/1"


@dataclass(frozen=True)
class Calibration:
    path: str
    per_entry_entries_per_s: float
    batch_entries_per_s: float
    delete_seconds_per_entry: float
    measured_at: str
    kernel: str

    def walk_rate(self, walk: str) -> float:
        return self.batch_entries_per_s if walk == "batched" else self.per_entry_entries_per_s

    def describe(self, walk: str) -> str:
        kind = "BPF_MAP_LOOKUP_BATCH" if walk == "batched" else "get_next_key + lookup"
        return f"calibrated ({kind}): {self.path}, measured {self.measured_at} on kernel {self.kernel}"


def load(path: str) -> Calibration:
    """Reads and checks a calibration file; every problem is one InputError line."""
    try:
        doc: Any = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"--calibration: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--calibration: cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--calibration: {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"--calibration: {path} is not a {FORMAT} file (run `ctsim calibrate --output FILE`)")
    values = {}
    for key in ("per_entry_entries_per_s", "batch_entries_per_s", "delete_seconds_per_entry"):
        value = doc.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise InputError(f"--calibration: {path}: {key} must be a positive number, got {value!r}")
        values[key] = float(value)
    host = doc.get("host") if isinstance(doc.get("host"), dict) else {}
    return Calibration(
        path=path,
        measured_at=str(doc.get("measured_at", "?")),
        kernel=str(host.get("kernel", "?")),
        **values,
    )


def dump(doc: dict[str, Any], path: str) -> None:
    """Writes the file atomically (a reader never sees half of it)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps({"format": FORMAT, **doc}, indent=2) + "\n")
    tmp.replace(target)
