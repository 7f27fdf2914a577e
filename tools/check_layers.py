"""Check the project's import structure from the source alone (``ast``; nothing is imported or run).

Rules (docs/architecture.md):
- ``dse`` is layered; a module may import its own layer and the layers below it, never one above:
  ``cli -> exports -> results -> search -> serving -> training -> system -> model -> study -> errors`` (then the base packages).
  The facade (``dse/__init__.py``, ``dse/__main__.py``, ``dse/whatif.py``, ``dse/jit_cache.py``) may import any layer;
  no module of a layer imports the facade.
- The base packages ``workloads``, ``arch``, ``memory`` and ``noc`` import nothing from ``dse`` or from
  each other.
- No import cycle anywhere, counting imports inside functions and ``TYPE_CHECKING`` blocks, and counting
  that importing ``a.b.c`` first runs the package ``a.b``.
- No module of the five packages is longer than ``MAX_LINES`` lines.

Run ``python tools/check_layers.py`` from the repository root: it prints each problem on one line and
exits 1 if there is any.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx

PACKAGES = ("dse", "workloads", "arch", "memory", "noc")
BASE = ("workloads", "arch", "memory", "noc")
LAYERS = ("errors", "study", "model", "system", "training", "serving", "search", "rl", "results", "exports", "cli")    # bottom to top
FACADE = ("dse", "dse.__main__", "dse.whatif", "dse.jit_cache")
MAX_LINES = 500


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_modules(root: Path) -> dict[str, Path]:
    """Every module of the five packages under ``root``, by dotted name."""
    return {module_name(root, p): p for pkg in PACKAGES if (root / pkg).is_dir()
            for p in sorted((root / pkg).rglob("*.py"))}


def _imported(name: str, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """Dotted names of the project modules one import statement of module ``name`` loads."""
    is_package = modules[name].name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        targets = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target
                   for alias in node.names]
    found = []
    for target in targets:
        while target and target not in modules:        # `import a.b.attr` or a name inside a module
            target = target.rpartition(".")[0]
        if target:
            found.append(target)
    return found


def import_graph(root: Path, modules: dict[str, Path] | None = None) -> nx.DiGraph:
    """Edges importer -> imported between project modules, with the packages each import runs first."""
    modules = modules or read_modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _imported(name, node, modules):
                parts = target.split(".")
                if target != name:
                    graph.add_edge(name, target)
                for i in range(1, len(parts)):           # importing a.b.c runs a and a.b first
                    step = ".".join(parts[:i])
                    if step in modules and not name.startswith(step + "."):
                        graph.add_edge(name, step)
    return graph


def layer_of(name: str) -> int | None:
    """Index in LAYERS of a dse module, None for the facade and for other packages."""
    if name in FACADE or not name.startswith("dse."):
        return None
    return LAYERS.index(name.split(".")[1]) if name.split(".")[1] in LAYERS else -1


def problems(root: Path) -> list[str]:
    """Every breach of the rules above, one line each (empty when the structure is sound)."""
    modules = read_modules(root)
    graph = import_graph(root, modules)
    found = []
    for cycle in sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1):
        found.append("import cycle: " + " <-> ".join(cycle))
    for src, dst in sorted(graph.edges):
        top = src.split(".")[0]
        if top in BASE and dst.split(".")[0] != top:
            found.append(f"{src} imports {dst}: the base packages import nothing from dse or each other")
        elif top == "dse" and src not in FACADE:
            if dst in FACADE:
                found.append(f"{src} imports the facade {dst}; import the layer module instead")
                continue
            s, d = layer_of(src), layer_of(dst)
            if s >= 0 and d is not None and d > s:
                found.append(f"{src} ({LAYERS[s]}) imports {dst} ({LAYERS[d]}), a layer above it")
    for name, path in modules.items():
        if layer_of(name) == -1:
            found.append(f"{name} is in no layer; dse layers are {', '.join(LAYERS)}")
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(root)} has {lines} lines; the limit is {MAX_LINES}")
    return sorted(set(found), key=found.index)


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    found = problems(root)
    for line in found:
        print(line)
    print(f"{len(read_modules(root))} modules checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
