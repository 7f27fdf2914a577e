"""The model against one measured NVIDIA H200 SXM: GEMMs, attention, whole Llama-2-7B steps, power.

Measured by the project (data/h200_*.csv, copied from shared/reference/h200 with its README's method:
CUDA-graph replays timed with CUDA events, no host dispatch; power from NVML's energy counter, the median
SM clock). The GPU is described as a user would: one ``h200-like`` chiplet (the H100's die, 700 W power
limit, 122 W idle) with 6 HBM3e stacks at 6.25 Gb/s per pin (4.8 TB/s, the datasheet figure).

- ``steps``: a whole Llama-2-7B prefill (``batch`` prompts of ``context`` tokens) or decode step on one
  GPU, the step model's latency (dse.validation.gpu's case, fused attention: cuDNN's flash kernel);
  ``power``: that step's energy over its latency, where the power was measured.
- ``moe-step``: a whole OLMoE-1B-7B prefill (one prompt of 512 or 2,048 tokens, data/h200_steps_olmoe_prefill.csv)
  by the same harness, its routing forced balanced and its experts run as two ``torch.bmm`` a layer over a
  common padded count, combined by a weighted sum (``moe_form: sum``) or by ``index_add_``
  (``moe_form: index_add``): the step model's latency with that ``moe_form`` (workloads.layers: routing,
  gather, padding, batched experts, combine). Nothing is fitted on them: the kernel overhead, bandwidths
  and the L2 bandwidth the atomics run at are the ones above and the preset's.
- ``gemm``: one cuBLAS GEMM (Llama-3-8B projections, M = 1-8,192 tokens) in bf16 and fp8, the calibration
  model of arch.calibrate (`predict_us`: tiles, waves, split-K, roofline, kernel overhead) at the memory's
  sustained bandwidth, as the step model reads it (4.8 TB/s peak -> 4.20 TB/s, memory.effective_bandwidth_Bps).
  Kernels timed back to back for well under the power-limit window: the full clock, no throttling.
- ``attention``: one fused GQA attention kernel (32 query and 8 KV heads of 128), prefill (causal) and
  decode, the step model's own kernel (dse.model.tables: FlashAttention's blocks, arch.gpu.flash_attention)
  on the same GPU, its KV and activations read at 4.20 TB/s x ``mem_efficiency`` as the GEMM rows and steps.

What was fitted (set ``calibration``): the h200-like preset's ``max_efficiency``, ``mem_efficiency`` and
``kernel_overhead_us`` on the bf16 GEMMs of M = 1, 512 and 2,048 (`GEMM_CALIBRATION_M`, `dse calibrate`); its
``attention_overhead_us`` on the four batch-1 attention kernels under 20 us (`ATTENTION_CALIBRATION`);
the GH100 presets' ``overrides.mac_energy_pj`` (5.36 x the 5 nm node's: the tensor cores' switching energy
per MAC, h100-like and h200-like alike) on the Llama-2-7B prefill of 8,192 tokens, through the clock its
700 W limit leaves, jointly with the node's ``active_pj_per_mm2_cycle`` on ML.ENERGY's calibration run
(dse.validation.energy.calibrate); the ``pytorch-graphs`` stack's ``kernel_overhead_us`` (3.38 us a kernel
of plain PyTorch's 24 a layer: ``elementwise: unfused``) on the decode of one sequence at 1,024 tokens
(`CALIBRATION`); the stack's ``split_kv: gqa`` (PyTorch's attention splits a decode's keys only for
grouped-query heads) and its unfused elementwise kernels reading and writing through memory are not
fitted. Power limit and idle power are the datasheet's and the measured idle; every other row is a check
(``validation``).

``python -m dse.validation.h200 [--write docs/validation.md]`` prints (and writes) the tables;
``dse fidelity --suite h200`` prints its cases (`cases`).
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from . import gpu
from .common import DATA, Case, summary_lines, write_command

TITLE = "one measured H200: GEMMs, attention, Llama-2-7B steps and power"
SOURCE = "h200-measured"
#: the markdown file ``--write`` fills, and the markers its tables stand between
DOC, MARKERS = Path("docs/validation.md"), ("<!-- h200 table -->", "<!-- /h200 table -->")
#: H200 SXM: dse.validation.gpu's ``h200`` (6 HBM3e stacks at 6.25 Gb/s per pin, 4.8 TB/s)
GPU = gpu.GPUS["h200"]
#: the sustained bandwidth (memory.effective_bandwidth_Bps, streaming) the GEMM and attention rows read at,
#: the step model's: ``mem_efficiency`` is a fraction of it everywhere
BANDWIDTH_BPS = gpu.sustained_bandwidth_Bps(GPU["chiplet"])
#: rows whose measurement chose a parameter (docs/validation.md): the step the MAC energy was fitted on
CALIBRATION = {"step-prefill-b1-c8192", "step-decode-b1-c1024"}
#: GEMM rows (bf16) the h200-like preset's run-time parameters were fitted on
GEMM_CALIBRATION_M = (1, 512, 2048)
#: the software of the measured steps (dse.validation.gpu.STACKS)
STACK = "pytorch-graphs"
#: attention rows the h200-like preset's ``attention_overhead_us`` was fitted on (`fit_attention_overhead_us`):
#: the four batch-1 kernels under 20 us, whose time is the kernel's floor; the eight others are checks
ATTENTION_CALIBRATION = {"attn-prefill-b1-c128", "attn-prefill-b1-c512", "attn-decode-b1-c1024",
                         "attn-decode-b1-c4096"}


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / f"h200_{name}.csv", comment="#")


def step_case(row) -> dict:
    """A row of h200_steps_llama2_7b.csv as a dse.validation.gpu case."""
    return {"id": f"step-{row.phase}-b{row.batch}-c{row.context}", "model": "llama-2-7b", "gpu": "h200", "gpus": 1,
            "phase": row.phase, "batch": int(row.batch), "context": int(row.context), "precision": "bf16",
            "attention": "fused", "elementwise": "unfused", "stack": STACK}


def moe_step_case(row) -> dict:
    """A row of h200_steps_olmoe_prefill.csv (prefill of one prompt) as a dse.validation.gpu case (its ``moe_form``)."""
    return {"id": f"olmoe-c{row.context}-{row.moe_form}", "model": "olmoe-1b-7b",
            "gpu": "h200", "gpus": 1, "phase": row.phase, "batch": int(row.batch), "context": int(row.context),
            "precision": "bf16", "attention": "fused", "elementwise": "unfused", "stack": STACK,
            "moe_form": row.moe_form}


def step_figures(case: dict) -> tuple[float, float]:
    """(latency s, average power W) of the case's step: the evaluator's latency, its energy over it."""
    from ..system.prepare import prepare

    prepared = prepare(gpu.case_study(case))
    m = prepared.evaluator.evaluate_designs([gpu.case_design(case, prepared)], with_faults=False).iloc[0]
    latency = float(m["latency_s"])
    return latency, float(m["energy_j_per_token"]) * prepared.tables.tokens_per_step / latency


def gemm_rows() -> pd.DataFrame:
    """The bf16 and fp8 GEMM sweeps, one frame (``kind`` gemm-bf16 / gemm-fp8)."""
    return pd.concat([_csv("gemm_bf16").assign(kind="gemm-bf16"), _csv("gemm_fp8").assign(kind="gemm-fp8")],
                     ignore_index=True)


def gemm_modelled_us(rows: pd.DataFrame, chiplet=None) -> np.ndarray:
    """arch.calibrate's model of each GEMM on the h200-like chiplet (or ``chiplet``) at `BANDWIDTH_BPS`, in us."""
    import arch
    from arch.calibrate import predict_us

    return predict_us(chiplet or arch.preset("h200-like"), rows.reset_index(drop=True), BANDWIDTH_BPS)


