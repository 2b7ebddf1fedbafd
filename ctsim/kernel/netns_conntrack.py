"""A throwaway network namespace and its own nf_conntrack table, through pyroute2.

Used by ``ctsim calibrate`` to time the kernel's conntrack dump, and by the
tests of ctwatch's nf_conntrack source. Entries are added over ctnetlink with
loopback addresses: no packet is ever sent.
"""

from __future__ import annotations

import signal
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyroute2 import NFCTSocket, netns
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from ctsim.core import termination

IPPROTO_TCP = 6


@contextmanager
def temporary_netns(prefix: str = "ctsim") -> Iterator[str]:
    """Creates a named netns and always removes it, also on Ctrl-C."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    netns.create(name)
    try:
        yield name
    finally:
        netns.remove(name)


def _tuple(i: int) -> tuple[NFCTAttrTuple, NFCTAttrTuple]:
    # 127.1.x.y -> 127.2.0.1:80, source port varies: unique, loopback-only tuples.
    src = f"127.1.{(i >> 8) & 0xFF}.{i & 0xFF}"
    sport = 1024 + (i >> 16)
    orig = NFCTAttrTuple(saddr=src, daddr="127.2.0.1", proto=IPPROTO_TCP, sport=sport, dport=80)
    reply = NFCTAttrTuple(saddr="127.2.0.1", daddr=src, proto=IPPROTO_TCP, sport=80, dport=sport)
    return orig, reply


@contextmanager
def interrupts_between_calls() -> Iterator[Callable[[], None]]:
    """Ctrl-C (and SIGTERM) land between netlink calls, never inside pyroute2's event loop.

    Yields ``check()``, which raises KeyboardInterrupt once Ctrl-C was pressed;
    call it between requests. An interrupt inside a request would leave
    pyroute2's asyncio machinery half-torn and noisy at exit.
    """
    pressed: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    main = threading.current_thread() is threading.main_thread()
    # Ctrl-C unless ignored; SIGTERM where it is taken as Ctrl-C (``core.termination``), not where it kills.
    deferred = [
        s
        for s, was in previous.items()
        if main and was is not signal.SIG_IGN and (s == signal.SIGINT or was is not signal.SIG_DFL)
    ]
    for s in deferred:
        signal.signal(s, lambda signum, _: pressed.append(signum))

    def check() -> None:
        if pressed:
            if signal.SIGTERM in pressed:
                termination.received = True
                raise termination.Terminated
            raise KeyboardInterrupt

    try:
        yield check
    finally:
        for s in deferred:
            signal.signal(s, previous[s])
    check()


def fill(name: str, entries: int, timeout: int = 3600, progress: Callable[[int], None] | None = None) -> int:
    """Adds ``entries`` conntrack entries to netns ``name``; returns how many went in."""
    added = 0
    with interrupts_between_calls() as check, NFCTSocket(netns=name) as ct:
        for i in range(entries):
            check()
            orig, reply = _tuple(i)
            ct.entry("add", timeout=timeout, tuple_orig=orig, tuple_reply=reply)
            added += 1
            if progress is not None and added % 256 == 0:
                progress(256)
    if progress is not None:
        progress(added % 256)
    return added


def stats(name: str | None = None, family: int = socket.AF_INET) -> tuple[int, int]:
    """(entries, max entries) from ``IPCTNL_MSG_CT_GET_STATS``: one message, no walk.

    A named namespace must exist: pyroute2 would otherwise create it.
    """
    if name and name not in netns.listnetns():
        raise FileNotFoundError(f"no network namespace named {name!r}")
    kwargs = {"netns": name} if name else {}
    with NFCTSocket(nfgen_family=family, **kwargs) as ct:
        msg = ct.count()[0]
    return int(msg.get("CTA_STATS_GLOBAL_ENTRIES")), int(msg.get("CTA_STATS_GLOBAL_MAX_ENTRIES"))


def dump_count(name: str) -> int:
    """Entries seen by a full ctnetlink dump: what a walk of nf_conntrack costs."""
    with NFCTSocket(netns=name) as ct:
        return sum(1 for _ in ct.dump())
