"""Issue 55 #5, the second study: studies/moe_heterogeneous_accelerators_training.yaml TRAINS a mixture of
experts on packages mixing GPU-like, SRAM-resident and systolic chiplets, and the report says which kind each
expert lands on and why, as the serving study's does (dse.results.expert_kinds), with training's bytes: each
expert's weights, gradients and optimizer state (dse.training.memory.state_bytes_per_param)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from moe_helpers import KINDS, experts_of, two_lpu_design

import dse
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
    experts, kinds = experts_of(prepared), KINDS
    assert len(experts) == 64
    design = two_lpu_design(prepared, ddr_channels=8)
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
    served = Design(**{**design.to_dict(), "ddr_channels": 0})
    served_rows = _rows(expert_kind_lines(SimpleNamespace(designs={"d0": served}), serving, "d0", "hand-made"))
    e = experts[-1]
    assert float(rows[e][4].replace(",", "")) == pytest.approx(9 * float(served_rows[e][4].replace(",", "")),
                                                               rel=1e-3)
