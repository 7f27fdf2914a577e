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
    ({"dse/model/long.py": "x = 1\n" * 501}, "dse/model/long.py has 501 lines; the limit is 500"),
])
def test_each_breach_is_named(tmp_path, files, expected):
    found = check_layers.problems(_tree(tmp_path, files))
    assert any(line.startswith(expected) for line in found), found


def test_package_init_counts_as_imported_first(tmp_path):
    # importing dse.model.evaluator runs dse/model/__init__.py, which here imports the importer back
    root = _tree(tmp_path, {"dse/model/__init__.py": "from ..study.spec import Study\n",
                            "dse/study/spec.py": "from ..model.evaluator import x\n",
                            "dse/model/evaluator.py": ""})
    assert any(line.startswith("import cycle: dse.model <-> dse.study.spec") for line in check_layers.problems(root))
