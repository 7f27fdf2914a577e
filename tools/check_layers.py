"""Check the project's import structure from the source alone (``ast``; nothing is imported or run).

Rules (docs/architecture.md):
- ``dse`` is layered; a module may import its own layer and the layers below it, never one above:
  ``cli -> exports -> results -> rl -> search -> runtime -> validation -> serving -> training -> system -> model -> study
  -> errors`` (then the base packages).
  The facade (``dse/__init__.py``, ``dse/__main__.py``, ``dse/jit_cache.py``) may import any layer;
  no module of a layer imports the facade.
- The base packages ``workloads``, ``arch``, ``memory`` and ``noc`` import nothing from ``dse`` or from
  each other.
- No import cycle anywhere, counting imports inside functions and ``TYPE_CHECKING`` blocks, and counting
  that importing ``a.b.c`` first runs the package ``a.b``.
- No module of the five packages is longer than ``MAX_LINES`` lines, and no function longer than
  ``MAX_FUNCTION_LINES`` unless its docstring has a line starting ``Kept whole:`` saying why (a Numba
  kernel that must stay one function).
- Interfaces are explicit (docs/architecture.md, dse/model/contract.py): no ``__getattr__`` in ``dse``
  (compose by explicit delegation); no module uses another package's underscore names (a package: a
  layer of ``dse``, the facade, or a base package), by import or by attribute; no module of
  ``dse/model`` names a phase (a ``Phase(name=...)`` registered anywhere in ``dse``) in a string: phases
  plug into dse.model.phases; no module of ``dse`` unpacks a record by position into more than
  ``MAX_UNPACKED`` names.

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
LAYERS = ("errors", "quality", "study", "model", "system", "training", "serving", "validation", "runtime", "search", "rl", "results", "exports", "cli")    # bottom to top
FACADE = ("dse", "dse.__main__", "dse.jit_cache")
MAX_LINES = 450
MAX_FUNCTION_LINES = 120
MAX_UNPACKED = 3
REASON = "Kept whole:"
#: underscore attributes that are public API (namedtuple's)
PUBLIC_UNDERSCORE = {"_fields", "_replace", "_asdict", "_make", "_field_defaults"}
#: module -> the private names of another package it may use, each with its reason: dse.results.figure_file
#: redoes matplotlib 3.11's Agg glyph loop with FT2Font's own calls, only where matplotlib's method
#: hashes as written against, its PNGs compared byte for byte with the stock renderer's by a test
FOREIGN_PRIVATE = {"dse.results.figure_file": {"_set_transform", "_render_glyph"}}


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
    found += interface_problems(root, modules)
    return sorted(set(found), key=found.index)


def package_of(name: str) -> str:
    """The package whose private names a module may use: its dse layer, the facade, or its base package."""
    if name.startswith("dse.") and name not in FACADE:
        return "dse." + name.split(".")[1]
    return "dse" if name in FACADE else name.split(".")[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORE


def defined_names(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    """Package -> every name its modules define (functions, classes, assignments, attributes, arguments)."""
    out: dict[str, set[str]] = {}
    for name, tree in trees.items():
        names = out.setdefault(package_of(name), set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    return out


def private_uses(name: str, tree: ast.AST, path: str, modules: dict[str, Path], defined: dict[str, set[str]]):
    """Uses by module ``name`` of another package's underscore names (imported, or an attribute its own
    package defines nowhere)."""
    own = package_of(name)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for target, alias in zip(_imported(name, node, modules), node.names):
                if _private(alias.name) and package_of(target) != own:
                    yield f"{path}:{node.lineno} imports {alias.name} of {target}: use its public interface"
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in defined.get(own, set()) and node.attr not in FOREIGN_PRIVATE.get(name, ()):
                yield f"{path}:{node.lineno} uses {ast.unparse(node)}, another package's private name"


def phase_names(trees: dict[str, ast.AST]) -> set[str]:
    """Names of the phases registered in dse (``Phase(name="...")``)."""
    found = set()
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Phase":
                for kw in node.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        found.add(kw.value.value)
    return found


def docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def phase_strings(tree: ast.AST, path: str, phases: set[str]):
    """Strings of a dse/model module that name a phase (docstrings aside)."""
    docs = docstring_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in phases and id(node) not in docs:
            yield f"{path}:{node.lineno} names the phase {node.value!r}: the model layer names no phase (dse.model.phases)"


def long_functions(tree: ast.AST, path: str):
    """Functions over MAX_FUNCTION_LINES lines without a `REASON` line in their docstring."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            doc = ast.get_docstring(node) or ""
            if lines > MAX_FUNCTION_LINES and not any(line.strip().startswith(REASON) for line in doc.splitlines()):
                yield (f"{path}:{node.lineno} function {node.name} has {lines} lines; the limit is "
                       f"{MAX_FUNCTION_LINES} unless its docstring has a line '{REASON} <why>'")


def positional_unpacking(tree: ast.AST, path: str):
    """Assignments that unpack a record by position into more than `MAX_UNPACKED` names (``a, b, c, d = f()``);
    binding several names to as many values (``a, b, c, d = T.a, T.b, T.c, T.d``) or to constant indices
    (``A, B, C, D = range(4)``) is not unpacking."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or isinstance(node.value, ast.Tuple) or (
                isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "range"):
            continue                     # names bound to as many values, or to constant indices
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and (
                    len(target.elts) > MAX_UNPACKED or any(isinstance(e, ast.Starred) for e in target.elts)):
                yield (f"{path}:{node.lineno} unpacks {len(target.elts)} values by position; name the record's "
                       f"fields (a NamedTuple, dataclass or structured array), at most {MAX_UNPACKED} by position")


def interface_problems(root: Path, modules: dict[str, Path]) -> list[str]:
    """Breaches of the explicit-interface rules (module docstring)."""
    trees = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in modules.items()}
    defined = defined_names(trees)
    phases = phase_names({n: t for n, t in trees.items() if n.startswith("dse")})
    found = []
    for name, tree in trees.items():
        path = modules[name].relative_to(root).as_posix()
        if name.startswith("dse"):
            found += [f"{path}:{node.lineno} defines __getattr__: compose by explicit delegation"
                      for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
        found += list(private_uses(name, tree, path, modules, defined))
        if name.startswith("dse.model"):
            found += list(phase_strings(tree, path, phases))
        found += list(long_functions(tree, path))
        if name.startswith("dse"):
            found += list(positional_unpacking(tree, path))
    return found


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    found = problems(root)
    for line in found:
        print(line)
    print(f"{len(read_modules(root))} modules checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
