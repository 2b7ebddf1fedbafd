"""One collector per file, each enabled by a flag and each failing alone (as node_exporter's)."""
