"""The tree shows the layers: imports run one way, never in circles (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from ctsim.cli.options import SCENARIO_FLAGS
from ctsim.inputs.given import FLAG_DEFAULTS, Given, parse_given

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"ctsim": ROOT / "ctsim", "ctwatch": ROOT / "watchdog" / "ctwatch"}

# What each layer may import of the project (besides itself), by package. The tree is the rule: a module's
# layer is the package it sits in, and the top of ctsim holds only __init__ and __main__.
LAYERS = ("ctsim.core", "ctsim.inputs", "ctsim.sim", "ctsim.kernel", "ctsim.capacity", "ctsim.fleet", "ctsim.cli")
ALLOWED: dict[str, set[str]] = {
    "ctsim.core": set(),
    "ctsim.inputs": {"ctsim.core"},
    "ctsim.sim": {"ctsim.core", "ctsim.inputs"},
    "ctsim.kernel": {"ctsim.core", "ctsim.inputs", "ctsim.sim"},
    "ctsim.capacity": {"ctsim.core", "ctsim.inputs", "ctsim.sim"},
    "ctsim.fleet": {"ctsim.core", "ctsim.inputs", "ctsim.sim", "ctsim.capacity"},
    "ctsim.cli": set(LAYERS),
    "ctsim.__main__": {"ctsim.cli"},
    # The sidecar: the base, the two kernel readers, and how a command runs (never SimPy or the model).
    "ctwatch": {"ctsim.core", "ctsim.kernel.bpf", "ctsim.kernel.netns_conntrack", "ctsim.cli.command"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for top, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = [top, *path.relative_to(folder).with_suffix("").parts]
            out[".".join(parts).removesuffix(".__init__")] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every project module ``path`` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name in modules:
                found.add(name)
                break
    return found - {"ctsim", "ctwatch"}  # a package's __init__ holds only its version


def _layer(module: str) -> str:
    for layer in (*LAYERS, "ctsim.__main__", "ctwatch"):
        if module == layer or module.startswith(layer + "."):
            return layer
    raise AssertionError(f"{module} is in no layer: a module of ctsim lives in one of {', '.join(LAYERS)}")


def _within(dep: str, allowed: set[str]) -> bool:
    return any(dep == a or dep.startswith(a + ".") for a in allowed)


def test_the_top_of_ctsim_holds_only_its_entry_points() -> None:
    top = sorted(p.name for p in SOURCES["ctsim"].glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]


def test_no_import_circles() -> None:
    modules = _modules()
    graph = {m: _imports(p, modules) for m, p in modules.items()}
    circles = []

    def visit(node: str, path: list[str], done: set[str]) -> None:
        for dep in sorted(graph[node]):
            if dep in path:
                circles.append(" -> ".join([*path[path.index(dep) :], dep]))
            elif dep not in done:
                visit(dep, [*path, dep], done)
        done.add(node)

    done: set[str] = set()
    for m in sorted(graph):
        visit(m, [m], done)
    assert not circles, "\n".join(circles)


def test_each_layer_imports_only_what_it_may() -> None:
    modules = _modules()
    wrong = []
    for module, path in sorted(modules.items()):
        if module == "ctsim":  # its __init__ holds only the version
            continue
        layer = _layer(module)
        for dep in sorted(_imports(path, modules)):
            if _layer(dep) == layer or _within(dep, ALLOWED[layer]):
                continue
            wrong.append(f"{module} ({layer}) imports {dep} ({_layer(dep)})")
    assert not wrong, "\n".join(wrong)


def test_every_file_the_architecture_names_exists() -> None:
    """docs/architecture.md's "where to change" table sends a newcomer to files: each one is there."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("## Where to change", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:ctsim|watchdog|tests|benchmarks)/[\w/]+(?:\.py)?/?)`", table))
    assert len(named) >= 15, named
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, missing


def test_ctwatch_runs_without_the_simulator() -> None:
    """The sidecar loads none of SimPy: start-up time and memory on every node."""
    code = (
        "import sys, ctwatch.cli, ctwatch.exposition, ctwatch.watcher, ctwatch.rules, ctwatch.web\n"
        "from ctwatch.sources import REGISTRY\n"
        "print(sorted(m for m in sys.modules if m == 'simpy' or m.startswith(('simpy.', 'ctsim.sim'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_watcher_alone_knows_every_collector() -> None:
    """Importing the watcher registers the collectors (a Watcher once collected nothing unless the CLI ran)."""
    code = "from ctwatch.watcher import Config; print(sorted(Config().enabled()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['bpf', 'cilium_metrics', 'kube_proxy', 'nf_conntrack']"


def test_the_command_line_declares_the_defaults_given_holds() -> None:
    """``ctsim run --help`` shows options' defaults, a sweep row leaves out FLAG_DEFAULTS: the same, and Given()'s."""
    assert {n: d for n, (_, d) in SCENARIO_FLAGS.items()} == FLAG_DEFAULTS
    assert parse_given(**FLAG_DEFAULTS) == Given()
