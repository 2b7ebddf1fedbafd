"""The simulated node: everything that runs on SimPy's clock.

Actors are generator processes (``kubelet``, ``endpoint``, ``gc``), the
per-family lock a Resource-like FIFO (``lock``), the API limiter a state
machine on callbacks (``limiter``, ``semaphore``) around the clock-free
``ctsim.core.rate``; the GC goroutine (``gc``) around the clock-free
``ctsim.core.gc_interval``. ``model`` wires them from a
``ctsim.inputs.scenario.Scenario`` and returns a ``result.Result``.

May import: simpy, ``ctsim.core``, ``ctsim.inputs`` and itself. Never
``ctsim.kernel``, ``ctsim.capacity``, ``ctsim.fleet`` or the command line.
"""
