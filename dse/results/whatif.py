"""What-if re-evaluation: the metrics of one design under its study, or under the study with some keys
changed (a larger batch, another link technology, a longer context ...).

Changes are dotted study keys (``{"workload.batch": 32}``; in keyword form ``workload__batch=32``).
The changed study is validated like a study file, so a bad key or value is a `StudyError` naming it.
The design itself is changed with ``dataclasses.replace(design, ddr_channels=8)``.
"""
from __future__ import annotations

import copy

import pandas as pd

from ..errors import StudyError
from ..study.space import Design
from ..study.spec import Study
from ..system.metrics import reported_metrics
from ..system.prepare import prepare


def changed_study(study: Study, changes: dict) -> Study:
    """A copy of ``study`` with dotted keys set to new values, validated."""
    data = copy.deepcopy(study.resolved())
    for key, value in changes.items():
        key = key.replace("__", ".")
        parts = key.split(".")
        node = data
        for part in parts[:-1]:
            if not isinstance(node, dict) or part not in node:
                raise StudyError(f"no such study key; top-level keys: {', '.join(data)}", key=key)
            node = node[part]
        if not isinstance(node, dict):
            raise StudyError("this key does not hold a mapping", key=key)
        node[parts[-1]] = value
    return type(study).from_dict(data, source="changed study")


def evaluate(design: Design, study: Study, changes: dict | None = None, prepared=None,
             with_faults: bool = True) -> pd.Series:
    """Metrics of ``design`` (dse.system.metrics.reported_metrics) under ``study`` with ``changes`` applied."""
    if changes:
        study = changed_study(study, changes)
        prepared = None
    p = prepared or prepare(study)
    p.check_design(design, in_space=False)       # a changed design may leave the study's ranges
    metrics = p.evaluator.evaluate_designs([design], with_faults=with_faults).iloc[0]
    return metrics[reported_metrics(study, metrics.index)]
