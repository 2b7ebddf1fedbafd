"""Tests of ctsim.kernel: real BPF maps and namespaces (as root; CTSIM_REQUIRE_KERNEL=1 makes them run)."""
