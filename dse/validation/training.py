"""dse train against published training runs: every case of data/training_cases.yaml.

- Megatron-LM (Narayanan et al., SC'21, Table 1): GPT models of 1.7 B to 1 T parameters on 32 to 3,072
  A100s, full recomputation, fp16; the model FLOP/s each GPU achieved. The paper gives tp, pp and the
  GPUs but not the micro-batch or the interleaving: the model takes the fastest that fits
  (`megatron_best`), as the authors tuned theirs, on `dse train`'s ``dgx-a100-80gb``, whose one
  training-software figure (max_efficiency 0.622) was fitted to the rows of 39.1 B and 145.6 B.
- Llama 2 (Touvron et al. 2023, Table 2): GPU hours to pretrain the 7B and 70B on 2.0 T tokens on
  A100-80GB. The layout is not published: the model takes `dse train --search`'s fastest on 512 GPUs
  with selective recomputation, sequence parallelism and ZeRO-1 (`llama_2_gpu_hours`). Nothing fitted.

- Today's stack (`dse train`'s default, ``megatron-core``: fused attention, sequence parallelism,
  overlapped collectives): NVIDIA's NeMo 24.12 performance table on DGX H100 at FP8 (tokens/s per GPU at
  the published layout; the stack's gemm_factor fitted to GPT3-175B on 128 GPUs and Llama-2-70B, the
  other five validate it) and Meta's Llama 3 405B on 8,192 and 16,384 H100s at BF16 (model TFLOP/s per
  GPU; validation) (`nemo_iteration`, `llama_3_tflops`).
- Memory: the peak of one training step of a 1.1 B Llama-shape model on one H200 at micro-batches 1-8,
  of a 4.5 B one, and of the 1.1 B one with unfused (math) attention (our measurements; the ``pytorch``
  stack; validation) (`tinyllama_memory_gib`).

``python -m dse.validation.training [--write docs/validation.md]`` prints (and writes) the table;
``dse fidelity --suite training`` prints its cases (`cases`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import workloads

from ..training import Strategy, iteration, layer_costs, load_system
from ..training.footprint import to_train
from ..training.stacks import FITTED_ON
from ..training.search import fastest
from .common import DATA, Case, read_data, summary_lines, write_command

H100 = "dgx-h100-80gb"
#: Llama 3 405B (Llama 3 paper, Table 3), as 128 layers: 16 stages of 8 (module docstring)
LLAMA_3_405B = {"model_type": "llama", "hidden_size": 16384, "num_hidden_layers": 128, "num_attention_heads": 128,
                "num_key_value_heads": 8, "intermediate_size": 53248, "vocab_size": 128256,
                "max_position_embeddings": 8192}
LLAMA_3_LAYERS = 126
#: the 1.1 B Llama shape of docs/measurements/h200_session/README.md (TinyLlama)
TINYLLAMA = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32,
             "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 2048}
TINYLLAMA_SEQ = 2048

CASES = DATA / "training_cases.yaml"
KORTHIKANTI = DATA / "training_korthikanti.yaml"     # Table 5: the check of sequence parallelism (`table5`)
TITLE = "dse train against published training runs"
SYSTEM = "dgx-a100-80gb"
STACK_2021 = "megatron-2021"      # Megatron-LM as Narayanan et al. ran it: no FlashAttention
#: Megatron-LM's GPT models: vocabulary and positions (Narayanan et al. 2021, section 5)
VOCAB, SEQ = 51200, 2048
#: the markdown file ``--write`` fills by default, and the markers its table stands between
DOC, MARKERS = Path("docs/validation.md"), ("<!-- training table -->", "<!-- /training table -->")


def load_cases() -> list[dict]:
    """The published runs of data/training_cases.yaml."""
    return read_data(CASES.name)["cases"]


def gpt(hidden: int, layers: int, heads: int) -> workloads.ModelConfig:
    """A GPT model of Megatron-LM's Table 1."""
    return workloads.parse_config({"model_type": "gpt2", "n_embd": hidden, "n_layer": layers, "n_head": heads,
                                   "vocab_size": VOCAB, "n_positions": SEQ}, name=f"gpt-{hidden}")


