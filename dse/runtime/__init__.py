"""A design through time (`dse timeline`, docs/runtime.md): a scenario of expert popularity drift, offered
load and failures (scenario.py, popularity.py, failures.py), policies that re-map experts as it unfolds
(policies/: static, periodic, threshold, on-failure), what a move costs (migration.py), and the timeline
itself as a pipeline of values (timeline.py): the planner's segment tables (plan.py, segments.py), one
costing call by the study's own evaluator (costing.py) and one reducer of windows and totals (totals.py)."""
from __future__ import annotations

from .policies import POLICIES, make_policy
from .scenario import Scenario, load_scenario
from .timeline import Timeline, run_timeline

__all__ = ["POLICIES", "Scenario", "Timeline", "load_scenario", "make_policy", "run_timeline"]
