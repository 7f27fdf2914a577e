"""Shared fixtures: the tiny study, an in-process runner for the ``dse`` command, and the runtime tests' study
(prepared once for every file that uses it)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dse.cli import main

DATA = Path(__file__).parent / "data"


@pytest.fixture
def tiny_path() -> Path:
    return DATA / "tiny.yaml"


@pytest.fixture
def tiny_dict(tiny_path) -> dict:
    return yaml.safe_load(tiny_path.read_text())


@pytest.fixture
def dse_cli(capsys):
    """Run ``dse ARGS`` in-process; returns (exit status, stdout, stderr)."""
    def run(*args: str):
        try:
            main(list(map(str, args)))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture(autouse=True, scope="session")
def _checkpoint_key(tmp_path_factory):
    """Checkpoints are signed with a per-user key (dse.search.signature): the tests keep theirs in a
    temporary folder, never in the real ~/.config."""
    import os
    os.environ["DSE_CHECKPOINT_KEY"] = str(tmp_path_factory.mktemp("key") / "checkpoint.key")
    yield


@pytest.fixture(scope="session")
def timeline_prepared():
    """The runtime tests' study (tests/data/timeline_study.yaml), prepared."""
    from dse.study.spec import load_study
    from dse.system.prepare import prepare
    return prepare(load_study(DATA / "timeline_study.yaml"))


@pytest.fixture(scope="session")
def timeline_design(timeline_prepared):
    """The first seed design of the runtime tests' study."""
    return timeline_prepared.evaluator.designs(timeline_prepared.space.seeds[:1])[0]
