"""Tests of ctsim.capacity: generated docs, plans and sweeps."""
