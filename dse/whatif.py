"""The what-if API under its earlier name (``from dse.whatif import changed_study`` in notebooks written
before the sub-packages): it lives in dse.results.whatif."""
from .results.whatif import changed_study, evaluate

__all__ = ["changed_study", "evaluate"]
