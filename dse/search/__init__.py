"""The search: pymoo algorithms over the study's integer genes, gene operators, the search loop with its
hypervolume convergence, checkpoints to resume from, and evaluation on a Dask cluster."""
from .loop import GenerationReport, SearchOutcome, run_search

__all__ = ["run_search", "GenerationReport", "SearchOutcome"]
