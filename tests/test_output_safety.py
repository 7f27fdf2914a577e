"""Issue 15, writing: no file of the user's lost, nothing written outside the folder they named, and a
results swap killed at any step is finished or rolled back by the next run."""
from __future__ import annotations

import os
import shutil

import pytest

import dse
from dse.results import swap
from dse.search import checkpoint


@pytest.fixture(scope="module")
def result():
    study = dse.load_study("tests/data/tiny.yaml")
    return dse.run_study(study)


@pytest.fixture(scope="module")
def results_folder(result, tmp_path_factory):
    return dse.write_results(result, tmp_path_factory.mktemp("res") / "tiny", report=False)


def test_run_refuses_a_folder_it_did_not_write(dse_cli, tiny_path, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("four years of work")
    code, out, err = dse_cli("run", tiny_path, "--out", victim, "--quiet")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"--out: {victim} is a folder that dse did not write" in err
    assert (victim / "thesis.txt").read_text() == "four years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim"]


def test_run_refuses_a_results_folder_holding_a_file_of_the_users(dse_cli, tiny_path, results_folder, tmp_path):
    folder = tmp_path / "res"
    shutil.copytree(results_folder, folder)
    (folder / "notes.txt").write_text("mine")
    code, _, err = dse_cli("run", tiny_path, "--out", folder, "--quiet")
    assert code == 2 and "holds 'notes.txt', which dse did not write" in err
    assert (folder / "notes.txt").read_text() == "mine"


def test_run_replaces_its_own_folders_marked_or_from_before_the_marker(dse_cli, tiny_path, results_folder, tmp_path):
    marked, legacy, empty = tmp_path / "marked", tmp_path / "legacy", tmp_path / "empty"
    shutil.copytree(results_folder, marked)
    shutil.copytree(results_folder, legacy)
    (legacy / swap.MARKER).unlink()
    (legacy / "exports").mkdir()                 # `dse export`'s default place, inside the results folder
    empty.mkdir()
    for folder in (marked, legacy, empty):
        code, _, err = dse_cli("run", tiny_path, "--out", folder, "--quiet")
        assert code == 0, err
        assert swap.read_marker(folder)["complete"] is True
        assert (folder / "pareto.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "legacy", "marked"], "no sibling left behind"


def test_the_marker_names_the_toolkit_and_study(results_folder):
    marker = swap.read_marker(results_folder)
    assert marker["toolkit"] == "chiplet-dse" and marker["study"] == "tiny" and marker["complete"] is True
    assert marker["version"]


def _killed_at(step: str, result, out) -> int:
    """Write ``result`` to ``out`` in a child process killed (os._exit) right after swap step ``step``."""
    pid = os.fork()
    if pid == 0:                                  # the child: no cleanup handler runs after os._exit
        def kill(name):
            if name == step:
                os._exit(17)
        swap.FAULT_HOOK = kill
        try:
            dse.write_results(result, out, report=False)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked child")
@pytest.mark.parametrize("step", swap.STEPS)
@pytest.mark.parametrize("existing", [True, False], ids=["over-old-results", "first-write"])
def test_a_swap_killed_at_any_step_is_finished_or_rolled_back(result, results_folder, tmp_path, step, existing):
    out = tmp_path / "tiny"
    if existing:
        shutil.copytree(results_folder, out)
        (out / "pareto.csv").write_text("previous results\n")
    code = _killed_at(step, result, out)
    after_swap = swap.STEPS.index(step) >= swap.STEPS.index("moved-away")
    reached = existing or step == "moved-in" or not after_swap      # moving away and removing need old results
    assert code == (17 if reached else 0)
    done = swap.recover(out)
    # a complete temporary with no results folder is moved in: the swap is finished
    finished = (existing and step == "moved-away") or (not existing and step == "complete")
    assert done == ("finished" if finished else None)
    new_in = after_swap or finished
    assert sorted(p.name for p in tmp_path.iterdir()) == (["tiny"] if existing or new_in else []), \
        "stale siblings left"
    if existing or new_in:
        assert swap.read_marker(out)["complete"] is True
        kept_previous = (out / "pareto.csv").read_text() == "previous results\n"
        assert kept_previous == (not new_in), "rolled back before the swap, finished after it"
        assert (out / "evaluations.csv").exists() and (out / "study.yaml").exists()
    dse.write_results(result, out, report=False)   # the next write works as usual
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]


