"""The base every layer shares, ctwatch included: Cilium's constants and the rules that need no clock.

``defaults`` (Cilium's constants), ``rate`` (the API limiter's arithmetic),
``gc_interval`` (``GetInterval``), ``sizing`` (the maps' sizes),
``projection`` (walk and burst time), ``profiles`` and ``calibration`` (walk
rates), ``quantity`` (counts and durations as people write them), ``floats``,
``files`` and ``errors``.

May import: itself only. Never SimPy, never typer.
"""
