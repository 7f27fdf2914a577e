"""What each kernel of the measured OLMoE-1B-7B prefill steps costs in the step model (issue 53, item 3).

For the h200 suite's ``moe-step`` cases (dse.validation.h200.moe_step_case), every kernel of the step as
the model costs it on the h200-like chiplet at the full clock (arch.roofline.kernel_time_s: its compute and
its bytes at the memory's sustained bandwidth x ``mem_efficiency``, plus the stack's time per kernel), times
the layers it runs in, in ms per step; the routed experts' kernels without the per-kernel time, which they
pay once per operator and layer (dse.model.grouped: ``expert launches``). The step's latency also stretches
the compute-bound kernels to the clock the 700 W limit leaves (arch.power.sustained_clock): the difference
between the step and the sum of the kernels.

``python tools/moe_step_kernels.py`` prints a markdown table (docs/workloads.md, *MoE forms*).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from arch.roofline import kernel_time_s
from dse.model.tables import UNIT_KINDS, build_tables, first_rows, kernels_of
from dse.validation import gpu, h200

#: the kernels around the experts, in the order a layer runs them (workloads.layers._batched_moe)
MOE_KERNELS = ("router", "router_softmax", "router_topk", "router_cast", "expert_gather", "expert_pad",
               "expert_pad_copy", "expert:gate_up_proj", "expert:activation_silu", "expert:activation",
               "expert:down_proj", "expert launches", "expert_unpad", "moe_weight", "moe_sum", "moe_zero",
               "moe_index_add", "moe_residual")


def kernel_ms(context: int, form: str) -> tuple[float, dict[str, float]]:
    """(step latency ms, {kernel: ms per step at the full clock}) of one measured OLMoE prefill case."""
    case = h200.moe_step_case(pd.Series(dict(context=context, moe_form=form, phase="prefill", batch=1)))
    study = gpu.case_study(case)
    t = build_tables(study)
    ch = study.hardware.library()[0]
    ops = t.workload.ops
    unit = ops["unit"].map({u: i for i, u in enumerate(t.unit_names)}).to_numpy()
    order = np.argsort(unit, kind="stable")
    kernel = kernels_of(ops["name"].to_numpy()[order], unit[order], study.workload.attention == "fused")
    names = ops["name"].to_numpy()[order][first_rows(kernel)]
    bandwidth = h200.BANDWIDTH_BPS * ch.mem_efficiency
    out: dict[str, float] = {}
    launches: dict[int, int] = {}
    for u in range(len(t.unit_names)):
        s = t.unit_stage[u]
        expert = t.unit_kind[u] == UNIT_KINDS.index("expert")
        for i in range(t.op_ptr[u], t.op_ptr[u + 1]):
            moved = t.op_weight_bytes[i] + t.op_other_bytes[i, 0]
            ti = kernel_time_s(t.op_time_s[i, 0], moved / bandwidth, t.op_inv_steps[i, 0],
                               0.0 if expert else ch.kernel_overhead_s, 0.0)
            key = ("expert:" if expert else "") + names[i]
            out[key] = out.get(key, 0.0) + 1e3 * t.stage_repeat[s] * t.stage_prob[s] * t.op_prob[i] * ti
        if expert:
            launches[s] = max(launches.get(s, 0), int(t.op_ptr[u + 1] - t.op_ptr[u]))
    out["expert launches"] = 1e3 * sum(t.stage_repeat[s] * n * ch.kernel_overhead_s for s, n in launches.items())
    return 1e3 * h200.step_figures(case)[0], out


def table_lines() -> list[str]:
    """The markdown table of docs/workloads.md (*MoE forms*), a line each."""
    cols = [(c, f) for f in ("sum", "index_add") for c in (512, 2048)]
    figures = {col: kernel_ms(*col) for col in cols}
    lines = ["| kernel | " + " | ".join(f"{f} {c} (ms)" for c, f in cols) + " |", "|---|" + "---:|" * len(cols)]
    for name in MOE_KERNELS:
        lines.append(f"| {name} | " + " | ".join(f"{figures[col][1].get(name, 0.0):.3f}" for col in cols) + " |")
    rest = {col: sum(v for k, v in figures[col][1].items() if k not in MOE_KERNELS) for col in cols}
    lines.append("| the rest (norms, attention side, embedding, LM head) | "
                 + " | ".join(f"{rest[col]:.3f}" for col in cols) + " |")
    lines.append("| power-limited clock (step - kernels) | "
                 + " | ".join(f"{figures[col][0] - sum(figures[col][1].values()):.3f}" for col in cols) + " |")
    lines.append("| step | " + " | ".join(f"{figures[col][0]:.3f}" for col in cols) + " |")
    return lines


def main() -> None:
    print("\n".join(table_lines()))


if __name__ == "__main__":
    main()
