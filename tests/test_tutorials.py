"""Every tutorial (docs/tutorials/*.md) runs as written, block after block, in a scratch folder.

A ```yaml block whose first line is ``# file: NAME`` is written to NAME (its search shrunk to
`SMALL_SEARCH`, so that the tutorial's searches take seconds; the same study otherwise); each line of a
```bash block is a ``dse`` command, run in-process and expected to exit 0; ```python blocks run in one
namespace per page, in order. A ```text block shows output and is not run.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from dse.cli import main

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted(p for p in (ROOT / "docs" / "tutorials").glob("*.md") if p.name != "index.md")
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
SMALL_SEARCH = {"population": 8, "generations": 2}


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(page.read_text())]


def test_every_tutorial_is_found_and_runs_something():
    assert len(TUTORIALS) == 6
    for page in TUTORIALS:
        kinds = {kind for kind, _ in blocks(page)}
        assert kinds & {"bash", "python"}, page.name
        assert kinds <= {"bash", "python", "yaml", "text", "csv"}, (page.name, kinds)


def _shrunk(text: str) -> str:
    data = yaml.safe_load(text)
    if isinstance(data, dict) and "search" in data:
        data["search"].update(SMALL_SEARCH)
    return yaml.safe_dump(data, sort_keys=False)


def _dse(line: str) -> None:
    args = shlex.split(line)
    assert args[0] == "dse", f"a tutorial's bash lines are dse commands: {line!r}"
    try:
        main(args[1:])
    except SystemExit as exc:
        assert exc.code in (0, None), f"{line!r} exited {exc.code}"


@pytest.mark.parametrize("page", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "tutorial"}
    for kind, code in blocks(page):
        if kind in ("yaml", "csv"):
            first = code.splitlines()[0]
            name = re.match(r"#\s*file:\s*(\S+)", first)
            if name:
                path = tmp_path / name.group(1)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(_shrunk(code) if kind == "yaml" else code)
        elif kind == "bash":
            for line in code.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    _dse(line)
        elif kind == "python":
            exec(compile(code, f"<{page.name}>", "exec"), namespace)
    capsys.readouterr()
