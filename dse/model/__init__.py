"""What a design costs: the study's mapping-independent tables, the decoding of genes into packages and
mappings, the Numba step model with its failures and routes, traffic, per-chiplet breakdowns, heuristic
starting mappings and the objectives and constraints the search optimises. `prepare` turns a `Study`
into a `Prepared` study whose evaluator scores whole populations of designs. The evaluator contract every
evaluator keeps is `PopulationEvaluator` (contract.py); phases plug in through `register_phase` (phases.py)."""
from .contract import DecodedDesigns, PopulationEvaluator
from .evaluator import Evaluator
from .metrics import METRICS
from .objectives import OBJECTIVE_COLUMNS, OBJECTIVES
from .phases import Phase, PhaseConstraint, register_phase
from .prepare import Prepared, prepare
from .tables import EvalTables, build_tables

__all__ = ["DecodedDesigns", "PopulationEvaluator", "Phase", "PhaseConstraint", "register_phase", "Evaluator", "METRICS", "OBJECTIVES", "OBJECTIVE_COLUMNS", "Prepared", "prepare", "EvalTables",
           "build_tables"]
