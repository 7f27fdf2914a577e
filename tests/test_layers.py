"""The import structure of docs/architecture.md, read from the source by tools/check_layers.py."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_layers", ROOT / "tools" / "check_layers.py")
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def test_project_has_no_cycle_upward_import_or_long_module():
    assert check_layers.problems(ROOT) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"dse/__init__.py": "", "dse/errors.py": "", "dse/model/__init__.py": "",
                      "dse/study/__init__.py": "", "noc/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_sound_tree_passes(tmp_path):
    root = _tree(tmp_path, {"dse/study/spec.py": "from ..errors import StudyError\nimport noc\n",
                            "dse/model/evaluator.py": "from ..study.spec import X\nfrom . import tables\n",
                            "dse/model/tables.py": "from ..study import spec\n"})
    assert check_layers.problems(root) == []


@pytest.mark.parametrize("files, expected", [
    ({"dse/model/a.py": "def f():\n    from .b import x\n", "dse/model/b.py": "from .a import y\n"},
     "import cycle: dse.model.a <-> dse.model.b"),
    ({"dse/study/spec.py": "from ..model.evaluator import Evaluator\n", "dse/model/evaluator.py": ""},
     "dse.study.spec (study) imports dse.model.evaluator (model), a layer above it"),
    ({"dse/model/x.py": "from .. import errors\nimport dse\n"},
     "dse.model.x imports the facade dse; import the layer module instead"),
    ({"noc/mesh.py": "from dse.errors import StudyError\n"},
     "noc.mesh imports dse.errors: the base packages import nothing from dse or each other"),
    ({"dse/loose.py": ""}, "dse.loose is in no layer; dse layers are"),
    ({"dse/model/long.py": "x = 1\n" * 451}, "dse/model/long.py has 451 lines; the limit is 450"),
    ({"dse/model/fwd.py": "class A:\n    def __getattr__(self, name):\n        return 1\n"},
     "dse/model/fwd.py:2 defines __getattr__"),
    ({"dse/system/a.py": "from ..model.b import _hidden\n", "dse/system/__init__.py": "",
      "dse/model/b.py": "_hidden = 1\n"}, "dse/system/a.py:1 imports _hidden of dse.model.b"),
    ({"dse/system/a.py": "def f(ev):\n    return ev.inner._arrays()\n", "dse/system/__init__.py": "",
      "dse/model/b.py": "class E:\n    def _arrays(self):\n        return 1\n"},
     "dse/system/a.py:2 uses ev.inner._arrays, another package's private name"),
    ({"dse/model/t.py": "def f(w):\n    return w.phase == 'serve'\n",
      "dse/serving/__init__.py": "", "dse/serving/p.py": "PHASE = Phase(name='serve')\n"},
     "dse/model/t.py:2 names the phase 'serve'"),
    ({"dse/model/k.py": "def f():\n    \"\"\"A kernel.\"\"\"\n" + "    x = 1\n" * 120},
     "dse/model/k.py:1 function f has 122 lines; the limit is 120"),
    ({"dse/system/r.py": "def f(g):\n    a, b, c, d = g()\n", "dse/system/__init__.py": ""},
     "dse/system/r.py:2 unpacks 4 values by position"),
])

def test_each_breach_is_named(tmp_path, files, expected):
    found = check_layers.problems(_tree(tmp_path, files))
    assert any(line.startswith(expected) for line in found), found


def test_interfaces_within_the_rules_pass(tmp_path):
    # a reason line lets a kernel stay whole; private names inside one package, self's, namedtuple API
    # and phase names in docstrings or outside dse/model are allowed
    root = _tree(tmp_path, {
        "dse/model/k.py": "def f():\n    \"\"\"A kernel.\n\n    Kept whole: Numba inlines it.\"\"\"\n" + "    x = 1\n" * 120,
        "dse/model/a.py": "from .b import _hidden\n\n\ndef g(t):\n    \"\"\"The 'serve' phase is not named here.\"\"\"\n"
                          "    return t._replace(x=1), _hidden\n",
        "dse/model/b.py": "_hidden = 1\nA, B, C, D = range(4)\n\n\ndef h(T):\n    a, b, c, d = T.a, T.b, T.c, T.d\n"
                          "    x, y, z = T.xyz\n",
        "dse/serving/__init__.py": "", "dse/serving/p.py": "PHASE = Phase(name='serve')\nUSE = 'serve'\n"})
    assert check_layers.problems(root) == []


def test_package_init_counts_as_imported_first(tmp_path):
    # importing dse.model.evaluator runs dse/model/__init__.py, which here imports the importer back
    root = _tree(tmp_path, {"dse/model/__init__.py": "from ..study.spec import Study\n",
                            "dse/study/spec.py": "from ..model.evaluator import x\n",
                            "dse/model/evaluator.py": ""})
    assert any(line.startswith("import cycle: dse.model <-> dse.study.spec") for line in check_layers.problems(root))


def _layer_blocks(page: str) -> dict[str, str]:
    """The text of each layer's entry in docs/architecture.md's listing of the layers of dse."""
    listing = page.split("## The layers of `dse`", 1)[1].split("```")[1]
    blocks: dict[str, str] = {}
    layer = None
    for line in listing.splitlines():
        head = line.split(" ", 1)[0]
        if head.endswith("/") or head.endswith(".py"):
            layer = head.rstrip("/").removesuffix(".py")
        if layer:
            blocks[layer] = blocks.get(layer, "") + line + "\n"
    return blocks


def test_architecture_page_lists_every_module():
    page = (ROOT / "docs" / "architecture.md").read_text()
    blocks = _layer_blocks(page)
    missing = []
    for path in sorted((ROOT / "dse").rglob("*.py")):
        rel = path.relative_to(ROOT / "dse")
        if path.name == "__init__.py" and len(rel.parts) <= 2:
            continue                 # a layer's own package (its block names it)
        if len(rel.parts) == 1:      # the facade's modules and errors.py: named anywhere on the page
            if path.name != "__init__.py" and path.name not in page:
                missing.append(str(rel))
            continue
        name = rel.parts[-2] + "/" if path.name == "__init__.py" else path.name
        if name not in blocks.get(rel.parts[0], ""):
            missing.append(str(rel))
    assert not missing, f"docs/architecture.md's layer listing does not name: {', '.join(missing)}"
