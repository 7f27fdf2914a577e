"""A decoder layer's FFN (dense or MoE) operators, and the elementwise kernels a framework that does not fuse
them runs (``elementwise: unfused``, plain PyTorch) beside the operators a fused stack runs.

FFN: gate+up (or up), activation, down; routed experts add the gate-weight scaling.

MoE layer (one unit per routed expert, the router and combine where attention runs). What surrounds
the expert GEMMs, by stack:

* ``fused`` (vLLM's fused_moe): the router GEMM, one top-k + softmax kernel (vLLM ``topk_softmax``),
  the per-expert token offsets (vLLM ``moe_align_block_size``: a count and prefix sum over the T k
  choices, each expert's rows padded to whole blocks), the experts' grouped GEMMs, which gather their
  tokens' rows by the sorted ids as they load them (no permuted copy), and the un-permutation with the
  weighted sum of each token's k (plus shared) outputs (vLLM ``moe_sum``): T (k + shared) rows read.
  Stacks that permute explicitly (TensorRT-LLM ``expandInputRowsKernel``, Megablocks' gather, Gale et
  al., MLSys 2023) move T k rows more: the ``unfused`` gather below.
* ``unfused`` (plain PyTorch, HuggingFace's MixtralSparseMoeBlock): softmax over all E logits, top-k and
  the renormalisation of the k weights as kernels of their own; per expert, its tokens gathered
  (``index_select``: n_e rows read and written), its FFN, the gate-weight scaling, and the scatter-add
  into the output (``index_add_``: n_e expert rows and n_e output rows read, n_e written).

Per-expert tile quantisation (each expert's tokens rounded up to whole tiles at the token counts the
routing distribution gives) is the chiplet's business: dse.model.expert_tiles.

Unfused elementwise kernels (measured on an H200: the timeline of one eager Llama-2-7B decode step,
shared/reference/h200/timeline_llama2_7b_decode_b128_c1024.csv, 32 kernels a layer): the norm's weight
multiply after the normalisation, RoPE as four kernels a tensor for queries and keys (the rotated copy
by ``cat``, ``x cos``, ``rot(x) sin`` and their sum: HuggingFace's apply_rotary_pos_emb) and the cos /
sin rows gathered by position, the KV cache written by a copy of K and V, and SiLU and the product with
the up projection as two kernels.
"""
from __future__ import annotations

import math

import numpy as np

from .builder import Builder
from .config import ModelConfig
from .routing import touch_probability

ACTIVATION_FLOPS_PER_ELEMENT = 4   # SiLU/GELU and, when gated, the product with the up projection
ROPE_KERNELS = (("rope_rotate", 1.0, 0), ("rope_cos", 1.0, 1), ("rope_sin", 1.0, 1), ("rope_sum", 2.0, 1))
"""RoPE unfused, per tensor: (kernel, reads per element, FLOPs per element)."""


def ffn_params(cfg: ModelConfig, width: int) -> float:
    mats = 3 if cfg.gated_ffn else 2
    bias = (width * (2 if cfg.gated_ffn else 1) + cfg.hidden) if cfg.mlp_bias else 0
    return mats * cfg.hidden * width + bias


def ffn_ops(b: Builder, cfg: ModelConfig, unit, tokens, width: int, layers: int, prob=1.0, expert=False,
            split=False, params=True, unfused=False):
    """An FFN's projections and activation (with ``unfused``, SiLU and the product apart); an expert's
    gate-weight scaling."""
    up = 2 * width if cfg.gated_ffn else width
    bias = cfg.mlp_bias
    h = cfg.hidden
    tokens = np.asarray(tokens, dtype=float)
    b.gemm(unit, "gate_up_proj" if cfg.gated_ffn else "up_proj", tokens, h, up, layers, bias=bias,
           prob=prob, tokens=tokens, split=split, params=params)
    if unfused and cfg.gated_ffn:
        b.vector(unit, "activation_silu", tokens * width, ACTIVATION_FLOPS_PER_ELEMENT - 1, layers, prob=prob,
                 tokens=tokens)
        b.vector(unit, "activation", tokens * width, 1, layers, prob=prob, tokens=tokens, reads_per_element=2.0)
    else:
        b.vector(unit, "activation", tokens * width, ACTIVATION_FLOPS_PER_ELEMENT, layers, prob=prob,
                 tokens=tokens, reads_per_element=2.0 if cfg.gated_ffn else 1.0)
    b.gemm(unit, "down_proj", tokens, width, h, layers, bias=bias, prob=prob, tokens=tokens, split=split,
           params=params)
    if expert:   # scale by the token's gate weight before the combine
        b.vector(unit, "expert_scale", tokens * h, 1, layers, prob=prob, tokens=tokens)


