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
from .model.characterize import characterize as characterize_prepared
from .model.contract import PopulationEvaluator
from .model.evaluator import Evaluator
from .model.phases import register_phase
from .results.folder import load_results, read_design, write_results
from .results.result import StudyResult
from .results.run import run_study
from .results.whatif import changed_study
from .model.study_quality import with_quality
from .runtime.search import with_runtime
from .serving import package as serving_package
from .study import spec
from .study.space import Design
from .system import SYSTEM_METRICS as METRICS
from .system import prepare
from .system.prepare import register_wrapper
from .training import package as training_package
from . import rl  # noqa: F401  (its import registers the Gymnasium environments dse/ChipletMapping-v0, dse/TrainingPartition-v0)

register_phase(serving_package.PHASE)       # workload.phase: serve
register_phase(training_package.PHASE)      # workload.phase: train
register_wrapper(with_quality)              # quality_frac per design (dse.model.study_quality), before runtime's
register_wrapper(with_runtime)              # a study's runtime section (dse.runtime.search)


class Study(spec.Study):
    """A study (dse.study.spec.Study) with the facade's verbs: ``study.run()``, ``study.characterize()``."""

    def run(self, seed: int | None = None) -> StudyResult:
        """Run this study's search (see `dse.run_study`)."""
        return run_study(self, seed=seed)

    def characterize(self):
        """Every placement unit alone on every chiplet kind of this study (dse.model.characterize), a
        pandas DataFrame."""
        return characterize_prepared(prepare(self))


def load_study(path) -> Study:
    """Read and validate a study file (dse.study.spec.load_study) as a `Study` with the facade's verbs."""
    return Study.load(path)


def characterize(study: spec.Study):
    """Every placement unit alone on every chiplet kind of ``study``, a pandas DataFrame."""
    return characterize_prepared(prepare(study))


__all__ = ["Study", "StudyError", "StudyResult", "Design", "Evaluator", "METRICS", "PopulationEvaluator",
           "load_study", "prepare", "run_study", "write_results", "load_results", "read_design", "changed_study",
           "characterize"]