def megatron_best(case: dict, system=None):
    """The fastest `Iteration` that fits at the case's tp, pp and GPUs over micro-batches of 1-8 and every
    interleaving, or None when none fits."""
    system = system or load_system(SYSTEM, stack=STACK_2021)
    cfg = gpt(case["hidden"], case["layers"], case["heads"])
    tp, pp, batch = case["tp"], case["pp"], case["global_batch"]
    dp = case["gpus"] // (tp * pp)
    best = None
    for b in (1, 2, 4, 8):
        if batch % (b * dp):
            continue
        stage = case["layers"] // pp
        for v in ([x for x in range(1, stage + 1) if stage % x == 0] if pp > 1 else [1]):
            s = Strategy(tp=tp, pp=pp, dp=dp, micro_batch=b, global_batch=batch, seq=SEQ, interleave=v,
                         recompute="full", precision="fp16", attention="unfused")
            if v > 1 and s.micro_batches % pp:
                continue
            it = iteration(cfg, system, s)
            if it.fits and (best is None or it.iteration_s < best.iteration_s):
                best = it
    return best


def korthikanti_best(row: dict, mode: str, system=None):
    """The fastest `Iteration` that fits of a Korthikanti et al. Table 5 row (data/training_korthikanti.yaml)
    at its tp, pp, GPUs, batch and micro-batch over every interleaving: ``mode`` "full" (full recomputation,
    tensor-parallel all-reduces) or "selective" (selective recomputation and sequence parallelism); None
    when none fits. The stack is ``megatron-2021`` (Megatron-LM before FlashAttention; not refitted)."""
    system = system or load_system(SYSTEM, stack=STACK_2021)
    cfg = gpt(row["hidden"], row["layers"], row["heads"])
    tp, pp, stage = row["tp"], row["pp"], row["layers"] // row["pp"]
    common = dict(tp=tp, pp=pp, dp=row["gpus"] // (tp * pp), micro_batch=row["micro_batch"],
                  global_batch=row["global_batch"], seq=SEQ, recompute=mode, sequence_parallel=mode == "selective",
                  precision="fp16", attention="unfused")
    costs = layer_costs(cfg, system, Strategy(**common))      # the same for every interleaving
    best = None
    for v in ([x for x in range(1, stage + 1) if stage % x == 0] if pp > 1 else [1]):
        s = Strategy(**common, interleave=v)
        if v > 1 and s.micro_batches % pp:
            continue
        it = iteration(cfg, system, s, costs)
        if it.fits and (best is None or it.iteration_s < best.iteration_s):
            best = it
    return best


def table5() -> list[dict]:
    """Korthikanti et al.'s Table 5 rows with the modelled iteration times (``full_model_s``,
    ``selective_model_s``), their ratios to the measured (model / measured) and the speed-up of
    selective recomputation with sequence parallelism over full recomputation, measured and modelled."""
    system = load_system(SYSTEM, stack=STACK_2021)
    out = []
    for row in read_data(KORTHIKANTI.name)["rows"]:
        full, sel = (korthikanti_best(row, mode, system) for mode in ("full", "selective"))
        out.append({**row, "full_model_s": full.iteration_s, "selective_model_s": sel.iteration_s,
                    "full_ratio": full.iteration_s / row["full_s"],
                    "selective_ratio": sel.iteration_s / row["selective_s"],
                    "speedup": row["full_s"] / row["selective_s"],
                    "speedup_model": full.iteration_s / sel.iteration_s})
    return out


def llama_2_gpu_hours(case: dict, system=None) -> tuple[float, Strategy]:
    """GPU hours to train on the case's tokens with `dse train --search`'s fastest strategy (bf16,
    selective recomputation, sequence parallelism, ZeRO-1), and that strategy."""
    system = system or load_system(SYSTEM)
    base = dict(ep=1, recompute="selective", sequence_parallel=True, zero=1, precision="bf16",
                overlap_grad_reduce=False)
    strategy, it, _ = fastest(workloads.load_model(case["model"]), system, case["gpus"], case["global_batch"],
                              case["seq"], base)
    seconds = to_train(it, strategy, system, float(case["tokens"]))["time_to_train_s"]
    return seconds * case["gpus"] / 3600.0, strategy


def _fastest_fitting(cfg, system, strategies):
    """The fastest `Iteration` among ``strategies`` that fits, or None."""
    best = None
    for s in strategies:
        it = iteration(cfg, system, s)
        if it.fits and (best is None or it.iteration_s < best.iteration_s):
            best = it
    return best


def nemo_iteration(case: dict, system=None):
    """A NeMo row at its published layout on megatron-core: sequence parallelism with tp, the distributed
    optimizer (ZeRO-1) with the gradient reduce overlapped, fused attention; the faster of no and
    selective recomputation that fits."""
    system = system or load_system(H100)
    cfg = (workloads.load_model(case["model"]) if "model" in case
           else workloads.parse_config(dict(case["config"]), name=case["id"]))
    dp = case["gpus"] // (case["tp"] * case["pp"])
    return _fastest_fitting(cfg, system, [
        Strategy(tp=case["tp"], pp=case["pp"], dp=dp, micro_batch=case["micro_batch"],
                 global_batch=case["global_batch"], seq=case["seq"], interleave=case["vp"], recompute=r,
                 sequence_parallel=case["tp"] > 1, zero=1, precision=case["precision"], overlap_grad_reduce=True)
        for r in ("none", "selective", "full")])


