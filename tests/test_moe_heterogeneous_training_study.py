"""Issue 55 #5, the second study: studies/moe_heterogeneous_accelerators_training.yaml TRAINS a mixture of
experts on packages mixing GPU-like, SRAM-resident and systolic chiplets, and the report says which kind each
expert lands on and why, as the serving study's does (dse.results.expert_kinds), with training's bytes: each
expert's weights, gradients and optimizer state (dse.training.memory.state_bytes_per_param)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import dse
from dse.model.tables import UNIT_KINDS
from dse.results.expert_kinds import expert_kind_lines
from dse.results.verdict import design_verdict
from dse.study.space import Design

STUDY = "studies/moe_heterogeneous_accelerators_training.yaml"
SERVING = "studies/moe_heterogeneous_accelerators.yaml"


def _rows(lines):
    return {r.split("|")[1].strip(): r.split("|") for r in lines if r.startswith("| L")}


def test_the_training_report_shows_where_each_expert_lands_with_training_bytes():
    study = dse.load_study(STUDY)
    assert study.workload.phase == "train" and study.system is None       # one package: the section applies
    assert {c.name for c in study.hardware.library()} == {"h100-like", "groq-lpu-like", "tpu-v6e-like"}
    prepared = dse.prepare(study)
    t = prepared.tables
    units = list(t.unit_names)
    experts = [u for u, k in zip(units, t.unit_kind) if k == UNIT_KINDS.index("expert")]
    assert len(experts) == 64
    kinds = ["h100-like", "groq-lpu-like", "tpu-v6e-like", "groq-lpu-like"]
    placement = {u: [0] for u in units}
    for i, u in enumerate(experts[:-2]):
        placement[u] = [2 * (i % 2)]
    placement[experts[-2]], placement[experts[-1]] = [1], [3]
    design = Design(rows=2, cols=2, chiplets=kinds, hbm_stacks=[4, 0, 4, 0], ddr_channels=8, link="ucie-advanced",
                    mapping="many-to-many", placement=placement)
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    assert design_verdict(metrics, study).feasible, design_verdict(metrics, study).reasons
    assert metrics["iteration_s"] > 0 and 0 < metrics["mfu"] < 1
    lines = expert_kind_lines(SimpleNamespace(designs={"d0": design}), prepared, "d0", "hand-made")
    text = "\n".join(lines)
    assert lines[0].startswith("## Where the experts land") and all(k in text for k in set(kinds))
    assert "optimizer state, 18 bytes a parameter (ZeRO-1" in text
    rows = _rows(lines)
    assert {rows[e][2].strip() for e in experts[-2:]} == {"groq-lpu-like"}
    # training holds 9x an expert's bf16 weights (2 + 4 + 12 bytes a parameter, megatron-core's accounting):
    # against the serving study's section of the same expert on the same kind
    serving = dse.prepare(dse.load_study(SERVING))
    served = Design(rows=2, cols=2, chiplets=kinds, hbm_stacks=[4, 0, 4, 0], ddr_channels=0,
                    link="ucie-advanced", mapping="many-to-many", placement=placement)
    served_rows = _rows(expert_kind_lines(SimpleNamespace(designs={"d0": served}), serving, "d0", "hand-made"))
    e = experts[-1]
    assert float(rows[e][4].replace(",", "")) == pytest.approx(9 * float(served_rows[e][4].replace(",", "")),
                                                               rel=1e-3)
