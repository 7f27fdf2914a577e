"""dse train against published training runs: every case of data/training_cases.yaml.

- Megatron-LM (Narayanan et al., SC'21, Table 1): GPT models of 1.7 B to 1 T parameters on 32 to 3,072
  A100s, full recomputation, fp16; the model FLOP/s each GPU achieved. The paper gives tp, pp and the
  GPUs but not the micro-batch or the interleaving: the model takes the fastest that fits
  (`megatron_best`), as the authors tuned theirs, on `dse train`'s ``dgx-a100-80gb``, whose one
  training-software figure (max_efficiency 0.622) was fitted to the rows of 39.1 B and 145.6 B.
- Llama 2 (Touvron et al. 2023, Table 2): GPU hours to pretrain the 7B and 70B on 2.0 T tokens on
  A100-80GB. The layout is not published: the model takes `dse train --search`'s fastest on 512 GPUs
  with selective recomputation, sequence parallelism and ZeRO-1 (`llama_2_gpu_hours`). Nothing fitted.

``python -m dse.validation.training [--write docs/validation.md]`` prints (and writes) the table;
``dse fidelity --suite training`` prints its cases (`cases`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import workloads

from ..training import Strategy, iteration, load_system
from ..training.footprint import to_train
from ..training.search import fastest
from .common import DATA, Case, read_data, summary_lines, write_command

CASES = DATA / "training_cases.yaml"
TITLE = "dse train against published training runs"
SYSTEM = "dgx-a100-80gb"
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
    system = system or load_system(SYSTEM)
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
                         recompute="full", precision="fp16")
            if v > 1 and s.micro_batches % pp:
                continue
            it = iteration(cfg, system, s)
            if it.fits and (best is None or it.iteration_s < best.iteration_s):
                best = it
    return best


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


def table(cases: list[dict] | None = None) -> list[dict]:
    """Each case (default: every one) with ``metric``, ``unit``, ``measured``, ``modelled``, ``ratio`` and,
    for Llama 2, the ``strategy`` found."""
    system = load_system(SYSTEM)
    rows = []
    for case in cases or load_cases():
        if case["kind"] == "megatron":
            it = megatron_best(case, system)
            row = {"metric": "model FLOP/s per GPU", "unit": "TFLOP/s", "measured": float(case["measured_tflops"]),
                   "modelled": it.model_tflops_per_device}
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
    megatron = [r for r in rows if r["kind"] == "megatron"]
    llama = [r for r in rows if r["kind"] != "megatron"]
    lines = ["Megatron-LM, Narayanan et al. SC'21 Table 1 (model FLOP/s per A100):", "",
             "| id | set | parameters B | tp | pp | GPUs | batch | measured TFLOP/s | modelled TFLOP/s | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['params_b']} | {r['tp']} | {r['pp']} | {r['gpus']} | "
              f"{r['global_batch']} | {r['measured']:.4g} | {r['modelled']:.4g} | {r['ratio']:.2f} |" for r in megatron]
    lines += ["", "Llama 2, Touvron et al. 2023 Table 2 (GPU hours to pretrain on 2.0 T tokens, A100-80GB):", "",
              "| id | set | GPUs | measured GPU h | modelled GPU h | ratio | fastest strategy found |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['set']} | {r['gpus']} | {r['measured']:,.0f} | {r['modelled']:,.0f} | "
              f"{r['ratio']:.2f} | {r['strategy']} |" for r in llama]
    return "\n".join(lines + [""] + summary_lines(rows)) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()), DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
