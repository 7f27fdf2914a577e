"""Measure the peak memory of training steps on one GPU (issue 35, item 5: checks dse.training.memory).

The model, optimizer and step are those of ``gpu_measure_mixed.py``'s training part (a Llama-style
decoder with fp32 weights under bf16 autocast, fused AdamW, ``zero_grad(set_to_none=True)``, no
recomputation; weights made on the GPU): two warm-up steps, the peak allocated memory over two more.

* a 4.5 B Llama shape (hidden 3,072, 38 layers, 32 heads, FFN 8,192, vocabulary 32,000), micro-batch 1
  at 2,048 tokens, SDPA flash attention;
* the 1.1 B TinyLlama shape at micro-batches 1 and 2 with SDPA's math backend (unfused: scores and
  probabilities kept for the backward).

Writes ``train_memory_extra.csv`` to ``--out``.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_measure_mixed import TINYLLAMA, TrainModel  # noqa: E402

LLAMA_4_5B = dict(hidden=3072, heads=32, kv_heads=32, ffn=8192, layers=38, vocab=32000)


def peak_gib(shape, micro, seq, backend):
    with torch.device("cuda"):
        model = TrainModel(shape)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, shape["vocab"], (micro, seq + 1), device="cuda")

    def step():
        with sdpa_kernel(backend), torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() / 2**30
    del model, opt
    torch.cuda.empty_cache()
    return params, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    rows = []
    for name, shape, micro, backend, label in (
            ("llama-4.5b-shape", LLAMA_4_5B, 1, SDPBackend.FLASH_ATTENTION, "sdpa flash"),
            ("tinyllama-1.1b-shape", TINYLLAMA, 1, SDPBackend.MATH, "sdpa math (unfused)"),
            ("tinyllama-1.1b-shape", TINYLLAMA, 2, SDPBackend.MATH, "sdpa math (unfused)")):
        try:
            params, peak = peak_gib(shape, micro, 2048, backend)
        except torch.OutOfMemoryError:
            params, peak = None, None
            torch.cuda.empty_cache()
        rows.append(dict(model=name, params=params, seq=2048, micro_batch=micro,
                         peak_allocated_gib=peak and round(peak, 3), attention=label, recompute="none"))
        print(rows[-1], flush=True)
    with open(os.path.join(args.out, "train_memory_extra.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(torch.cuda.get_device_name(), torch.__version__)


if __name__ == "__main__":
    main()
