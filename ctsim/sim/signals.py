"""The datapath's signals to the GC goroutine: an early pass for the families whose map filled up.

Sources: ``pkg/maps/ctmap/gc/signals.go`` (unchanged v1.16.5 → 1.20),
``bpf/lib/conntrack.h`` (``SIGNAL_CT_FILL_UP``), ``bpf/lib/nat.h``
(``SIGNAL_NAT_FILL_UP``). The GC goroutine unmutes the signals before it
waits and mutes them when it wakes: a signal sent while a pass runs is
dropped. One that arrives while it waits wakes it, and every family
signalled at that instant is OR-ed into the pass. Which signals a release
sends at all is ``core.releases.rules`` (``ct_fill_signal``); this only
carries them.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from ctsim.sim.clock import timeout_at


class GCSignals:
    """The signal channel between the datapath and the GC goroutine, muted while a pass runs."""

    __slots__ = ("dropped", "env", "muted", "pending", "sent", "waiter")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.muted = True  # until the goroutine first waits
        self.pending: set[str] = set()  # families signalled since it last woke
        self.waiter: simpy.Event | None = None
        self.sent: dict[str, int] = {}  # signals handled, by family (cilium_signals_handled_total)
        self.dropped: dict[str, int] = {}  # sent while muted

    def send(self, family: str) -> None:
        if self.muted:
            self.dropped[family] = self.dropped.get(family, 0) + 1
            return
        self.sent[family] = self.sent.get(family, 0) + 1
        self.pending.add(family)
        waiter = self.waiter
        if waiter is not None and not waiter.triggered:
            waiter.succeed()

    def wait(self) -> simpy.Event:
        """Unmutes and returns the event the next signal fires."""
        self.muted = False
        self.waiter = simpy.Event(self.env)
        return self.waiter

    def woken(self) -> frozenset[str]:
        """Mutes, and drains the families signalled since the wait began."""
        self.muted = True
        self.waiter = None
        families, self.pending = frozenset(self.pending), set()
        return families


def signal_source(
    env: simpy.Environment, signals: GCSignals, family: str, per_second: float, until: float, time_scale: float = 1.0
) -> Generator[simpy.Event, object, None]:
    """A family's fill-up signals, evenly spaced at ``per_second`` on the node's clock, up to ``until``."""
    k = 1
    while True:
        at = k / per_second
        if at > until:
            return
        yield timeout_at(env, at / time_scale)
        signals.send(family)
        k += 1
