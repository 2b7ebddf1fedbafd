"""ctwatch: a node-exporter-style sidecar that warns before CT scrubs outgrow the CNI deadline."""

__version__ = "0.1.0"
