"""Timers at an absolute simulated time.

``env.timeout(delay)`` fires at ``env.now + delay``. A pod whose waits were
played without events (``ctsim.parking``) re-enters the simulation later than
they began, and its timers must land on the very float the skipped
``timeout`` would have computed, or same-instant order could change.
"""

from __future__ import annotations

import math

import simpy


def timeout_at(env: simpy.Environment, t: float) -> simpy.Timeout:
    """A Timeout that fires exactly at ``t`` (not earlier than now)."""
    now = env.now
    delay = t - now
    while now + delay > t and delay > 0:  # t - now is within an ulp; step onto t
        delay = math.nextafter(delay, -math.inf)
    while now + delay < t:
        delay = math.nextafter(delay, math.inf)
    return env.timeout(delay)
