"""The simulated node: everything that runs on SimPy's clock.

Actors are generator processes (``kubelet``, ``endpoint``, ``gc``), the
per-family lock a Resource-like FIFO (``lock``), the API limiter a state
machine on callbacks (``limiter``, ``semaphore``) around the clock-free
``ctsim.rate``. ``model`` wires them from a ``ctsim.scenario.Scenario`` and
returns a ``result.Result``.

May import: simpy, the top-level inputs and arithmetic (``scenario``,
``churn``, ``defaults``, ``rate``, ``sizing``, ``projection``, ``quantity``,
``errors``) and itself. Never ``ctsim.kernel``, ``ctsim.capacity`` or the
command line.
"""
