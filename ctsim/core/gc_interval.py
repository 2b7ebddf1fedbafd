"""Cilium's adaptive CT GC interval, with no clock: ``GetInterval`` and ``calculateInterval``.

Source: ``pkg/maps/ctmap/ctmap.go`` in v1.16.5. The delete ratio is deleted
entries over the map's *capacity*, which is why a large, quiet map drifts to
the 12 h cap while expired entries pile up. Durations are held as Go holds
them, integer nanoseconds. ``ctsim.sim.gc`` runs it on SimPy's clock.
"""

from __future__ import annotations

from ctsim.core.defaults import CONNTRACK_GC_MAX_LRU_INTERVAL, CONNTRACK_GC_MIN_INTERVAL, CONNTRACK_GC_STARTING_INTERVAL

_NS = 1_000_000_000


def _round_second(ns: int) -> int:
    """Go's ``Duration.Round(time.Second)``: halves round away from zero."""
    q, r = divmod(abs(ns), _NS)
    if r * 2 >= _NS:
        q += 1
    return (q if ns >= 0 else -q) * _NS


def to_duration(seconds: float) -> int:
    """Seconds as Go's ``time.Duration``: integer nanoseconds (what every comparison below runs on)."""
    return round(seconds * _NS)


def _calculate_interval_ns(interval: int, max_delete_ratio: float) -> int:
    if max_delete_ratio == 0.0:
        return interval
    if max_delete_ratio > 0.25:
        ratio = min(max_delete_ratio, 0.9)
        # Go: time.Duration(float64(interval) * (1.0 - ratio)) truncates, then rounds.
        interval = _round_second(int(float(interval) * (1.0 - ratio)))
        return max(interval, _MIN_NS)
    if max_delete_ratio < 0.05:
        interval = _round_second(int(float(interval) * 1.5))
        return min(interval, _MAX_LRU_NS)
    return interval


def calculate_interval(prev_interval_s: float, max_delete_ratio: float) -> float:
    """``calculateInterval``: the next GC interval (seconds) from the previous one and the ratio."""
    return _calculate_interval_ns(to_duration(prev_interval_s), max_delete_ratio) / _NS


_MIN_NS = to_duration(CONNTRACK_GC_MIN_INTERVAL)
_MAX_LRU_NS = to_duration(CONNTRACK_GC_MAX_LRU_INTERVAL)
_STARTING_NS = to_duration(CONNTRACK_GC_STARTING_INTERVAL)


class _Duration:
    """A duration attribute kept as Go keeps it (``time.Duration``, integer ns), read and set in seconds."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}_ns"

    def __get__(self, obj: object, owner: type | None = None) -> float:
        return getattr(obj, self.slot) / _NS

    def __set__(self, obj: object, seconds: float) -> None:
        setattr(obj, self.slot, to_duration(seconds))


class GCPolicy:
    """``GetInterval`` with its ``cachedGCInterval``; the agent's GC flags, given in seconds.

    ``fixed_interval`` is ``conntrack-gc-interval`` (fixed when > 0),
    ``max_interval`` is ``conntrack-gc-max-interval`` (a cap when > 0).
    ``cached_interval`` is 0 in a freshly started agent. Up to v1.18.1
    ``calculateInterval`` writes it, uncapped, whenever the ratio it is given
    is non-zero; from v1.18.2 (``capped_cache``) the GC loop writes the capped
    interval after every full pass (gc.go:196-227 at 5bd307a8f6). They are
    held as Go holds them, integer nanoseconds, so the early-pass scaling
    (``float64(expected) / float64(actual)``) and the 0.05/0.25 thresholds
    see the numbers Go sees, and a month-long interval stays exact.
    """

    __slots__ = ("_cached_interval_ns", "_fixed_interval_ns", "_full_gc_ttl_ns", "_max_interval_ns", "capped_cache")
    fixed_interval = _Duration()
    max_interval = _Duration()
    cached_interval = _Duration()

    def __init__(
        self,
        fixed_interval: float = 0.0,
        max_interval: float = 0.0,
        cached_interval: float = 0.0,
        capped_cache: bool = False,
    ) -> None:
        self.fixed_interval, self.max_interval, self.cached_interval = fixed_interval, max_interval, cached_interval
        self.capped_cache = capped_cache
        self._full_gc_ttl_ns = 0  # forceFullGCTTL: when the next full pass is due (v1.18.2+), the zero time at start

    def after_pass(self, actual_prev: float, max_delete_ratio: float, full: bool, now: float) -> float:
        """The wait after a pass that may have walked only some families (a signalled one).

        Up to v1.18.1 every pass, full or not, computes ``GetInterval`` and
        the loop waits a fresh ``time.After`` of it: a signalled pass resets
        the clock, so while signals come faster than the interval the full
        pass never does (cilium #40820). From v1.18.2 (529cdc9a96, backport
        caa264c05c) a full pass caches the interval and sets the deadline of
        the next; a partial one keeps counting down to that deadline, unless
        its own interval is shorter, which it then caches (gc.go:196-227 at
        5bd307a8f6).
        """
        if not self.capped_cache:
            return self.get_interval(actual_prev, max_delete_ratio)
        interval = self._interval_ns(actual_prev, max_delete_ratio)
        now_ns = to_duration(now)
        if full:
            self._cached_interval_ns = interval
            self._full_gc_ttl_ns = now_ns + interval
        else:
            remaining = max(0, self._full_gc_ttl_ns - now_ns)
            if remaining < interval:
                interval = remaining
            else:
                self._cached_interval_ns = interval
        return interval / _NS

    def _interval_ns(self, actual_prev: float, max_delete_ratio: float) -> int:
        """``GetInterval`` without side effects (v1.18.2+), capped."""
        if self._fixed_interval_ns > 0:
            return self._fixed_interval_ns
        return self._capped(_calculate_interval_ns(*self._scaled(actual_prev, max_delete_ratio)))

    def _scaled(self, actual_prev: float, max_delete_ratio: float) -> tuple[int, float]:
        """The expected interval (the cache, or 5m in a fresh agent) and the ratio, scaled up for an early pass."""
        expected, ratio = self._cached_interval_ns, max_delete_ratio
        actual = to_duration(actual_prev)
        if expected == 0:
            expected = _STARTING_NS
        elif 0 < actual < expected:
            ratio *= float(expected) / float(actual)
        return expected, ratio

    def _capped(self, interval: int) -> int:
        return self._max_interval_ns if 0 < self._max_interval_ns < interval else interval

    def get_interval(self, actual_prev: float, max_delete_ratio: float) -> float:
        """``GetInterval``: the next interval (seconds) from the pass that just ran.

        ``actual_prev`` is the time since the previous pass started (0 for the
        first pass). An early pass (signal-triggered) scales the ratio up by
        expected/actual, but only once the cache holds an interval.
        """
        if self._fixed_interval_ns > 0:
            return self._fixed_interval_ns / _NS
        expected, ratio = self._scaled(actual_prev, max_delete_ratio)
        interval = _calculate_interval_ns(expected, ratio)
        if ratio != 0.0 and not self.capped_cache:
            self._cached_interval_ns = interval
        interval = self._capped(interval)
        if self.capped_cache:  # every pass of the model is a full one (all families), and succeeds
            self._cached_interval_ns = interval
        return interval / _NS