def test_recover_leaves_siblings_that_are_not_its_own(tmp_path):
    out = tmp_path / "res"
    mine = tmp_path / ".res.tmp-99999999-abcdefgh"       # a dead pid; but a user's file inside
    mine.mkdir()
    (mine / "thesis.txt").write_text("x")
    live = tmp_path / f".res.tmp-{os.getppid()}-abcdefgh"    # a running process's temporary
    live.mkdir()
    (live / swap.MARKER).write_text('{"toolkit": "chiplet-dse", "complete": false}')
    legacy = tmp_path / ".res.tmp-k3j4h5g6"                  # a toolkit before the marker, killed mid-write
    legacy.mkdir()
    (legacy / "pareto.csv").write_text("half")
    swap.recover(out)
    assert mine.exists() and live.exists() and not legacy.exists()


def test_finishing_the_run_leaves_a_users_checkpoint_folder_alone(dse_cli, tiny_path, tmp_path):
    (tmp_path / "res.checkpoint").mkdir()
    (tmp_path / "res.checkpoint" / "mine.txt").write_text("x")
    code, _, err = dse_cli("run", tiny_path, "--out", tmp_path / "res", "--quiet")
    assert code == 0, err
    assert (tmp_path / "res.checkpoint" / "mine.txt").read_text() == "x"
    assert not (tmp_path / "res.checkpoint" / checkpoint.STATE_FILE).exists()


@pytest.mark.parametrize("design_id", ["../../../evil/d1", "..", ".", "a/b", "d1\x00", ""])
def test_export_design_ids_cannot_name_paths(dse_cli, results_folder, tmp_path, design_id):
    code, out, err = dse_cli("export", results_folder, "--design", design_id, "--to", "booksim",
                             "--out", tmp_path / "o")
    assert code == 2 and err.count("\n") == 1 and "--design: a design id is letters" in err, err
    assert list(tmp_path.iterdir()) == [] and not (results_folder.parent / "evil").exists()


def test_export_never_overwrites_files_it_did_not_write(dse_cli, results_folder, tmp_path):
    design_id = sorted(p.stem for p in (results_folder / "designs").glob("*.yaml"))[0]
    (tmp_path / "README.md").write_text("my readme")
    code, _, err = dse_cli("export", results_folder, "--design", design_id, "--to", "booksim", "--out", tmp_path)
    assert code == 2 and "dse did not write it" in err and "README.md" in err
    assert (tmp_path / "README.md").read_text() == "my readme"
    code, out, err = dse_cli("export", results_folder, "--design", design_id, "--to", "booksim",
                             "--out", tmp_path / "o")
    assert code == 0, err
    code, out, err = dse_cli("export", results_folder, "--design", design_id, "--to", "booksim",
                             "--out", tmp_path / "o")
    assert code == 0, err                                      # its own folder: written again
    assert all(p.parent == tmp_path / "o" for p in (tmp_path / "o").iterdir())


def _checkpointed(tmp_path):
    study = dse.load_study("tests/data/tiny.yaml")
    study = study.model_copy(update={"search": study.search.model_copy(update={"checkpoint_every": 1})})
    state = checkpoint.path_for(tmp_path / "res")
    dse.run_study(study, checkpoint_dir=state)
    return state


def test_a_checkpoint_signed_by_another_key_is_not_unpickled(dse_cli, tmp_path, monkeypatch):
    state = _checkpointed(tmp_path)
    assert checkpoint.load(state).generation == 3
    monkeypatch.setenv("DSE_CHECKPOINT_KEY", str(tmp_path / "someone-else.key"))
    with pytest.raises(dse.StudyError, match="not written by your runs on this machine"):
        checkpoint.load(state)
    code, _, err = dse_cli("run", "--resume", tmp_path / "res", "--quiet")
    assert code == 2 and "a checkpoint is a pickle" in err and "--trust-checkpoint" in err
    assert checkpoint.load(state, trust=True).generation == 3


def test_a_tampered_checkpoint_is_refused(tmp_path):
    state = _checkpointed(tmp_path)
    data = bytearray((state / checkpoint.STATE_FILE).read_bytes())
    data[len(checkpoint.MAGIC) + 40] ^= 1
    (state / checkpoint.STATE_FILE).write_bytes(bytes(data))
    with pytest.raises(dse.StudyError, match="signature does not match"):
        checkpoint.load(state)
    (state / checkpoint.STATE_FILE).write_bytes(b"\x80\x04plain pickle of an older toolkit")
    with pytest.raises(dse.StudyError, match="not written by this version of the toolkit"):
        checkpoint.load(state)
