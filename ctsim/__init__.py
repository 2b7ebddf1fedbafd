"""ctsim: a discrete-event model of Cilium's conntrack GC drift and scrub convoy."""

__version__ = "0.1.0"
