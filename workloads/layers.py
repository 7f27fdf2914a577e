"""A decoder layer's FFN (dense or MoE) operators, and the elementwise kernels a framework that does not fuse
them runs (``elementwise: unfused``, plain PyTorch) beside the operators a fused stack runs.

FFN: gate+up (or up), activation, down; routed experts add the gate-weight scaling.

MoE layer (one unit per routed expert, the router and combine where attention runs). What surrounds
the expert GEMMs, by ``moe_form`` (default ``loop`` with ``elementwise: unfused``, else ``fused``):

* ``fused`` (vLLM's fused_moe): the router GEMM, one top-k + softmax kernel (vLLM ``topk_softmax``),
  the per-expert token offsets (vLLM ``moe_align_block_size``: a count and prefix sum over the T k
  choices, each expert's rows padded to whole blocks), the experts' grouped GEMMs, which gather their
  tokens' rows by the sorted ids as they load them (no permuted copy), and the un-permutation with the
  weighted sum of each token's k (plus shared) outputs (vLLM ``moe_sum``): T (k + shared) rows read.
  Stacks that permute explicitly (TensorRT-LLM ``expandInputRowsKernel``, Megablocks' gather, Gale et
  al., MLSys 2023) move T k rows more: the ``unfused`` gather below.
* ``loop`` (plain PyTorch, HuggingFace's MixtralSparseMoeBlock): softmax over all E logits, top-k and
  the renormalisation of the k weights as kernels of their own; per expert, its tokens gathered
  (``index_select``: n_e rows read and written), its FFN, the gate-weight scaling, and the scatter-add
  into the output (``index_add_``: n_e expert rows and n_e output rows read, n_e written).

* ``sum`` and ``index_add`` (``moe_form``; batched experts as a plain PyTorch MoE without a fused kernel runs
  them: the experts' stacked weights multiplied by ``torch.bmm``, GShard's capacity-based dispatch, Lepikhin
  et al., ICLR 2021, section 2.2): softmax over all E logits and top-k as kernels of their own, in float32 as
  HuggingFace's sparse MoE blocks (``F.softmax(router_logits, dim=1, dtype=torch.float)``; transformers'
  modeling_olmoe.py / modeling_mixtral.py), the renormalisation where the config asks (``norm_topk_prob``),
  and the k weights cast to the activations' type (``router_cast``); the T k assignments spread evenly over
  min(E, T k) experts, each padded to one common count ``cap = ceil(T k / min(E, T k))`` (the capacity at
  capacity factor 1); the gather of the T k rows (``sum``: ``repeat_interleave``, assignments in token order,
  each token row read once and written k times; ``index_add``: indexed by assignment, the same rows plus the T
  k indices); the padding: a zeroed buffer of min(E, T k) x cap rows, the T k rows copied into their slots
  (padded rows are computed by the GEMMs too), and after the experts the T k valid rows taken back out; each
  expert's FFN at M = cap, one batched kernel per operator; the combine: the T k outputs scaled by their
  weights, then either summed per token by one reduction (``sum``: T k h read, T h written) or scattered into
  a zeroed output with ``index_add_`` (T k h read, one atomic add per element, each a sector read-modify-write
  at the L2: `Builder.vector`'s ``atomics``); and the residual add.

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
    if st.moe_form in BATCHED_FORMS:
        return _batched_moe(b, st, s, tag, first, count, an, router, expert_tp, moe_groups)
    loop = st.moe_form == "loop"
    b.gemm(an, "router", T, h, E, count, tokens=T, split=False)
    b.vector(an, "router_topk", T * E, math.log2(max(E, 2)), count, tokens=T,
             weight_elements=E if cfg.router_bias else 0.0)
    if loop:
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
    if loop:
        b.vector(pieces, "expert_gather", run_tokens * h, 0, count, prob=run_prob, tokens=run_tokens)
    ffn_ops(b, cfg, pieces, run_tokens, cfg.expert_width // shards, count, prob=run_prob, expert=True,
            params=False, unfused=unfused)
    if loop:
        b.vector(pieces, "expert_scatter_add", run_tokens * h, 1, count, prob=run_prob, tokens=run_tokens,
                 reads_per_element=2.0)
    for u, t in zip(units, tokens):
        ffn_units[u] = t * h * st.abytes
    moe_groups.append((first, units))
    _shared_expert(b, st, s, tag, count, ffn_units)
    return ffn_units


#: MoE forms whose experts run as one batched GEMM over a common padded count (module docstring)
BATCHED_FORMS = ("sum", "index_add")
#: bytes of one assignment's index in PyTorch's gather and index_add_ (int64)
INDEX_BYTES = 8.0
#: bytes of a routing probability: plain PyTorch's MoE blocks take the softmax in float32 (HuggingFace's
#: OlmoeSparseMoeBlock / MixtralSparseMoeBlock: ``F.softmax(router_logits, dim=1, dtype=torch.float)``)
ROUTER_BYTES = 4.0


def expert_capacity(tokens: float, experts: int, top_k: int) -> tuple[int, int]:
    """(experts used, rows each) of a batched MoE layer whose T k assignments are spread evenly and padded
    to a common count: min(E, T k) experts of ceil(T k / min(E, T k)) rows (capacity factor 1)."""
    assignments = max(int(math.ceil(tokens * top_k - 1e-9)), 1)
    used = min(experts, assignments)
    return used, int(math.ceil(assignments / used))


def _batched_moe(b: Builder, st, s: int, tag: str, first: int, count: int, an, router, expert_tp: bool,
                 moe_groups: list) -> dict[str, float]:
    """`moe_units` of the ``sum`` and ``index_add`` forms (module docstring)."""
    cfg, T = st.cfg, st.T
    ffn_units: dict[str, float] = {}
    h, E, k = cfg.hidden, cfg.experts, cfg.top_k
    ab = b.abytes
    # routing in float32 (HuggingFace's sparse MoE blocks: softmax(dtype=torch.float), top-k, renormalise,
    # then the k weights cast to the activations' type, a kernel of its own: ``router_cast``)
    f32 = ROUTER_BYTES / ab
    b.gemm(an, "router", T, h, E, count, tokens=T, split=False)
    b.vector(an, "router_softmax", T * E, 5, count, tokens=T, out_elements=T * E * f32)
    b.vector(an, "router_topk", T * E, math.log2(max(E, 2)), count, tokens=T, reads_per_element=f32,
             out_elements=T * k * (f32 + INDEX_BYTES / ab), weight_elements=E if cfg.router_bias else 0.0)
    if cfg.norm_topk_prob:
        b.vector(an, "router_renorm", T * k, 2, count, tokens=T, reads_per_element=f32, out_elements=T * k * f32)
    b.vector(an, "router_cast", T * k, 0, count, tokens=T, reads_per_element=f32)
    used, cap = expert_capacity(T, E, k)
    rows = T * k
    # gather: every token row read once from memory (its k copies hit the L2), T k rows written
    index = INDEX_BYTES / (h * ab) if st.moe_form == "index_add" else 0.0
    b.vector(an, "expert_gather", rows * h, 0, count, tokens=T, reads_per_element=1.0 / k + index)
    # padding: a zeroed buffer of used x cap rows, the T k gathered rows copied into their slots (indexed)
    b.vector(an, "expert_pad", used * cap * h, 0, count, tokens=T, reads_per_element=0.0)
    b.vector(an, "expert_pad_copy", rows * h, 0, count, tokens=T, reads_per_element=1.0 + INDEX_BYTES / (h * ab))
    units = [f"{tag}.e{e}" for e in range(E)]
    runs = (np.arange(E) < used).astype(float)
    shards = st.tp if expert_tp else 1
    b.expert_units(units, "expert", s, count, np.arange(E), runs, router.q(first), runs * cap,
                   ffn_params(cfg, cfg.expert_width), shards=shards)
    pieces = [n for u in units for n in b.logical[u]]
    ffn_ops(b, cfg, pieces, np.repeat(runs * cap, shards), cfg.expert_width // shards, count,
            prob=np.repeat(runs, shards), params=False, unfused=st.unfused)
    for u, r in zip(units, runs):
        ffn_units[u] = r * cap * h * ab
    moe_groups.append((first, units))
    # the T k valid rows taken back out of the padded output (indexed)
    b.vector(an, "expert_unpad", rows * h, 0, count, tokens=T, reads_per_element=1.0 + INDEX_BYTES / (h * ab))
    # combine: the T k outputs scaled by their weights, then summed per token or scattered with atomics
    b.vector(an, "moe_weight", rows * h, 1, count, tokens=T, reads_per_element=1.0 + 1.0 / h)
    if st.moe_form == "sum":
        b.vector(an, "moe_sum", rows * h, 1, count, tokens=T, out_elements=T * h)
    else:
        b.vector(an, "moe_zero", T * h, 0, count, tokens=T, reads_per_element=0.0)
        b.vector(an, "moe_index_add", rows * h, 1, count, tokens=T, reads_per_element=1.0 + INDEX_BYTES / (h * ab),
                 out_elements=T * h, atomics=rows * h)
    b.vector(an, "moe_residual", T * h, 1, count, tokens=T, reads_per_element=2.0)
    _shared_expert(b, st, s, tag, count, ffn_units)
    return ffn_units


def _shared_expert(b: Builder, st, s: int, tag: str, count: int, ffn_units: dict[str, float]) -> None:
    """The shared experts (one unit, every token), with qwen2_moe's sigmoid gate; its hand-off bytes into
    ``ffn_units``."""
    cfg, T, unfused = st.cfg, st.T, st.unfused
    h = cfg.hidden
    if not cfg.shared_experts:
        return
    shared = f"{tag}.shared"
    sn = b.unit(shared, "shared_expert", s, count, sharded=True, tokens=T)
    ffn_ops(b, cfg, sn, T, cfg.shared_width // st.tp, count, split=True, unfused=unfused)
    if cfg.shared_gate:
        b.gemm(sn, "shared_gate", T, h, 1, count, tokens=T, split=False)
        b.vector(sn, "shared_gate_sigmoid", T * h, 2, count, tokens=T)
    if unfused:
        b.vector(sn, "shared_add", T * h, 1, count, tokens=T, reads_per_element=2.0)
    ffn_units[shared] = T * h * st.abytes