def attention_modelled_us(row) -> float:
    """The step model's fused attention kernel of a Llama-3-8B layer (32 / 8 heads of 128) for the row."""
    from arch.roofline import kernel_time_s

    from ..model.tables import build_tables

    case = {"id": "attention", "model": "llama-3-8b", "gpu": "h200", "gpus": 1, "phase": row.phase,
            "batch": int(row.batch), "context": int(row.context), "precision": "bf16", "attention": "fused"}
    study = gpu.case_study(case)
    t = build_tables(study)
    ch = study.hardware.library()[0]
    u = next(i for i, name in enumerate(t.unit_names) if name.endswith(".attn"))
    names = t.workload.ops.query(f"unit == '{t.unit_names[u]}'")["name"].tolist()
    kernel = int(t.op_ptr[u]) + _kernel_index(names)
    moved = t.op_weight_bytes[kernel] + t.op_other_bytes[kernel, 0]
    bandwidth = BANDWIDTH_BPS * ch.mem_efficiency            # as the GEMM rows and the step model
    return 1e6 * kernel_time_s(t.op_time_s[kernel, 0], moved / bandwidth, t.op_inv_steps[kernel, 0],
                               ch.kernel_overhead_s, 0.0)


def fit_attention_overhead_us() -> float:
    """The h200-like ``attention_overhead_us`` that minimises the squared log error of the
    `ATTENTION_CALIBRATION` rows (scipy's bounded scalar minimisation on 0-50 us)."""
    from scipy.optimize import minimize_scalar

    rows = [r for r in _csv("attention_bf16").itertuples()
            if f"attn-{r.phase}-b{r.batch}-c{r.context}" in ATTENTION_CALIBRATION]
    saved = gpu.STACKS["graphs"].get("h200")

    def cost(us: float) -> float:
        gpu.STACKS["graphs"]["h200"] = {**(saved or {}), "attention_overhead_us": us}
        return sum(np.log(attention_modelled_us(r) / r.measured_us) ** 2 for r in rows)
    try:
        return float(minimize_scalar(cost, bounds=(0.0, 50.0), method="bounded", options={"xatol": 0.01}).x)
    finally:
        if saved is None:
            gpu.STACKS["graphs"].pop("h200", None)
        else:
            gpu.STACKS["graphs"]["h200"] = saved


