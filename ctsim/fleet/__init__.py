"""The fleet: every node a Prometheus knows, read in a handful of queries and ranked by scrub risk.

``prometheus`` is the HTTP API client (transport and errors), ``series`` the
queries and what they say about each node (``NodeFacts``), ``risk`` the
projection and ranking of each node, ``live`` a node's facts as a scenario's
inputs, ``simulate`` the model on the riskiest nodes.

May import: ``ctsim.core``, ``ctsim.inputs``, ``ctsim.sim``, ``ctsim.capacity``
(its pool and ``run_point``) and itself; never the command line.
"""
