"""Capacity planning: the model over many scenarios.

``sweep`` runs a grid (in worker processes), ``plan`` answers sizing
questions for a node, each answer checked by simulation, ``docs`` writes
the tables of docs/capacity-planning.md from the model.

May import: the top-level inputs and arithmetic, ``ctsim.sim`` and itself.
Never ``ctsim.kernel``; the command line imports it, not the reverse.
"""
