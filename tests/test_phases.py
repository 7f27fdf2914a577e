"""Phases as plug-ins (dse.model.phases): what a registered phase declares is what its evaluator does, and
a phase registered from outside the model layer reaches the objectives and constraints unchanged code
reads."""
import numpy as np
import pandas as pd
import pytest

import dse
from dse.model import phases
from dse.model.contract import PopulationEvaluator
from dse.model.objectives import OBJECTIVES, constraint_matrix, constraint_names
from dse.system.metrics import SYSTEM_METRICS


@pytest.mark.parametrize("name, study_file", [("serve", "studies/serve_llama2_7b.yaml"),
                                              ("train", "studies/train_llama2_7b.yaml")])
def test_a_registered_phase_is_what_its_evaluator_does(name, study_file):
    phase = phases.PHASES[name]
    study = dse.load_study(study_file)
    assert phases.phase_of(study) is phase
    prepared = dse.prepare(study)
    ev = prepared.evaluator
    assert isinstance(ev, PopulationEvaluator) and type(ev) is not type(prepared.system_evaluator)
    assert ev.columns == SYSTEM_METRICS + list(phase.metrics)          # the columns it declares, after the system's
    for objective, (column, _) in phase.objectives.items():
        assert OBJECTIVES[objective][0] == column and column in ev.columns
    names = constraint_names(study)
    assert [c.name for c in phase.constraints] == names[len(names) - len(phase.constraints):]
    metrics = ev(prepared.space.seeds[:2])
    assert list(metrics.columns) == ev.metric_names
    assert constraint_matrix(metrics, study).shape == (2, len(names))


def test_a_phase_registered_outside_the_model_layer_plugs_in(monkeypatch):
    monkeypatch.setattr(phases, "PHASES", dict(phases.PHASES))        # the registry as it was, after the test
    from dse.model import objectives
    monkeypatch.setattr(objectives, "PHASES", phases.PHASES)
    quickstart = dse.load_study("studies/quickstart.yaml")
    phases.register_phase(phases.Phase(
        name=quickstart.workload.phase, objectives={"toy_latency": ("latency_s", 1.0)},
        constraints=(phases.PhaseConstraint("latency_over_1s", lambda m, s: m["latency_s"].to_numpy() - 1.0),)))
    assert OBJECTIVES["toy_latency"] == ("latency_s", 1.0) and "toy_latency" in list(OBJECTIVES)
    assert constraint_names(quickstart)[-1] == "latency_over_1s"
    metrics = pd.DataFrame({"capacity_short_bytes": [0.0, 0.0], "unplaced_experts": [0, 0],
                            "units_without_memory": [0, 0],
                            "max_die_mm2": [100.0, 100.0], "area_mm2": [1.0, 1.0], "peak_power_w": [1.0, 1.0],
                            "cost_usd": [1.0, 1.0], "latency_s": [0.5, 3.0]})
    np.testing.assert_allclose(constraint_matrix(metrics, quickstart)[:, -1], [-0.5, 2.0])
    assert phases.step_phase(quickstart.workload.phase) == quickstart.workload.phase   # no step phase of its own
    assert phases.step_phase("serve") == "decode"
