"""Tests of ctsim.sim: the simulated node, part by part and whole."""
