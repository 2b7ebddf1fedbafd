"""Files the user names: read with a size cap, written only where writing can succeed.

Every command checks its output paths before it starts working (a sweep or a
calibration must not end in a traceback after minutes of work), and reads
input files through one capped reader. These run as root on production
nodes, so: an input that is not a regular file (a FIFO, a socket, a device)
is refused before it can block; an output that is a character device or a
FIFO (``/dev/null``, ``/dev/stdout``, a pipe) is written straight into,
never replaced by a regular file; any other non-regular output is refused.
A symlink is written through: its target is replaced (atomically, beside
it), the link stays, as ``> link`` does. ``-`` is standard output, for every
output flag alike.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
from pathlib import Path
from typing import BinaryIO

from ctsim.core.errors import InputError

MAX_INPUT_BYTES = 1 << 20  # calibration files and grid files are a few KiB
STDOUT = "-"  # an output path meaning standard output, as `fleet --csv -` and most Unix tools take it


def _stdout_buffer(flag: str) -> BinaryIO:
    stream = sys.stdout
    if stream is None or stream.closed:
        raise InputError(f"{flag}: standard output is closed")
    return stream.buffer


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def read_text(path: str, flag: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The file's text, or one InputError line: missing, not a regular file, unreadable, too big, not UTF-8."""
    if not path or not path.strip():
        raise InputError(f"{flag}: empty path")
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not wait for one; the fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{flag}: no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{flag}: {path} is {_kind(mode)}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{flag}: {path} is larger than {limit:,} bytes; is it the right file?")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise InputError(f"{flag}: {path} is not UTF-8 text") from None


def _mode(path: str, what: str) -> int | None:
    """The file's mode, None if it does not exist yet, or one line saying why it cannot be looked at."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{what}: {path}: {exc.strerror or exc}") from None


def _streamed(mode: int) -> bool:
    """Written straight into, never replaced: a character device or a FIFO."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _open_stream(path: str) -> int:
    """A FIFO opens only if someone reads it (O_NONBLOCK: ENXIO instead of waiting forever)."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    os.set_blocking(fd, True)  # once open, write as a pipe is written: wait for the reader
    return fd


def check_writable(path: str, flag: str, suffix: str | None = None) -> None:
    """Fails now, in one line, if ``path`` could not be written later."""
    if not path or not path.strip():
        raise InputError(f"{flag}: empty path")
    if path == STDOUT:
        _stdout_buffer(flag)
        return
    p = Path(os.path.realpath(path))  # through a symlink: its target is what gets written
    mode = _mode(path, flag)
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(f"{flag}: {path} is a directory; name a file")
    if mode is not None and _streamed(mode):
        # Not opened here: closing a FIFO would end its reader's input before anything was written.
        if not os.access(p, os.W_OK):
            raise InputError(f"{flag}: {path} is not writable")
        return
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(f"{flag}: {path} is {_kind(mode)}; name a regular file")
    if suffix is not None and Path(path).suffix.lower() != suffix:
        raise InputError(f"{flag}: {path} must end in {suffix}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{flag}: directory {parent} does not exist")
    if mode is not None and not os.access(p, os.W_OK):
        raise InputError(f"{flag}: {path} is not writable")
    # Root passes every os.access check; /proc, sysfs or a read-only mount still refuse a new file. Try one.
    import tempfile  # here, not at the top: it pulls in shutil and random, ~1 ms of every start-up

    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=f".{p.name}.", suffix=".check"):
            pass
    except OSError as exc:
        raise InputError(f"{flag}: cannot write {path}: {parent} takes no new files ({exc.strerror or exc})") from None


def check_distinct(paths: dict[str, str | None]) -> None:
    """Two outputs of one command never name the same file (one would overwrite the other)."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if not path:
            continue
        if path == STDOUT:
            if STDOUT in seen:
                raise InputError(f"{flag} -: {seen[STDOUT]} writes to standard output too; give one of them a file")
            seen[STDOUT] = flag
            continue
        key = os.path.realpath(path)
        if key in seen:
            mode = _mode(key, flag)
            if mode is not None and _streamed(mode):
                continue  # /dev/null twice is fine: nothing is replaced
            raise InputError(f"{flag}: {path} is also {seen[key]}'s file; give each output its own")
        seen[key] = flag


def check_not_an_input(outputs: dict[str, str | None], inputs: dict[str, str | None]) -> None:
    """No output of a run is one of its inputs (the same file, by device and inode, through any link or name).

    Checked before any work: ``sweep -o`` onto its own ``--grid-file``, or
    ``fleet --csv`` onto ``--bearer-token-file``, would replace what the run
    reads with what it writes. A device or FIFO is read or written, never
    replaced: ``/dev/null`` on both sides is fine.
    """
    read: dict[tuple[int, int], str] = {}
    for flag, path in inputs.items():
        if path and path != STDOUT:
            try:
                st = os.stat(path)
            except OSError:
                continue  # its own check says what is wrong with it
            if stat.S_ISREG(st.st_mode):
                read[(st.st_dev, st.st_ino)] = flag
    for flag, path in outputs.items():
        if not path or path == STDOUT:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue  # a new file: no input can be it
        taken = read.get((st.st_dev, st.st_ino))
        if taken is not None:
            raise InputError(f"{flag}: {path} is {taken}'s file, which this run reads; write the output elsewhere")


def write_atomic(path: str, text: str | bytes) -> None:
    """A regular file through a temporary one beside it (a reader never sees half); a device or FIFO directly.

    ``-``: standard output. A symlink: its target, replaced beside itself; the link is left as it was.
    """
    data = text.encode() if isinstance(text, str) else text
    if path == STDOUT:
        out = _stdout_buffer("cannot write")
        try:
            out.write(data)
            out.flush()
        except OSError as exc:
            raise InputError(f"cannot write to standard output: {exc.strerror or exc}") from None
        return
    target = Path(os.path.realpath(path))
    mode = _mode(str(target), "cannot write")
    if mode is not None and _streamed(mode):
        try:
            fd = _open_stream(str(target))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as exc:
            why = "no process reads it" if exc.errno == errno.ENXIO else exc.strerror or str(exc)
            raise InputError(f"cannot write {path}: {why}") from None
        return
    if mode is not None and not stat.S_ISREG(mode):
        raise InputError(f"cannot write {path}: it is {_kind(mode)}, not a regular file")
    # A name of its own beside the target (O_EXCL); created 0666 less the umask, as any new file, by the kernel.
    tmp = str(target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"))
    created = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        created = True
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))  # an existing file keeps its permissions
        os.replace(tmp, target)
    except OSError as exc:
        if created:  # only ours: O_EXCL never opened anyone else's file
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
