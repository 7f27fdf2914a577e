"""Issue 55 #5: studies/moe_heterogeneous_accelerators.yaml serves an MoE on packages mixing GPU-like,
SRAM-resident and systolic chiplets, and the report says which kind each expert lands on and why (visit
rate, bytes, FLOPs per byte against each kind's ridge point: dse.results.expert_kinds)."""
from __future__ import annotations

from types import SimpleNamespace

from moe_helpers import KINDS, experts_of, two_lpu_design

import dse
from dse.results.expert_kinds import expert_kind_lines
from dse.results.verdict import design_verdict
from dse.study.space import Design

STUDY = "studies/moe_heterogeneous_accelerators.yaml"


def test_the_report_shows_where_each_expert_lands_and_why():
    study = dse.load_study(STUDY)
    prepared = dse.prepare(study)
    experts, kinds = experts_of(prepared), KINDS
    assert len(experts) == 64
    design = two_lpu_design(prepared, ddr_channels=0)       # the LPUs' SRAM holds one expert each
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    assert design_verdict(metrics, study).feasible, design_verdict(metrics, study).reasons
    lines = expert_kind_lines(SimpleNamespace(designs={"d0": design}), prepared, "d0", "hand-made")
    text = "\n".join(lines)
    assert lines[0].startswith("## Where the experts land") and all(k in text for k in set(kinds))
    rows = [line for line in lines if line.startswith("| ") and "/" not in line.split("|")[1]]
    on_lpu = [r for r in rows if r.split("|")[2].strip() == "groq-lpu-like"]
    assert len(on_lpu) == 2 and all(float(r.split("|")[4].replace(",", "")) < 230 for r in on_lpu)
    # each kind's ridge point: the LPU's 188 TFLOP/s over 80 TB/s of SRAM is far below the HBM kinds'
    ridge = {r.split("|")[1].strip(): float(r.split("|")[4].replace(",", "")) for r in lines
             if r.startswith("| ") and r.split("|")[1].strip() in kinds}
    assert ridge["groq-lpu-like"] < 10 < ridge["h100-like"]
    # a design whose LPU holds more than its SRAM (three experts, 603 MB) with no DDR is refused
    placement = {**design.placement, experts[0]: [1], experts[1]: [1]}
    over = Design(**{**design.to_dict(), "placement": placement})
    verdict = design_verdict(prepared.evaluator.evaluate_designs([over]).iloc[0], study)
    assert not verdict.feasible and "capacity short" in verdict.reasons[0]


def test_no_hbm_stack_lands_on_a_kind_without_an_hbm_interface():
    """groq-lpu-like has no HBM PHY (hbm_phy false): the search spreads a design's stacks over the slots whose
    kind has one, so an LPU slot never reads from HBM (before: every slot got H // N, the LPU's included),
    and a design file giving an LPU slot a stack is one error naming hbm_stacks."""
    import numpy as np
    import pytest

    from dse.errors import StudyError
    from dse.model.placement import spread_stacks
    prepared = dse.prepare(dse.load_study(STUDY))
    t, space = prepared.tables, prepared.space
    lpu, h100 = t.kind_names.index("groq-lpu-like"), t.kind_names.index("h100-like")
    assert not t.kind_hbm_phy[lpu] and t.kind_hbm_phy[h100]
    x = np.array(space.lower, dtype=np.int64)
    sl = space.slices
    x[sl["rows"].start], x[sl["cols"].start], x[sl["hbm"].start] = 2, 2, 3
    x[sl["kind"]] = [h100, lpu, h100, lpu] + [h100] * (sl["kind"].stop - sl["kind"].start - 4)
    stacks = prepared.evaluator.decode(x[None, :]).stacks[0, :4]
    assert list(stacks) == [2, 0, 1, 0] == spread_stacks(3, [h100, lpu, h100, lpu], t.kind_hbm_phy)
    assert spread_stacks(4, [lpu] * 4, t.kind_hbm_phy) == [0, 0, 0, 0]
    assert spread_stacks(5, [h100] * 4, t.kind_hbm_phy) == [5 // 4 + (i < 5 % 4) for i in range(4)]   # as before
    units = list(t.unit_names)
    bad = Design(rows=2, cols=2, chiplets=["h100-like", "groq-lpu-like", "h100-like", "h100-like"],
                 hbm_stacks=[1, 1, 1, 1], ddr_channels=0, link="ucie-advanced", mapping="many-to-many",
                 placement={u: [0] for u in units})
    with pytest.raises(StudyError, match="no HBM interface"):
        prepared.check_design(bad)
