"""The tree shows the layers: imports run one way, never in circles (docs/architecture.md)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from ctsim.options import SCENARIO_FLAGS
from ctsim.scenario import resolve

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"ctsim": ROOT / "ctsim", "ctwatch": ROOT / "watchdog" / "ctwatch"}

# What each layer may import of the project (besides itself). The top-level modules of ctsim are split in
# two: the command line, and the inputs and arithmetic that every layer shares.
COMMAND_LINE = {
    "ctsim.cli", "ctsim.options", "ctsim.report", "ctsim.tables", "ctsim.plots", "ctsim.term", "ctsim.fleet_view",
}  # fmt: skip
# `python -m ctsim.capacity.docs` renders the model's tables and plots into docs/: a renderer, like the CLI.
COMMAND_LINE.add("ctsim.capacity.docs")
ALLOWED: dict[str, set[str]] = {
    "base": {"base"},
    "ctsim.sim": {"base"},
    "ctsim.kernel": {"base", "ctsim.sim"},
    "ctsim.capacity": {"base", "ctsim.sim"},
    "ctsim.fleet": {"base", "ctsim.sim", "ctsim.capacity"},
    "command line": {"base", "ctsim.sim", "ctsim.kernel", "ctsim.capacity", "ctsim.fleet", "command line"},
    "ctwatch": {"base", "ctsim.kernel.bpf", "ctsim.kernel.netns_conntrack"},
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
    if module.startswith("ctwatch"):
        return "ctwatch"
    if module in COMMAND_LINE or module == "ctsim.__main__":
        return "command line"
    for package in ("ctsim.sim", "ctsim.kernel", "ctsim.capacity", "ctsim.fleet"):
        if module == package or module.startswith(package + "."):
            return package
    return "base"


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
        layer = _layer(module)
        for dep in sorted(_imports(path, modules)):
            dep_layer = _layer(dep)
            if dep_layer == layer or dep_layer in ALLOWED[layer] or dep in ALLOWED[layer]:
                continue
            wrong.append(f"{module} ({layer}) imports {dep} ({dep_layer})")
    assert not wrong, "\n".join(wrong)


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
    assert out.strip() == "['bpf', 'cilium_metrics', 'nf_conntrack']"


def test_the_command_line_declares_the_defaults_resolve_takes() -> None:
    """``ctsim sweep`` reads the defaults from resolve(), ``ctsim run --help`` from options: the same."""
    params = inspect.signature(resolve).parameters
    assert set(SCENARIO_FLAGS) == set(params)
    assert {n: d for n, (_, d) in SCENARIO_FLAGS.items()} == {n: p.default for n, p in params.items()}