def norm_scale(b: Builder, unit, T: float, width: int, layers: int, unfused: bool):
    """Unfused: the norm's multiply by its weight, a kernel after the normalisation."""
    if unfused:
        b.vector(unit, "norm_scale", T * width, 1, layers, tokens=T)


def rope_ops(b: Builder, unit, T: float, heads: int, kv_heads: int, head_dim: int, layers: int, unfused: bool,
             flops_per_element: int):
    """RoPE of the queries and keys: one kernel (fused), or HuggingFace's kernels (module docstring)."""
    if not unfused:
        b.vector(unit, "rope", T * (heads + kv_heads) * head_dim, flops_per_element, layers, tokens=T)
        return
    b.vector(unit, "rope_table", 2.0 * 2.0 * T * head_dim, 0, layers, tokens=T)    # cos, sin rows for q and k
    for width in (heads * head_dim, kv_heads * head_dim):
        for name, reads, flops in ROPE_KERNELS:
            b.vector(unit, name, T * width, flops, layers, tokens=T, reads_per_element=reads)


def kv_copy(b: Builder, unit, T: float, kv_elements: int, layers: int, unfused: bool):
    """Unfused: K and V copied from the projection's output into the preallocated cache (two kernels)."""
    if unfused:
        for name in ("kv_copy_k", "kv_copy_v"):
            b.vector(unit, name, T * kv_elements / 2.0, 0, layers, tokens=T)


def moe_units(b: Builder, st, s: int, tag: str, first: int, count: int, an, router, expert_tp: bool,
              moe_groups: list) -> dict[str, float]:
    """A MoE layer's FFN: norm, routing, permutation and combine on the attention unit, one unit per routed
    expert (whole, or ``tp`` shards with ``expert_tp``) and the shared experts; hand-off bytes per unit
    (module docstring: what surrounds the experts in each stack)."""
    cfg, T, unfused = st.cfg, st.T, st.unfused
    h, E, k = cfg.hidden, cfg.experts, cfg.top_k
    ffn_units: dict[str, float] = {}       # logical unit -> hand-off bytes per occurrence
    b.vector(an, "ffn_norm", T * h, st.norm_flops, count, weight_elements=st.norm_w, tokens=T)
    norm_scale(b, an, T, h, count, unfused)
    b.gemm(an, "router", T, h, E, count, tokens=T, split=False)
    b.vector(an, "router_topk", T * E, math.log2(max(E, 2)), count, tokens=T,
             weight_elements=E if cfg.router_bias else 0.0)
    if unfused:
        b.vector(an, "router_softmax", T * E, 5, count, tokens=T)
        b.vector(an, "router_renorm", T * k, 2, count, tokens=T)
    else:
        b.vector(an, "moe_align", T * k, math.log2(max(E, 2)), count, tokens=T)
        b.vector(an, "moe_combine", T * (k + cfg.shared_experts) * h, 2, count, tokens=T)
    q = router.q(first)
    touched = touch_probability(q, T)
    tokens = T * q
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens_if_run = np.where(touched > 0, tokens / touched, 0.0)
    units = [f"{tag}.e{e}" for e in range(E)]
    shards = st.tp if expert_tp else 1
    b.expert_units(units, "expert", s, count, np.arange(E), touched, q, tokens,
                   ffn_params(cfg, cfg.expert_width), shards=shards)
    pieces = [n for u in units for n in b.logical[u]]
    run_tokens, run_prob = np.repeat(tokens_if_run, shards), np.repeat(touched, shards)
    if unfused:
        b.vector(pieces, "expert_gather", run_tokens * h, 0, count, prob=run_prob, tokens=run_tokens)
    ffn_ops(b, cfg, pieces, run_tokens, cfg.expert_width // shards, count, prob=run_prob, expert=True,
            params=False, unfused=unfused)
    if unfused:
        b.vector(pieces, "expert_scatter_add", run_tokens * h, 1, count, prob=run_prob, tokens=run_tokens,
                 reads_per_element=2.0)
    for u, t in zip(units, tokens):
        ffn_units[u] = t * h * st.abytes
    moe_groups.append((first, units))
    if cfg.shared_experts:
        shared = f"{tag}.shared"
        sn = b.unit(shared, "shared_expert", s, count, sharded=True, tokens=T)
        ffn_ops(b, cfg, sn, T, cfg.shared_width // st.tp, count, split=True, unfused=unfused)
        if cfg.shared_gate:
            b.gemm(sn, "shared_gate", T, h, 1, count, tokens=T, split=False)
            b.vector(sn, "shared_gate_sigmoid", T * h, 2, count, tokens=T)
        if unfused:
            b.vector(sn, "shared_add", T * h, 1, count, tokens=T, reads_per_element=2.0)
        ffn_units[shared] = T * h * st.abytes
    return ffn_units
