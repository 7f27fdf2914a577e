"""Parallel evaluation on a Dask LocalCluster gives exactly the serial results."""
from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import dse
import dse.search.distributed
from dse.search.distributed import DaskEngine, evaluation_engine
from dse.search import run_search


def test_evaluator_pickles_to_the_same_metrics():
    study = dse.load_study("tests/data/tiny.yaml")
    p = dse.prepare(study)
    X = np.random.default_rng(0).integers(p.space.lower, p.space.upper + 1, size=(20, p.space.n_var))
    pd.testing.assert_frame_equal(pickle.loads(pickle.dumps(p.evaluator))(X), p.evaluator(X))


def test_dask_runs_equal_the_serial_run(tmp_path):
    study = dse.load_study("tests/data/tiny.yaml")
    study = study.model_copy(update={"search": study.search.model_copy(update={"generations": 4})})
    p = dse.prepare(study)
    serial = dse.run_study(study, prepared=p)
    # --workers: a LocalCluster of 2 single-threaded processes on loopback
    with evaluation_engine(p.evaluator, workers=2) as engine:
        assert isinstance(engine, DaskEngine) and engine.chunks == 2
        address = engine.client.scheduler.address
        assert address.startswith("tcp://127.0.0.1:")
        on_engine = run_search(p.evaluator, study, engine=engine, prepared=p)
        # --scheduler: the same cluster reached by its address, checkpointing as it goes
        on_scheduler = dse.run_study(study, prepared=p, scheduler=address, checkpoint_dir=tmp_path / "state")
    pd.testing.assert_frame_equal(on_scheduler.evaluations, serial.evaluations)
    pd.testing.assert_frame_equal(on_scheduler.pareto, serial.pareto)
    pd.testing.assert_frame_equal(on_scheduler.convergence, serial.convergence)
    reported = [c for c in on_engine.metrics.columns if c in serial.evaluations]    # no Monte Carlo columns
    pd.testing.assert_frame_equal(on_engine.metrics[reported], serial.evaluations[reported])
    np.testing.assert_array_equal(on_engine.pareto_index, np.flatnonzero(serial.evaluations["pareto"]))


def test_unreachable_scheduler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("dse.search.distributed.CONNECT_TIMEOUT", "0.5s")
    study = dse.load_study("tests/data/tiny.yaml")
    with pytest.raises(dse.StudyError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with evaluation_engine(dse.prepare(study).evaluator, scheduler="tcp://127.0.0.1:9"):
            pass
