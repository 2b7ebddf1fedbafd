"""The ``bpf(2)`` syscall through ctypes: just what ctsim and ctwatch need.

Map create, element lookup/update/delete/get-next-key, batched lookup and
update, pin/get on bpffs (read-only when asked) and ``BPF_OBJ_GET_INFO_BY_FD``.
Struct layouts follow ``union bpf_attr`` in ``include/uapi/linux/bpf.h``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280, "riscv64": 280, "ppc64le": 361, "s390x": 351}

# enum bpf_cmd
BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_MAP_GET_NEXT_KEY = 4
BPF_OBJ_PIN = 6
BPF_OBJ_GET = 7
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_MAP_LOOKUP_BATCH = 24
BPF_MAP_UPDATE_BATCH = 26

# enum bpf_map_type
BPF_MAP_TYPE_HASH = 1
BPF_MAP_TYPE_LRU_HASH = 9

BPF_ANY = 0
BPF_F_RDONLY = 1 << 3  # file_flags of BPF_OBJ_GET: a read-only fd

_u32, _u64 = ctypes.c_uint32, ctypes.c_uint64


class _MapCreateAttr(ctypes.Structure):
    _fields_ = [
        ("map_type", _u32),
        ("key_size", _u32),
        ("value_size", _u32),
        ("max_entries", _u32),
        ("map_flags", _u32),
        ("inner_map_fd", _u32),
        ("numa_node", _u32),
        ("map_name", ctypes.c_char * 16),
    ]


class _ElemAttr(ctypes.Structure):
    _fields_ = [("map_fd", _u32), ("_pad", _u32), ("key", _u64), ("value", _u64), ("flags", _u64)]


class _BatchAttr(ctypes.Structure):
    _fields_ = [
        ("in_batch", _u64),
        ("out_batch", _u64),
        ("keys", _u64),
        ("values", _u64),
        ("count", _u32),
        ("map_fd", _u32),
        ("elem_flags", _u64),
        ("flags", _u64),
    ]


class _ObjAttr(ctypes.Structure):
    _fields_ = [("pathname", _u64), ("bpf_fd", _u32), ("file_flags", _u32)]


class _InfoAttr(ctypes.Structure):
    _fields_ = [("bpf_fd", _u32), ("info_len", _u32), ("info", _u64)]


class _MapInfo(ctypes.Structure):
    _fields_ = [
        ("type", _u32),
        ("id", _u32),
        ("key_size", _u32),
        ("value_size", _u32),
        ("max_entries", _u32),
        ("map_flags", _u32),
        ("name", ctypes.c_char * 16),
    ]


class BPFError(OSError):
    """A failed bpf(2) call; ``errno`` says why (EPERM: no CAP_BPF or seccomp)."""


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_NR_BPF = _SYS_BPF.get(platform.machine(), -1)


def _buf(data: bytes, size: int) -> ctypes.Array[ctypes.c_char]:
    """A C buffer of exactly ``size`` bytes holding ``data`` (zero-padded)."""
    if len(data) > size:
        raise ValueError(f"{len(data)} bytes do not fit {size}")
    buf = (ctypes.c_char * size)()
    ctypes.memmove(buf, data, len(data))
    return buf


def _bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    ret = _syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret < 0:
        err = ctypes.get_errno()
        raise BPFError(err, f"bpf({what}): {os.strerror(err)}")
    return ret


@dataclass(frozen=True)
class MapInfo:
    type: int
    id: int
    key_size: int
    value_size: int
    max_entries: int
    map_flags: int
    name: str


class BPFMap:
    """An open BPF map fd; close it (or use ``with``) to let the kernel free the map."""

    def __init__(self, fd: int, key_size: int, value_size: int, max_entries: int) -> None:
        self.fd = fd
        self.key_size = key_size
        self.value_size = value_size
        self.max_entries = max_entries
        self._key = ctypes.create_string_buffer(key_size)
        self._next = ctypes.create_string_buffer(key_size)
        self._value = ctypes.create_string_buffer(value_size)

    @classmethod
    def create(
        cls, map_type: int, key_size: int, value_size: int, max_entries: int, name: str = "", flags: int = 0
    ) -> BPFMap:
        attr = _MapCreateAttr(
            map_type=map_type,
            key_size=key_size,
            value_size=value_size,
            max_entries=max_entries,
            map_flags=flags,
            map_name=name.encode()[:15],
        )
        return cls(_bpf(BPF_MAP_CREATE, attr, "BPF_MAP_CREATE"), key_size, value_size, max_entries)

    @classmethod
    def open_pinned(cls, path: str, read_only: bool = True) -> BPFMap:
        """``BPF_OBJ_GET``; read-only by default, so the map cannot be written through it."""
        if os.path.isdir(path):  # BPF_OBJ_GET answers EACCES for a directory, which reads as a permission problem
            raise IsADirectoryError(errno.EISDIR, "a directory, not a pinned BPF map", path)
        raw = os.fsencode(path)
        buf = ctypes.create_string_buffer(raw)
        attr = _ObjAttr(pathname=ctypes.addressof(buf), file_flags=BPF_F_RDONLY if read_only else 0)
        fd = _bpf(BPF_OBJ_GET, attr, f"BPF_OBJ_GET {path}")
        try:
            info = map_info(fd)
        except BPFError:
            os.close(fd)
            raise
        return cls(fd, info.key_size, info.value_size, info.max_entries)

    def pin(self, path: str) -> None:
        buf = ctypes.create_string_buffer(os.fsencode(path))
        _bpf(BPF_OBJ_PIN, _ObjAttr(pathname=ctypes.addressof(buf), bpf_fd=self.fd), f"BPF_OBJ_PIN {path}")

    def info(self) -> MapInfo:
        return map_info(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BPFMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Elements, one syscall each: Cilium 1.16's walk.
    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
        k, v = _buf(key, self.key_size), _buf(value, self.value_size)
        attr = _ElemAttr(map_fd=self.fd, key=ctypes.addressof(k), value=ctypes.addressof(v), flags=flags)
        _bpf(BPF_MAP_UPDATE_ELEM, attr, "BPF_MAP_UPDATE_ELEM")

    def delete(self, key: bytes) -> bool:
        k = _buf(key, self.key_size)
        attr = _ElemAttr(map_fd=self.fd, key=ctypes.addressof(k))
        try:
            _bpf(BPF_MAP_DELETE_ELEM, attr, "BPF_MAP_DELETE_ELEM")
        except BPFError as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise
        return True

    @property
    def last_value(self) -> bytes:
        """The value ``walk`` read for the key it yielded last."""
        return self._value.raw

    def walk(self, limit: int | None = None) -> Iterator[bytes]:
        """``get_next_key`` + ``lookup`` per entry, as Cilium 1.16 walks a CT map.

        Yields each key (its value is in ``last_value`` until the next step).
        Stops after ``limit`` entries, or at the end of the map.
        """
        nxt, key, value = self._next, self._key, self._value
        get_next = _ElemAttr(map_fd=self.fd, key=0, value=ctypes.addressof(nxt))
        lookup = _ElemAttr(map_fd=self.fd, key=ctypes.addressof(nxt), value=ctypes.addressof(value))
        nr, cmd_next, cmd_lookup = _NR_BPF, BPF_MAP_GET_NEXT_KEY, BPF_MAP_LOOKUP_ELEM
        ref_next, ref_lookup = ctypes.byref(get_next), ctypes.byref(lookup)
        size = ctypes.sizeof(_ElemAttr)
        n = 0
        while limit is None or n < limit:
            if _syscall(nr, cmd_next, ref_next, size) < 0:
                err = ctypes.get_errno()
                if err == errno.ENOENT:
                    return
                raise BPFError(err, f"bpf(BPF_MAP_GET_NEXT_KEY): {os.strerror(err)}")
            if _syscall(nr, cmd_lookup, ref_lookup, size) < 0:
                err = ctypes.get_errno()
                if err != errno.ENOENT:  # deleted between the two calls: skip it
                    raise BPFError(err, f"bpf(BPF_MAP_LOOKUP_ELEM): {os.strerror(err)}")
            ctypes.memmove(key, nxt, self.key_size)
            get_next.key = ctypes.addressof(key)
            n += 1
            yield nxt.raw

    # Batches: Cilium 1.18's walk, and how we fill maps quickly.
    def lookup_batch(self, batch_size: int = 4096, grow: int = 0) -> Iterator[int]:
        """``BPF_MAP_LOOKUP_BATCH`` over the whole map; yields each batch's count.

        Memory stays bounded by one batch of keys and values. ``grow``: on
        ``ENOSPC`` (a bucket holds more than a batch) double the batch and try
        again, up to that many times a batch, as Cilium's ``BatchIterator``
        does (``defaultBatchedRetries = 3``).
        """
        token_in = ctypes.create_string_buffer(max(self.key_size, 8))
        token_out = ctypes.create_string_buffer(max(self.key_size, 8))
        attr = _BatchAttr(out_batch=ctypes.addressof(token_out), map_fd=self.fd)

        def buffers(size: int) -> tuple[ctypes.Array[ctypes.c_char], ctypes.Array[ctypes.c_char]]:
            keys = ctypes.create_string_buffer(self.key_size * size)
            values = ctypes.create_string_buffer(self.value_size * size)
            attr.keys, attr.values = ctypes.addressof(keys), ctypes.addressof(values)
            return keys, values

        held = [buffers(batch_size)]  # the buffers the kernel writes into: alive while attr points at them
        first, tries = True, 0
        while True:
            attr.in_batch = 0 if first else ctypes.addressof(token_in)
            attr.count = batch_size
            ret = _syscall(_NR_BPF, BPF_MAP_LOOKUP_BATCH, ctypes.byref(attr), ctypes.sizeof(attr))
            err = ctypes.get_errno() if ret < 0 else 0
            if err == errno.ENOSPC and tries < grow:
                batch_size, tries = batch_size * 2, tries + 1
                held[0] = buffers(batch_size)
                continue
            if ret < 0 and err != errno.ENOENT:
                raise BPFError(err, f"bpf(BPF_MAP_LOOKUP_BATCH): {os.strerror(err)}")
            tries = 0
            if attr.count:
                yield attr.count
            if err == errno.ENOENT:
                return
            ctypes.memmove(token_in, token_out, len(token_in))
            first = False

    def count(self, batch_size: int = 4096) -> int:
        """Entries present, by batched lookup: the cheap way to count."""
        return sum(self.lookup_batch(batch_size))

    def update_batch(self, keys: bytes, values: bytes, count: int) -> int:
        """``BPF_MAP_UPDATE_BATCH`` of ``count`` packed keys and values; returns how many went in."""
        kbuf, vbuf = _buf(keys, self.key_size * count), _buf(values, self.value_size * count)
        attr = _BatchAttr(keys=ctypes.addressof(kbuf), values=ctypes.addressof(vbuf), count=count, map_fd=self.fd)
        _bpf(BPF_MAP_UPDATE_BATCH, attr, "BPF_MAP_UPDATE_BATCH")
        return attr.count


def map_info(fd: int) -> MapInfo:
    info = _MapInfo()
    attr = _InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr, "BPF_OBJ_GET_INFO_BY_FD")
    return MapInfo(
        type=info.type,
        id=info.id,
        key_size=info.key_size,
        value_size=info.value_size,
        max_entries=info.max_entries,
        map_flags=info.map_flags,
        name=info.name.decode(errors="replace"),
    )
