"""Quality in studies (issue 51): int4 weights and pruned experts move latency, memory and quality in
the directions and by the amounts the models say; the characterize table's quality column."""
import numpy as np
import pytest

import dse
import workloads
from dse import quality
from dse.errors import StudyError
from dse.model.characterize import characterize
from dse.model.study_quality import study_quality
from dse.model.tables import build_workload
from dse.study.space import Design


def _weight_bytes(prepared):
    return float(np.sum(prepared.tables.unit_capacity_bytes))


def test_int4_quarters_weights_cuts_latency_and_costs_the_modelled_quality():
    base = dse.load_study("tests/data/tiny.yaml")
    int4 = dse.changed_study(base, {"workload.precision": "int4"})
    p16, p4 = dse.prepare(base), dse.prepare(int4)
    units = p16.tables.unit_names
    design = Design(rows=2, cols=2, chiplets=["big"] * 4, hbm_stacks=[1] * 4, ddr_channels=1,
                    link="ucie-advanced", mapping="many-to-many", placement={u: [i % 4] for i, u in enumerate(units)})
    lat16 = p16.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
    lat4 = p4.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
    assert lat4 < lat16                                           # decode reads a quarter of the weight bytes
    assert _weight_bytes(p4) == pytest.approx(_weight_bytes(p16) / 4, rel=0.02)
    cfg = workloads.load_model("gpt2")
    expected = 1.0 - quality.weight_law().loss_pct("int4", quality.model_params(cfg)) / 100.0
    assert study_quality(int4).quality_frac == pytest.approx(expected)
    assert study_quality(base).quality_frac == 1.0 > expected


def test_experts_kept_frees_expert_memory_and_costs_the_pruning_law():
    base = dse.Study.from_dict({
        "name": "prune", "workload": {"model": "mixtral-8x7b", "phase": "decode", "batch": 4, "context": 256,
                                      "routing": {"distribution": "zipf", "s": 1.0}},
        "hardware": {"chiplets": [{"name": "c", "kind": "systolic", "array": [64, 64], "dataflow": "ws",
                                   "sram_mb": 8, "freq_ghz": 1.0, "node": "7nm"}],
                     "memory": [{"kind": "hbm3", "stacks": [1, 4]}, {"kind": "ddr5", "channels": [1, 2]}],
                     "package": {"mesh": {"rows": 2, "cols": 2}}},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})
    pruned = dse.changed_study(base, {"mapping.experts_kept": 6})
    full, cut = build_workload(base), build_workload(pruned)
    experts = lambda wl: sum(1 for _, d in wl.graph.nodes(data=True) if d["kind"] == "expert")
    assert experts(cut) * 8 == experts(full) * 6
    assert cut.summary["total_params"] < full.summary["total_params"]
    q = workloads.selection_probabilities(8, 2, "zipf", s=1.0)
    mass = quality.pruned_mass(8, 2, 6, q)
    assert mass < 0.25                                            # least-selected first: less than uniform's
    assert study_quality(pruned).quality_frac == pytest.approx(1.0 - quality.prune_law().loss_frac(mass))
    with pytest.raises(StudyError, match="experts_kept"):
        build_workload(dse.changed_study(base, {"mapping.experts_kept": 1}))       # below top-2


def test_dense_study_refuses_experts_kept():
    study = dse.changed_study(dse.load_study("tests/data/tiny.yaml"), {"mapping.experts_kept": 2})
    with pytest.raises(StudyError, match="dense"):
        build_workload(study)


def test_characterize_quality_column_shares_the_loss_by_active_parameters():
    int4 = dse.changed_study(dse.load_study("tests/data/tiny.yaml"), {"workload.precision": "int4"})
    table = characterize(dse.prepare(int4)).drop_duplicates("unit")
    lost = 1.0 - table["quality_frac"]
    whole = 1.0 - study_quality(int4).quality_frac
    assert (lost >= 0).all() and lost.sum() == pytest.approx(whole)   # the units' shares add up to the model's
    bf16 = characterize(dse.prepare(dse.load_study("tests/data/tiny.yaml")))
    assert (bf16["quality_frac"] == 1.0).all()


def test_min_quality_is_a_constraint_every_design_of_a_study_shares():
    from dse.model.objectives import constraint_matrix, constraint_names
    from dse.results.verdict import design_verdict
    base = dse.changed_study(dse.load_study("tests/data/tiny.yaml"), {"workload.precision": "int4"})
    prepared = dse.prepare(base)
    metrics = prepared.evaluator.evaluate_designs(prepared.evaluator.designs(prepared.space.seeds[:2]))
    kept = study_quality(base).quality_frac
    for floor, feasible in ((kept + 0.01, False), (kept - 0.01, True)):
        study = dse.changed_study(base, {"constraints.min_quality": floor})
        G = constraint_matrix(metrics, study)[:, constraint_names(study).index("quality_short")]
        assert np.allclose(G, floor - kept) and (G <= 0).all() == feasible
    strict = dse.changed_study(base, {"constraints.min_quality": min(kept + 0.01, 1.0)})
    assert "constraints.min_quality" in " ".join(design_verdict(metrics.iloc[0], strict).reasons)
    with pytest.raises(Exception, match="min_quality"):
        dse.changed_study(base, {"constraints.min_quality": 1.5})
