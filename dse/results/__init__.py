"""Results: running a study to a `StudyResult`, the results folder, plots, the report, the knee design
and what-if re-evaluation."""
from .folder import load_results, read_design, write_results
from .result import StudyResult
from .run import resume_study, run_study

__all__ = ["StudyResult", "run_study", "resume_study", "write_results", "load_results", "read_design"]
