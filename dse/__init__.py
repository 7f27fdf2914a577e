"""Chiplet DSE: studies, design space, evaluation, search and results.

Typical use in Python::

    import dse
    study = dse.load_study("studies/quickstart.yaml")
    result = study.run()            # or dse.run_study(study)
    result.pareto                   # pandas DataFrame of the non-dominated designs
    result.plot_front(); result.plot_floorplan(result.knee()["design_id"])
    result = dse.load_results("results/quickstart")   # a results folder read back
"""
from .jit_cache import key_cache_by_sources

key_cache_by_sources()          # before any kernel is compiled: numba's cache keyed by every source file
from .errors import StudyError  # noqa: E402
from .model.characterize import characterize
from .model.evaluator import Evaluator
from .results.folder import load_results, read_design, write_results
from .results.result import StudyResult
from .results.run import run_study
from .results.whatif import changed_study
from .study.space import Design
from .study.spec import Study, load_study
from .system import SYSTEM_METRICS as METRICS
from .system import prepare
from . import training  # noqa: F401  (registers workload.phase: train with prepare)
from .serving import package as _serving  # noqa: F401  (registers workload.phase: serve with prepare)
from . import rl  # noqa: F401  (registers the Gymnasium environments dse/ChipletMapping-v0, dse/TrainingPartition-v0)


def _run(self: Study, seed: int | None = None) -> StudyResult:
    """Run this study's search (see `dse.run_study`)."""
    return run_study(self, seed=seed)


def _characterize(self: Study):
    """Every placement unit alone on every chiplet kind of this study (dse.model.characterize), a
    pandas DataFrame."""
    return characterize(prepare(self))


Study.run = _run
Study.characterize = _characterize

__all__ = ["Study", "StudyError", "StudyResult", "Design", "Evaluator", "METRICS", "load_study", "prepare",
           "run_study", "changed_study", "write_results", "load_results", "read_design"]
