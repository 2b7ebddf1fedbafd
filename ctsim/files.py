"""Files the user names: read with a size cap, written only where writing can succeed.

Every command checks its output paths before it starts working (a sweep or a
calibration must not end in a traceback after minutes of work), and reads
input files through one capped reader (``/dev/zero`` is a file too).
"""

from __future__ import annotations

import os
from pathlib import Path

from ctsim.errors import InputError

MAX_INPUT_BYTES = 1 << 20  # calibration files and grid files are a few KiB


def read_text(path: str, flag: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The file's text, or one InputError line: missing, a directory, unreadable, too big, not UTF-8."""
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{flag}: {path} is a directory, not a file")
        with p.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{flag}: no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{flag}: {path} is larger than {limit:,} bytes; is it the right file?")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise InputError(f"{flag}: {path} is not UTF-8 text") from None


def check_writable(path: str, flag: str, suffix: str | None = None) -> None:
    """Fails now, in one line, if ``path`` could not be written later."""
    if not path or not path.strip():
        raise InputError(f"{flag}: empty path")
    p = Path(path)
    if suffix is not None and p.suffix.lower() != suffix:
        raise InputError(f"{flag}: {path} must end in {suffix}")
    if p.is_dir():
        raise InputError(f"{flag}: {path} is a directory; name a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{flag}: directory {parent} does not exist")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{flag}: {path} is not writable")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag}: cannot write in {parent}")


def write_atomic(path: str, text: str) -> None:
    """Writes through a temporary file in the same directory: a reader never sees half of it."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
