"""One collector per file, each registering itself and each failing alone (as node_exporter's).

Importing this package imports every module in it, in the order the page
lists them (``ORDER``; any other module after them, by name), so each joins
``ctwatch.collector.REGISTRY``.
"""

from __future__ import annotations

import importlib
import pkgutil

from ctwatch.collector import REGISTRY

ORDER = ("nf_conntrack", "bpf", "cilium_metrics")  # the page's order of sources, kept from before the registry

_found = sorted(m.name for m in pkgutil.iter_modules(__path__))
for _name in [*[n for n in ORDER if n in _found], *[n for n in _found if n not in ORDER]]:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["REGISTRY"]
