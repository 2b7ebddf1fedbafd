"""Capacity planning: the model over many scenarios.

``sweep`` runs a grid (in worker processes), ``plan`` answers sizing
questions for a node, each answer checked by simulation, ``mitigations``
simulates what ``ctsim run`` advises, ``replications`` and ``pool`` run
many seeds (locally or on Dask).

May import: ``ctsim.core``, ``ctsim.inputs``, ``ctsim.sim`` and itself.
Never ``ctsim.kernel``; the command line imports it, not the reverse.
"""
