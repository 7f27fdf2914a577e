"""Helpers of the mixed-accelerator MoE studies' tests (studies/moe_heterogeneous_accelerators*.yaml): the
hand-made 2 x 2 design whose report section says where each expert lands."""
from __future__ import annotations

from dse.model.tables import UNIT_KINDS
from dse.study.space import Design

#: an H100-like and a TPU v6e-like with HBM, two Groq LPU-likes with none
KINDS = ["h100-like", "groq-lpu-like", "tpu-v6e-like", "groq-lpu-like"]


def experts_of(prepared) -> list[str]:
    """The routed experts' unit names of a prepared study, in unit order."""
    t = prepared.tables
    return [u for u, k in zip(t.unit_names, t.unit_kind) if k == UNIT_KINDS.index("expert")]


def two_lpu_design(prepared, ddr_channels: int) -> Design:
    """`KINDS` on a 2 x 2 mesh, 4 HBM stacks on each HBM chiplet: the last two experts one on each LPU (their
    SRAM holds one expert of 201 MB each), the other experts alternating over the H100-like and the TPU
    v6e-like, the rest of the model on the H100-like."""
    experts = experts_of(prepared)
    placement = {u: [0] for u in prepared.tables.unit_names}
    for i, u in enumerate(experts[:-2]):
        placement[u] = [2 * (i % 2)]
    placement[experts[-2]], placement[experts[-1]] = [1], [3]
    return Design(rows=2, cols=2, chiplets=list(KINDS), hbm_stacks=[4, 0, 4, 0], ddr_channels=ddr_channels,
                  link="ucie-advanced", mapping="many-to-many", placement=placement)