def _kernel_index(names: list[str]) -> int:
    """Index, among a fused-attention unit's kernels, of the one that starts at attn_score."""
    k = -1
    for i, name in enumerate(names):
        if not (i and name in ("softmax", "attn_context") and names[i - 1] in ("attn_score", "softmax")):
            k += 1
        if name == "attn_score":
            return k
    raise ValueError("no attn_score operator")


def _set(row: dict) -> str:
    fitted = (row["id"] in CALIBRATION if row["figure"] == "step" else
              row["id"] in ATTENTION_CALIBRATION if row["figure"] == "attention" else
              row["figure"] == "gemm-bf16" and row["m"] in GEMM_CALIBRATION_M)
    return "calibration" if fitted else "validation"


@lru_cache(maxsize=1)
def table() -> tuple[dict, ...]:
    """Every case as a dict: id, figure, unit, measured, modelled, ratio, set."""
    rows = []
    for r in _csv("steps_llama2_7b").itertuples():
        case = step_case(r)
        latency, power = step_figures(case)
        rows.append(dict(id=case["id"], figure="step", unit="ms", measured=float(r.step_ms), modelled=latency * 1e3))
        if not pd.isna(r.power_w):
            rows.append(dict(id=case["id"], figure="power", unit="W", measured=float(r.power_w), modelled=power))
    for r in _csv("steps_olmoe_prefill").itertuples():
        case = moe_step_case(r)
        rows.append(dict(id=case["id"], figure="moe-step", unit="ms", measured=float(r.step_ms),
                         modelled=step_figures(case)[0] * 1e3))
    g = gemm_rows()
    for r, model in zip(g.itertuples(), gemm_modelled_us(g)):
        rows.append(dict(id=f"{r.op}-{r.precision}-m{r.M}", figure=r.kind, unit="us", measured=float(r.measured_us),
                         modelled=float(model), m=int(r.M)))
    for r in _csv("attention_bf16").itertuples():
        rows.append(dict(id=f"attn-{r.phase}-b{r.batch}-c{r.context}", figure="attention", unit="us",
                         measured=float(r.measured_us), modelled=attention_modelled_us(r)))
    return tuple({**r, "ratio": r["modelled"] / r["measured"], "set": _set(r)} for r in rows)


def cases() -> list[Case]:
    """Every figure as a `Case` (metric: step, power, moe-step, gemm-bf16, gemm-fp8, attention)."""
    return [Case(r["id"], r["figure"], r["unit"], r["measured"], r["modelled"], r["set"], SOURCE) for r in table()]


def errors() -> dict[str, dict[str, float]]:
    """Geometric-mean error per figure and set: {figure: {set: error}}."""
    from .common import errors_by_set

    by_figure: dict[str, list[Case]] = {}
    for c in cases():
        by_figure.setdefault(c.metric, []).append(c)
    return {figure: errors_by_set(part) for figure, part in by_figure.items()}


def markdown(rows) -> str:
    out = []
    for figure in dict.fromkeys(r["figure"] for r in rows):
        part = [r for r in rows if r["figure"] == figure]
        unit = part[0]["unit"]
        out += [f"**{figure}** ({unit})", "", f"| id | set | measured {unit} | modelled {unit} | ratio |",
                "|---|---|---|---|---|"]
        out += [f"| {r['id']} | {r['set']} | {r['measured']:.4g} | {r['modelled']:.4g} | {r['ratio']:.3f} |"
                for r in part]
        out += [""] + summary_lines(part) + [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()), DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