def llama_3_tflops(case: dict, system=None) -> float:
    """TFLOP/s per GPU of Llama 3 405B at the case's tp, pp and GPUs (the fastest micro-batch, interleaving and
    recomputation that fit), FLOPs of its 126 layers over the time of 16 stages of 8. Hardware FLOP/s: the
    strategy found recomputes fully, and ``megatron-core``'s bf16 ``gemm_factor`` was fitted on the 8,192-GPU
    row counting the recomputed forward (Meta's figure, 38-43 % MFU, counts model FLOPs: the model's model
    FLOP/s are 0.75 of it until that factor and the strategy are refitted together; docs/validation.md)."""
    system = system or load_system(H100)
    cfg = workloads.parse_config(LLAMA_3_405B, name="llama-3-405b")
    tp, pp = case["tp"], case["pp"]
    dp = case["gpus"] // (tp * pp)
    stage = cfg.layers // pp
    it = _fastest_fitting(cfg, system, [
        Strategy(tp=tp, pp=pp, dp=dp, micro_batch=b, global_batch=case["global_batch"], seq=case["seq"],
                 interleave=v, recompute=r, sequence_parallel=True, zero=1, precision=case["precision"],
                 overlap_grad_reduce=True)
        for b in (1, 2) for v in (x for x in range(1, stage + 1) if stage % x == 0)
        for r in ("none", "selective", "full")
        if (case["global_batch"] // (b * dp)) % pp == 0 or v == 1])
    return it.hardware_tflops_per_device * LLAMA_3_LAYERS / cfg.layers


def tinyllama_memory_gib(micro_batch: int, config: dict | None = None, attention: str = "fused") -> float:
    """Peak memory (GiB) of one training step of the 1.1 B Llama shape (or ``config``'s) on one GPU with
    the ``pytorch`` stack: micro-batch sequences of 2,048 tokens, no recomputation."""
    cfg = workloads.parse_config(dict(config or TINYLLAMA), name="measured-shape")
    s = Strategy(tp=1, pp=1, dp=1, micro_batch=micro_batch, global_batch=micro_batch, seq=TINYLLAMA_SEQ,
                 attention=attention)
    return iteration(cfg, load_system(H100, stack="pytorch"), s).memory_per_device_bytes / 2**30


def fit_stack(name: str = "megatron-core") -> dict:
    """A stack's factors at which its calibration rows' (``FITTED_ON``) geometric-mean ratio is 1 (scipy's
    brentq): ``megatron-core``'s ``fp8_factor`` on its FP8 rows, ``gemm_factor`` on its BF16 rows;
    ``megatron-2021``'s one factor (gemm and fp8 alike, fp16 rows) on its two rows; how the figures in
    dse/training/stacks.py were found."""
    import dataclasses
    import math

    from scipy.optimize import brentq

    from ..training import stacks

    saved = stacks.STACKS[name]
    rows = [c for c in load_cases() if c["id"] in stacks.FITTED_ON[name]]
    fitted = {}
    keys = (("fp8_factor", True), ("gemm_factor", False)) if name == "megatron-core" else (("gemm_factor", None),)
    try:
        for key, fp8 in keys:
            part = [c for c in rows if fp8 is None or (c["precision"] == "fp8") == fp8]
            tied = ("fp8_factor",) if fp8 is None else ()

            def log_ratio(x, part=part, key=key, tied=tied):
                stacks.STACKS[name] = dataclasses.replace(saved, **{**fitted, key: x, **{k: x for k in tied}})
                return sum(math.log(r["ratio"]) for r in table(part)) / len(part)
            fitted[key] = round(brentq(log_ratio, 0.3, 1.5, xtol=1e-4), 3)
            fitted.update({k: fitted[key] for k in tied})
    finally:
        stacks.STACKS[name] = saved
    return fitted


def table(cases: list[dict] | None = None) -> list[dict]:
    """Each case (default: every one) with ``metric``, ``unit``, ``measured``, ``modelled``, ``ratio`` and,
    for Llama 2, the ``strategy`` found."""
    system = load_system(SYSTEM)
    rows = []
    for case in cases or load_cases():
        if case["kind"] == "megatron":
            it = megatron_best(case, load_system(SYSTEM, stack=STACK_2021))
            # Narayanan et al. count the recomputed forward (their eq. 3: 96 B s l h^2, four passes): hardware FLOP/s
            row = {"metric": "hardware FLOP/s per GPU", "unit": "TFLOP/s", "measured": float(case["measured_tflops"]),
                   "modelled": it.hardware_tflops_per_device}
        elif case["kind"] == "nemo":
            it = nemo_iteration(case)
            row = {"metric": "tokens/s per GPU", "unit": "tokens/s", "measured": float(case["measured_tokens_per_s"]),
                   "modelled": it.tokens_per_s / case["gpus"]}
        elif case["kind"] == "llama-3":
            row = {"metric": "hardware FLOP/s per GPU", "unit": "TFLOP/s", "measured": float(case["measured_tflops"]),
                   "modelled": llama_3_tflops(case)}
        elif case["kind"] == "memory":
            row = {"metric": "peak memory", "unit": "GiB", "measured": float(case["measured_gib"]),
                   "modelled": tinyllama_memory_gib(case["micro_batch"], case.get("config"),
                                                    case.get("attention", "fused"))}
        else:
            hours, s = llama_2_gpu_hours(case, system)
            row = {"metric": "GPU hours to train", "unit": "GPU h", "measured": float(case["measured_gpu_hours"]),
                   "modelled": hours, "strategy": f"tp {s.tp}, pp {s.pp}, dp {s.dp}, micro-batch {s.micro_batch}"}
        rows.append({**case, **row, "ratio": row["modelled"] / row["measured"]})
    return rows


def cases() -> list[Case]:
    """Every case as a `Case`."""
    return [Case(r["id"], r["metric"], r["unit"], r["measured"], r["modelled"], r["set"], r["source"])
            for r in table()]


def markdown(rows: list[dict]) -> str:
    """The suite's tables, one per source, and the error of each set and of each stack's rows."""
    by = {kind: [r for r in rows if r["kind"] == kind] for kind in ("megatron", "llama-2", "nemo", "llama-3", "memory")}
    lines = ["Megatron-LM, Narayanan et al. SC'21 Table 1 (FLOP/s per A100, the recomputed forward counted: "
             "hardware FLOP/s; stack megatron-2021):", "",
             "| id | set | parameters B | tp | pp | GPUs | batch | measured TFLOP/s | modelled TFLOP/s | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['params_b']} | {r['tp']} | {r['pp']} | {r['gpus']} | "
              f"{r['global_batch']} | {r['measured']:.4g} | {r['modelled']:.4g} | {r['ratio']:.2f} |"
              for r in by["megatron"]]
    lines += ["", "Llama 2, Touvron et al. 2023 Table 2 (GPU hours to pretrain on 2.0 T tokens, A100-80GB; "
              "stack megatron-core):", "",
              "| id | set | GPUs | measured GPU h | modelled GPU h | ratio | fastest strategy found |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['gpus']} | {r['measured']:,.0f} | {r['modelled']:,.0f} | "
              f"{r['ratio']:.2f} | {r['strategy']} |" for r in by["llama-2"]]
    lines += ["", "NeMo 24.12 on DGX H100, FP8 (tokens/s per GPU; stack megatron-core):", "",
              "| id | set | GPUs | tp | pp | vp | batch | seq | measured tok/s | modelled tok/s | ratio |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['gpus']} | {r['tp']} | {r['pp']} | {r['vp']} | {r['global_batch']} | "
              f"{r['seq']} | {r['measured']:,.0f} | {r['modelled']:,.0f} | {r['ratio']:.2f} |" for r in by["nemo"]]
    lines += ["", "Llama 3 405B on H100, BF16 (Llama 3 paper Table 4; hardware FLOP/s per GPU, as megatron-core's bf16 "
              "factor was fitted; stack megatron-core):", "",
              "| id | set | GPUs | tp | pp | measured TFLOP/s | modelled TFLOP/s | ratio |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['gpus']} | {r['tp']} | {r['pp']} | {r['measured']:.4g} | "
              f"{r['modelled']:.4g} | {r['ratio']:.2f} |" for r in by["llama-3"]]
    lines += ["", "Peak memory of Llama shapes trained on one H200 (our measurements; stack pytorch):", "",
              "| id | set | micro-batch | measured GiB | modelled GiB | ratio |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['micro_batch']} | {r['measured']:.2f} | {r['modelled']:.2f} | "
              f"{r['ratio']:.2f} |" for r in by["memory"]]
    lines += ["", f"Fitted: megatron-2021's gemm_factor on {', '.join(FITTED_ON['megatron-2021'])}; megatron-core's "
              f"fp8_factor and gemm_factor on {', '.join(FITTED_ON['megatron-core'])} (`fit_stack`); "
              "the pytorch stack's memory on nothing.", ""]
    return "\n".join(lines + summary_lines(rows)) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()), DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
