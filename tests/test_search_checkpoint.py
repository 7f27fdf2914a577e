"""Checkpoint and resume: an interrupted run continues to the same results as an uninterrupted one."""
from __future__ import annotations

import pickle

import pandas as pd
import pytest

import dse
from dse.search import checkpoint
from dse.results.run import resume_study


class Stop(KeyboardInterrupt):
    pass


def _study(algorithm: str, generations: int = 7, every: int = 2):
    study = dse.load_study("tests/data/tiny.yaml")
    return study.model_copy(update={"search": study.search.model_copy(
        update=dict(algorithm=algorithm, generations=generations, checkpoint_every=every))})


def _interrupt_at(generation: int):
    def on_generation(report):
        if report.generation == generation:
            raise Stop
    return on_generation


def _same(a, b):
    pd.testing.assert_frame_equal(a.evaluations, b.evaluations)
    pd.testing.assert_frame_equal(a.pareto, b.pareto)
    pd.testing.assert_frame_equal(a.convergence, b.convergence)
    assert a.reference_point == b.reference_point


@pytest.mark.parametrize("algorithm", ["nsga2", "nsga3", "agemoea2", "smsemoa", "moead", "random"])
def test_resume_ends_like_an_uninterrupted_run(tmp_path, algorithm):
    study = _study(algorithm)
    p = dse.prepare(study)
    whole = dse.run_study(study, prepared=p)
    state = checkpoint.path_for(tmp_path / "res")
    with pytest.raises(Stop):
        dse.run_study(study, prepared=p, checkpoint_dir=state, on_generation=_interrupt_at(4))
    saved = checkpoint.load(tmp_path / "res")
    assert saved.generation == 4, "generations 0..3 saved (every 2), the 5th was lost with the interrupt"
    seen = []
    resumed = resume_study(tmp_path / "res", prepared=p, on_generation=lambda r: seen.append(r.generation))
    assert seen == [4, 5, 6]
    _same(resumed, whole)


def test_resume_through_the_cli(tmp_path, dse_cli, tiny_path):
    whole_dir, cut_dir = tmp_path / "whole", tmp_path / "cut"
    code, _, err = dse_cli("run", tiny_path, "--out", whole_dir, "--quiet")
    assert code == 0, err
    assert not checkpoint.path_for(whole_dir).exists(), "a finished run leaves no checkpoint"
    study = dse.load_study(tiny_path)
    with pytest.raises(Stop):
        dse.run_study(study.model_copy(update={"search": study.search.model_copy(update={"checkpoint_every": 1})}),
                      checkpoint_dir=checkpoint.path_for(cut_dir), on_generation=_interrupt_at(1))
    assert not cut_dir.exists(), "nothing is written to the results folder before the run ends"
    code, _, err = dse_cli("run", "--resume", cut_dir, "--quiet")
    assert code == 0, err
    for name in ("evaluations.csv", "pareto.csv", "convergence.csv"):
        assert (cut_dir / name).read_text() == (whole_dir / name).read_text()
    assert not checkpoint.path_for(cut_dir).exists()


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    study = _study("nsga2", generations=3, every=1)
    state = tmp_path / "res.checkpoint"
    dse.run_study(study, checkpoint_dir=state)
    before = (state / checkpoint.STATE_FILE).read_bytes()

    def torn_dump(obj, f, protocol=None):
        f.write(pickle.dumps(obj)[:100])          # half a file, then the process dies
        raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint.cloudpickle, "dump", torn_dump)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(state, checkpoint.load(state))
    assert (state / checkpoint.STATE_FILE).read_bytes() == before
    assert [f.name for f in state.iterdir()] == [checkpoint.STATE_FILE], "no temporary file left behind"
    assert checkpoint.load(state).generation == 3
    (state / ".state-killed.tmp").write_bytes(b"torn")     # what a SIGKILL mid-save leaves
    monkeypatch.undo()
    checkpoint.save(state, checkpoint.load(state))
    assert [f.name for f in state.iterdir()] == [checkpoint.STATE_FILE], "the next save sweeps it"


@pytest.mark.parametrize("args,words", [
    (("--resume", "nowhere"), "no checkpoint to resume at nowhere"),
    ((), "give a STUDY_FILE to run, or --resume DIR"),
    (("TINY", "--resume", "x"), "give a STUDY_FILE to run, or --resume DIR"),
    (("--resume", "x", "--seed", "3"), "--seed cannot change a resumed run"),
    (("TINY", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"), "not both"),
    (("TINY", "--workers", "0"), "0 is not in the range x>=1"),
])
def test_run_option_errors_exit_2(dse_cli, tiny_path, args, words):
    code, out, err = dse_cli("run", *[tiny_path if a == "TINY" else a for a in args])
    assert code == 2, err
    assert words in err and "Traceback" not in err + out


def test_checkpoint_of_another_space_is_refused(tmp_path):
    study = _study("nsga2", generations=2, every=1)
    state = tmp_path / "res.checkpoint"
    dse.run_study(study, checkpoint_dir=state)
    search = checkpoint.load(state)
    search.problem.xu = search.problem.xu + 1
    checkpoint.save(state, search)
    with pytest.raises(dse.StudyError, match="different design space"):
        resume_study(state)
