"""Every ```python example of README.md and docs/*.md runs as written.

The examples run in a scratch folder holding a copy of the bundled studies whose searches are shrunk to a
few generations of a small population (the same studies otherwise), so that the examples' searches take
seconds. A block may be skipped by the line ``<!-- docs-test: skip (why) -->`` just before it: a fragment
of a Numba kernel, whose variables only the kernel has.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(?:(<!--[^\n]*-->)\n)?```python\n(.*?)```", re.S)
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+)\)\s*-->")
#: the shrunk search of every study the examples read
SMALL_SEARCH = {"population": 8, "generations": 2}


def examples() -> list:
    """(file, line, code, skip reason or None) of every python block."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            comment = SKIP.search(match.group(1) or "")
            line = text.count("\n", 0, match.start(2)) + 1
            found.append(pytest.param(match.group(2), comment.group(1) if comment else None,
                                      id=f"{path.relative_to(ROOT)}:{line}"))
    return found


def test_blocks_are_found():
    ids = [p.id for p in examples()]
    assert any(i.startswith("README.md:") for i in ids) and len(ids) >= 8
    skipped = [p for p in examples() if p.values[1] is not None]
    assert len(skipped) <= 2, "skip markers are for kernel fragments only"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A folder with studies/ as bundled, each search shrunk to `SMALL_SEARCH`."""
    folder = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "studies", folder / "studies")
    for path in (folder / "studies").glob("*.yaml"):
        study = yaml.safe_load(path.read_text())
        study.setdefault("search", {}).update(SMALL_SEARCH)
        path.write_text(yaml.safe_dump(study, sort_keys=False))
    return folder


@pytest.mark.parametrize("code, skip", examples())
def test_example_runs(code, skip, scratch, monkeypatch):
    if skip:
        pytest.skip(skip)
    monkeypatch.chdir(scratch)
    exec(compile(code, "<docs example>", "exec"), {"__name__": "docs_example"})
