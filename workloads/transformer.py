"""Operator trace of a decoder-only transformer (dense or MoE) for one prefill or decode step, or the
forward pass of a training step (``train``: a prefill that keeps no KV cache and computes the logits of
every position, as next-token training does).

Per layer, with T tokens in the step (prefill: batch x prompt, decode: batch), q queries and L keys per
sequence (operator list of shared/reference/workloads.md):

* attention unit: norm; GQA (QKV projection, which writes the KV cache; optional per-head q/k norm;
  RoPE; Q.K^T and P.V per sequence and KV head, the query heads sharing a KV head forming the GEMM's M;
  softmax; output projection) or MLA (below); residual. In a MoE layer also the post-attention norm,
  the router GEMM and top-k, and the weighted sum that combines the experts' returning outputs.
* FFN unit (dense layers): norm, gate+up (or up), activation, down, residual.
* routed experts (one unit each): gate+up, activation, down and the gate-weight scaling, on their
  expected tokens ``T q_e`` when they run (probability ``1 - (1 - q_e)^T``); shared experts (one unit)
  on all tokens, with qwen2_moe's sigmoid gate.
* embedding lookup first; final norm and LM head at the end (last position of each sequence only).

MLA (DeepSeek-V2/V3) follows the reference implementation: prefill uses the expanded form (kv_b_proj
produces per-head K and V; attention over q/k head width nope + rope and v head width), decode the
absorbed form (W_UK folded into the query, scores over the kv_lora + rope latent shared by all heads,
P.V over the kv_lora latent, then W_UV); the cache holds kv_lora + rope elements per token and layer.

Causality: a step's queries are the last q of its L positions; query i sees L - q + i + 1 keys.
GEMM shapes are the full q x L tiles an array computes without skipping masked blocks; FLOPs (and
softmax elements) count only the unmasked pairs, ``q L - q (q - 1) / 2`` (prefill q = L: about half).

Tensor parallelism (``tp`` > 1): attention, dense FFN, shared expert, embedding and LM head become ``tp``
shards (heads, FFN width and vocabulary split; norms, MLA's down-projections and latent cache
replicated, Megatron-LM / vLLM style; the vocabulary is padded to a multiple of ``tp``); routed experts stay whole (expert parallelism). Hand-offs between
shards carry the all-reduce volume (see `Builder.connect`).

Activations and the KV cache are stored at the weight precision, but never below one byte
(int4 weights run with int8 activations).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .builder import Builder
from .config import ModelConfig
from .errors import WorkloadError
from .precision import bytes_per_element
from .layers import ffn_ops, kv_copy, moe_units, norm_scale, rope_ops
from .routing import Router
from .workload import AFFINITY_COLUMNS, Workload, per_row, summarize

PHASES = ("prefill", "decode", "train")
#: how a MoE layer's experts run (workloads.layers)
MOE_FORMS = ("fused", "loop", "sum", "index_add")
RMSNORM_FLOPS_PER_ELEMENT = 4      # square, sum, scale, multiply by weight
LAYERNORM_FLOPS_PER_ELEMENT = 8    # mean, subtract, square, sum, scale, multiply, add bias
SOFTMAX_FLOPS_PER_ELEMENT = 5      # max, subtract, exp, sum, divide
ROPE_FLOPS_PER_ELEMENT = 3         # two multiplies and an add per rotated element
TOKEN_ID_BYTES = 4                 # int32 token ids handed to a model that embeds them itself
AFFINITY_TOP_PER_EXPERT = 8        # affinity rows kept per source expert (largest lift)


def check_step(phase: str, batch: float, context: int) -> None:
    if phase not in PHASES:
        raise WorkloadError(f"unknown phase {phase!r}; allowed: {', '.join(PHASES)}")
    if not batch > 0 or context < 1:
        raise WorkloadError(f"batch and context must be >= 1, got batch={batch}, context={context}")


def _layer_groups(cfg: ModelConfig, per_layer: bool) -> list[tuple[int, int]]:
    """(first layer, layer count) of each run of identical layers, or one group per layer."""
    if per_layer:
        return [(layer, 1) for layer in range(cfg.layers)]
    groups: list[tuple[int, int]] = []
    for layer, moe in enumerate(cfg.moe_layers):
        if groups and cfg.moe_layers[groups[-1][0]] == moe:
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((layer, 1))
    return groups


def _check_tp(cfg: ModelConfig, tp: int, expert_tp: bool = False) -> None:
    if tp < 1:
        raise WorkloadError(f"tensor-parallel degree must be >= 1, got {tp}")
    if tp == 1:
        return
    widths = {"num_attention_heads": cfg.heads, "intermediate_size": cfg.ffn_width}
    if not cfg.mla:
        widths["num_key_value_heads"] = cfg.kv_heads
    if cfg.shared_experts:
        widths["shared expert width"] = cfg.shared_width
    if expert_tp and cfg.experts:
        widths["expert width"] = cfg.expert_width
    for key, value in widths.items():
        if value % tp:
            raise WorkloadError(f"{cfg.name}: tensor-parallel degree {tp} does not divide {key} {value}")


def extract_transformer(cfg: ModelConfig, phase: str = "decode", batch: float = 1, context: int = 2048,
                        precision: str = "bf16", routing: dict | None = None, per_layer: bool = False,
                        seed: int = 0, tp: int = 1, q_len: int | None = None, input_width: int = 0,
                        lm_head: bool = True, kv_precision: str | None = None, expert_tp: bool = False,
                        fused_attention: bool = False, unfused_elementwise: bool = False,
                        moe_form: str | None = None) -> Workload:
    """Operator trace and unit graph of one step of ``cfg`` (see module docstring).

    ``batch`` sequences (may be fractional: an expected count), each with ``context`` positions of
    which the step computes the last ``q_len`` (default: all of them in prefill, one in decode).
    ``input_width`` > 0: the model receives hidden states of that width instead of token ids (an
    ensemble member fed by another model; a projection is added when the widths differ).
    ``lm_head=False``: the model ends with its final norm (an ensemble member whose output is composed).
    ``kv_precision``: the KV cache's element type when it differs from the weights' (fp8 weights with a
    16-bit cache is the common serving setup); it sizes the cache and its reads and writes.
    ``expert_tp``: routed experts are sharded ``tp`` ways too (each shard 1/tp of every expert's FFN width,
    its output all-reduced like the dense FFN's: TensorRT-LLM's MoE tensor parallelism) instead of staying
    whole for expert parallelism.
    ``fused_attention``: the attention core (Q.K^T, softmax, P.V) is one kernel whose scores and
    probabilities stay on chip, as FlashAttention computes it (Dao et al., NeurIPS 2022; FlashAttention-2,
    ICLR 2024): its rows read Q, K, V and write the output only (dse.model.tables runs them as one kernel
    that skips the fully masked blocks); unfused (the default), the scores and probabilities are
    activations of their own operators, written and read back when they exceed the chip's capacity.
    ``unfused_elementwise``: norms, RoPE, the KV cache write, SiLU and the MoE routing run as plain
    PyTorch runs them, a kernel per elementwise step (workloads.layers); otherwise one kernel each, as
    serving stacks' fused kernels run them.
    ``moe_form``: how a MoE layer's experts run (workloads.layers): ``fused`` (vLLM's fused_moe), ``loop``
    (HuggingFace's loop over the experts), ``sum`` or ``index_add`` (one batched GEMM over the experts'
    stacked weights at a common padded count, combined by a weighted sum or by ``index_add_``); by default
    ``loop`` with ``unfused_elementwise``, else ``fused``.
    """
    check_step(phase, batch, context)
    if moe_form not in (None,) + MOE_FORMS:
        raise WorkloadError(f"unknown moe_form {moe_form!r}; allowed: {', '.join(MOE_FORMS)}")
    _check_tp(cfg, tp, expert_tp)
    wbytes = bytes_per_element(precision)
    abytes = max(wbytes, 1.0)
    b = Builder(wbytes, abytes, shards=tp)
    q_len = (context if phase != "decode" else 1) if q_len is None else q_len
    if not 1 <= q_len <= context:
        raise WorkloadError(f"a step computes 1..context positions per sequence, got {q_len} of {context}")
    kvbytes = max(bytes_per_element(kv_precision), 1.0) if kv_precision else abytes
    if phase == "train":            # keys and values are activations of the step, not a cache
        kvbytes = 0.0
    pairs = q_len * context - q_len * (q_len - 1) / 2.0        # unmasked (query, key) pairs per sequence
    st = _Step(cfg=cfg, phase=phase, batch=batch, context=context, precision=precision, T=batch * q_len,
               q_len=q_len, kv_len=context, useful=pairs / (q_len * context), abytes=abytes, kvbytes=kvbytes,
               tp=tp, fused=fused_attention, unfused=unfused_elementwise,
               moe_form=moe_form or ("loop" if unfused_elementwise else "fused"),
               norm_flops=LAYERNORM_FLOPS_PER_ELEMENT if cfg.layernorm else RMSNORM_FLOPS_PER_ELEMENT,
               norm_w=2 * cfg.hidden if cfg.layernorm else cfg.hidden,
               kv_per_token_layer=cfg.kv_elements_per_token_layer * kvbytes)
    moe_layer_ids = [i for i, m in enumerate(cfg.moe_layers) if m]
    router = Router(routing, cfg.experts, cfg.top_k, moe_layer_ids, seed) if cfg.is_moe else None

    stages: list[dict] = []
    handoff = _input_unit(b, st, _new_stage(stages, "embedding", 1), input_width)
    groups = _layer_groups(cfg, per_layer)
    moe_groups: list[tuple[int, list[str]]] = []     # (first layer, expert unit names) for affinity
    for first, count in groups:
        handoff = _layer_group(b, st, stages, first, count, handoff, router, expert_tp, moe_groups)
    _output_unit(b, st, _new_stage(stages, "lm_head" if lm_head else "final_norm", 1), handoff, lm_head,
                 input_width)

    _annotate(b, groups)
    ops = b.ops()
    nodes = b.graph.nodes
    ops["expert"] = per_row(ops["unit"], {u: d["expert"] for u, d in nodes(data=True)}, int)
    ops["layer"] = per_row(ops["unit"], {u: d["first_layer"] for u, d in nodes(data=True)}, int)
    stage_table = pd.DataFrame(stages)
    wl = Workload(name=cfg.name, phase=phase, batch=batch, context=context, precision=precision,
                  tokens_per_step=st.T, ops=ops, graph=b.graph, stages=stage_table,
                  scenarios=[(1.0, tuple(int(x) for x in stage_table["stage"]))], summary={})
    if per_layer and router is not None and router.has_affinity:
        wl.affinity = _affinity_table(router, moe_groups, st.T, cfg.hidden * abytes)
    wl.summary = summarize(wl, cfg, b.logical_params, st.kv_per_token_layer, tp=tp)
    return wl


@dataclass(frozen=True)
class _Step:
    """What every operator of one step shares: ``T`` tokens, ``q_len`` queries and ``kv_len`` keys per
    sequence, ``useful`` share of unmasked (query, key) pairs, bytes per activation and KV element, the
    tensor-parallel degree, the norm's FLOPs per element and weights, the KV cache bytes per token and layer."""
    cfg: ModelConfig
    phase: str
    batch: float
    context: int
    precision: str
    T: float
    q_len: int
    kv_len: int
    useful: float
    abytes: float
    kvbytes: float
    tp: int
    fused: bool
    unfused: bool
    moe_form: str
    norm_flops: int
    norm_w: int
    kv_per_token_layer: float


def _new_stage(stages: list[dict], name: str, repeat: int) -> int:
    """Append a stage that runs after the previous one; its index."""
    after = (len(stages) - 1,) if stages else ()
    stages.append(dict(stage=len(stages), name=name, repeat=repeat, prob=1.0, after=after))
    return len(stages) - 1


def _input_unit(b: Builder, st: _Step, s: int, input_width: int) -> dict[str, float]:
    """Embedding lookup (vocab-parallel under TP), or a hand-off of hidden states from another model;
    the bytes it hands to the first layer."""
    cfg, T, tp = st.cfg, st.T, st.tp
    h = cfg.hidden
    names = b.unit("embed", "embedding", s, 1, sharded=True, tokens=T)
    if input_width:
        if input_width != h:
            b.gemm(names, "input_proj", T, input_width, h // tp if tp > 1 else h, 1, tokens=T)
        else:
            b.vector(names, "input_copy", T * h, 0, 1, tokens=T)
    else:
        table = cfg.vocab * h + cfg.learned_positions * h
        b.add_params("embed", table, split=True)
        rows = T * h * (2 if cfg.learned_positions else 1) / tp
        b.vector(names, "embed_lookup", T * h / tp, 0, 1, weight_elements=rows, tokens=T, reads_per_element=0.0,
                 params=False)
    return {"embed": T * h * st.abytes}


def _layer_group(b: Builder, st: _Step, stages: list[dict], first: int, count: int, handoff: dict[str, float],
                 router: Router | None, expert_tp: bool, moe_groups: list) -> dict[str, float]:
    """``count`` identical layers from ``first``: the attention unit (and the MoE router, which runs where
    attention runs), then the dense FFN or the routed (and shared) experts. ``handoff``: bytes each unit
    of the previous group hands over; returns this group's."""
    cfg = st.cfg
    tag = f"L{first}" if count == 1 else f"L{first}-{first + count - 1}"
    moe = cfg.moe_layers[first]
    attn = f"{tag}.attn"
    kv_shard = st.kv_per_token_layer if cfg.mla else st.kv_per_token_layer / st.tp
    an = b.unit(attn, "attention", _new_stage(stages, f"{tag}.attention", count), count, sharded=True,
                kv_bytes_per_token=kv_shard * count, tokens=st.T)
    b.vector(an, "attn_norm", st.T * cfg.hidden, st.norm_flops, count, weight_elements=st.norm_w, tokens=st.T)
    norm_scale(b, an, st.T, cfg.hidden, count, st.unfused)
    if cfg.mla:
        _mla_ops(b, cfg, an, st.phase, st.batch, st.T, st.q_len, st.kv_len, count, st.useful, st.abytes, st.tp,
                 st.kvbytes, st.fused)
    else:
        _gqa_ops(b, cfg, an, st, count)
    b.vector(an, "attn_residual", st.T * cfg.hidden, 1, count, tokens=st.T, reads_per_element=2.0)
    b.connect_many([(p, attn, nbytes) for p, nbytes in handoff.items()], 1)

    s = _new_stage(stages, f"{tag}.{'moe' if moe else 'ffn'}", count)
    if moe:
        ffn_units = moe_units(b, st, s, tag, first, count, an, router, expert_tp, moe_groups)
    else:
        ffn_units = _dense_ffn(b, st, s, tag, count)
    b.connect_many([(attn, unit, nbytes) for unit, nbytes in ffn_units.items()], count)
    if count > 1:   # output returns to the next layer of the same group
        b.connect_many([(unit, attn, nbytes) for unit, nbytes in ffn_units.items()], count - 1)
    return ffn_units


def _dense_ffn(b: Builder, st: _Step, s: int, tag: str, count: int) -> dict[str, float]:
    """A dense layer's FFN unit: norm, projections, residual; its hand-off bytes."""
    T, h = st.T, st.cfg.hidden
    unit = f"{tag}.ffn"
    fn = b.unit(unit, "ffn", s, count, sharded=True, tokens=T)
    b.vector(fn, "ffn_norm", T * h, st.norm_flops, count, weight_elements=st.norm_w, tokens=T)
    norm_scale(b, fn, T, h, count, st.unfused)
    ffn_ops(b, st.cfg, fn, T, st.cfg.ffn_width // st.tp, count, split=True, unfused=st.unfused)
    b.vector(fn, "ffn_residual", T * h, 1, count, tokens=T, reads_per_element=2.0)
    return {unit: T * h * st.abytes}


def _output_unit(b: Builder, st: _Step, s: int, handoff: dict[str, float], lm_head: bool,
                 input_width: int) -> None:
    """Final norm and LM head (last position of each sequence; every position in training), or the final
    norm alone (``lm_head=False``), fed by the last group's units."""
    cfg = st.cfg
    h = cfg.hidden
    head = "lm_head" if lm_head else "final_norm"
    logit_rows = st.T if st.phase == "train" else st.batch
    hn = b.unit(head, "lm_head", s, 1, sharded=lm_head, tokens=logit_rows)
    out_rows = logit_rows if lm_head else st.T
    b.vector(hn, "final_norm", out_rows * h, st.norm_flops, 1, weight_elements=st.norm_w, tokens=out_rows,
             split=False)
    if lm_head:
        # tied: the head reads the embedding table (stored with the embedding, counted once) and needs its
        # own copy where it runs; a model fed hidden states has no table of its own, so the head holds it
        own_table = not cfg.tied_embeddings or bool(input_width)
        b.gemm(hn, "lm_head", logit_rows, h, -(-cfg.vocab // st.tp), 1, tokens=logit_rows, params=own_table)
        if not own_table:
            for n in hn:
                b.graph.nodes[n]["weight_bytes"] += cfg.vocab * h * b.wbytes / st.tp
    for p, nbytes in handoff.items():
        b.connect(p, head, nbytes, 1)


def _annotate(b: Builder, groups: list[tuple[int, int]]) -> None:
    """First decoder layer of every unit (from its name's layer tag), -1 outside the layers."""
    for n, d in b.graph.nodes(data=True):
        tag = n.split(".", 1)[0]
        d["first_layer"] = int(tag[1:].split("-")[0]) if tag.startswith("L") and tag[1:2].isdigit() else -1
        d.setdefault("model", "")


def _qk_norms_unfused(b, cfg, an, T: float, heads: int, kv_heads: int, count: int) -> None:
    """The q and k norms as plain PyTorch runs them (``elementwise: unfused``): two RMSNorm modules
    (HuggingFace's OlmoeAttention / Qwen3Attention: ``q_norm`` and ``k_norm``), each its normalisation and
    its multiply by the weight as kernels of their own, as the layer's other norms (`norm_scale`)."""
    hd = cfg.head_dim
    full = cfg.qk_norm == "full"
    for name, width in (("q_norm", heads * hd), ("k_norm", kv_heads * hd)):
        b.vector(an, name, T * width, RMSNORM_FLOPS_PER_ELEMENT, count, weight_elements=width if full else hd,
                 tokens=T, split=full)
        b.vector(an, f"{name}_scale", T * width, 1, count, tokens=T)


def _gqa_ops(b, cfg, an, st, count):
    """GQA's operators (module docstring); ``st.unfused``: RoPE and the KV cache write as plain PyTorch runs
    them (workloads.layers)."""
    phase, batch, T, q_len, kv_len, useful = st.phase, st.batch, st.T, st.q_len, st.kv_len, st.useful
    tp, kvbytes, fused = st.tp, st.kvbytes, st.fused
    h, hd = cfg.hidden, cfg.head_dim
    heads, kv_heads = cfg.heads // tp, cfg.kv_heads // tp
    group = heads // kv_heads
    qkv_width = (heads + 2 * kv_heads) * hd
    kv_elems = 2 * kv_heads * hd
    b.gemm(an, "qkv_proj", T, h, qkv_width, count, bias=cfg.qkv_bias, tokens=T, kv_write=T * kv_elems * kvbytes)
    if cfg.qk_norm and st.unfused:
        _qk_norms_unfused(b, cfg, an, T, heads, kv_heads, count)
    elif cfg.qk_norm == "head":    # qwen3: RMSNorm over head_dim, weights shared by the heads
        b.vector(an, "qk_norm", T * (heads + kv_heads) * hd, RMSNORM_FLOPS_PER_ELEMENT, count,
                 weight_elements=2 * hd, tokens=T)
    elif cfg.qk_norm == "full":    # olmoe: RMSNorm over all query / key channels
        b.vector(an, "qk_norm", T * (heads + kv_heads) * hd, RMSNORM_FLOPS_PER_ELEMENT, count,
                 weight_elements=(heads + kv_heads) * hd, tokens=T, split=True)
    if not cfg.learned_positions:
        rope_ops(b, an, T, heads, kv_heads, hd, count, st.unfused, ROPE_FLOPS_PER_ELEMENT)
    kv_copy(b, an, T, kv_elems, count, st.unfused and phase != "train")
    kv_read = batch * kv_len * kv_heads * hd * kvbytes if phase == "decode" else 0.0
    b.gemm(an, "attn_score", q_len * group, hd, kv_len, count, batch=batch * kv_heads, weights=False,
           tokens=T, kv_read=kv_read, useful=useful, out_on_chip=fused)
    b.vector(an, "softmax", batch * heads * q_len * kv_len * useful, SOFTMAX_FLOPS_PER_ELEMENT, count, tokens=T,
             on_chip=fused)
    b.gemm(an, "attn_context", q_len * group, kv_len, hd, count, batch=batch * kv_heads, weights=False,
           tokens=T, kv_read=kv_read, useful=useful, a_on_chip=fused)
    b.gemm(an, "o_proj", T, heads * hd, h, count, bias=cfg.o_bias, tokens=T)


def _mla_ops(b, cfg, an, phase, batch, T, q_len, kv_len, count, useful, abytes, tp, kvbytes, fused):
    """Multi-head latent attention: expanded in prefill, absorbed in decode (module docstring)."""
    h = cfg.hidden
    H = cfg.heads // tp
    nope, rope, vd, lora = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    qk = nope + rope
    if cfg.q_lora_rank:
        b.gemm(an, "q_a_proj", T, h, cfg.q_lora_rank, count, tokens=T, split=False)
        b.vector(an, "q_a_norm", T * cfg.q_lora_rank, RMSNORM_FLOPS_PER_ELEMENT, count,
                 weight_elements=cfg.q_lora_rank, tokens=T)
        b.gemm(an, "q_b_proj", T, cfg.q_lora_rank, H * qk, count, tokens=T)
    else:
        b.gemm(an, "q_proj", T, h, H * qk, count, tokens=T)
    cache = (lora + rope) * kvbytes
    b.gemm(an, "kv_a_proj", T, h, lora + rope, count, tokens=T, kv_write=T * cache, split=False)
    b.vector(an, "kv_a_norm", T * lora, RMSNORM_FLOPS_PER_ELEMENT, count, weight_elements=lora, tokens=T)
    b.vector(an, "rope", T * (H + 1) * rope, ROPE_FLOPS_PER_ELEMENT, count, tokens=T)
    if phase != "decode":
        b.gemm(an, "kv_b_proj", T, lora, H * (nope + vd), count, tokens=T)
        b.gemm(an, "attn_score", q_len, qk, kv_len, count, batch=batch * H, weights=False, tokens=T,
               useful=useful, out_on_chip=fused)
        b.vector(an, "softmax", batch * H * q_len * kv_len * useful, SOFTMAX_FLOPS_PER_ELEMENT, count, tokens=T,
                 on_chip=fused)
        b.gemm(an, "attn_context", q_len, kv_len, vd, count, batch=batch * H, weights=False, tokens=T,
               useful=useful, a_on_chip=fused)
    else:
        # W_UK folded into the query: per head (T x nope) @ (nope x lora); weights = kv_b_proj's K half
        b.gemm(an, "q_absorb", T, nope, lora, count, batch=H, tokens=T, per_instance_weights=True)
        kv_read = batch * kv_len * cache
        b.gemm(an, "attn_score", q_len * H, lora + rope, kv_len, count, batch=batch, weights=False, tokens=T,
               kv_read=kv_read, useful=useful, out_on_chip=fused)
        b.vector(an, "softmax", batch * H * q_len * kv_len * useful, SOFTMAX_FLOPS_PER_ELEMENT, count, tokens=T,
                 on_chip=fused)
        # P.V over the latent (already read for the scores), then W_UV per head
        b.gemm(an, "attn_context", q_len * H, kv_len, lora, count, batch=batch, weights=False, tokens=T,
               useful=useful, a_on_chip=fused)
        b.gemm(an, "v_absorb", T, lora, vd, count, batch=H, tokens=T, per_instance_weights=True)
    b.gemm(an, "o_proj", T, H * vd, h, count, tokens=T)


def _affinity_table(router: Router, moe_groups: list[tuple[int, list[str]]], T: float,
                    bytes_per_token: float) -> pd.DataFrame:
    """Expert pairs of consecutive MoE layers that co-activate more than chance (per_layer mode)."""
    frames = []
    k = router.top_k
    for (layer, units), (nxt, next_units) in zip(moe_groups, moe_groups[1:]):
        A = router.affinity(layer, nxt)
        q, q_next = router.q(layer), router.q(nxt)
        lift = A / np.maximum(q_next / k, 1e-300)[None, :]
        keep = min(AFFINITY_TOP_PER_EXPERT, A.shape[1])
        top = np.argpartition(-lift, keep - 1, axis=1)[:, :keep]
        rows = np.repeat(np.arange(A.shape[0]), keep)
        cols = top.ravel()
        sel = lift[rows, cols] > 1.0 + 1e-9
        rows, cols = rows[sel], cols[sel]
        tokens = T * k * q[rows] * A[rows, cols]     # tokens per step selecting both (module docs)
        frames.append(pd.DataFrame({
            "src": np.array(units, dtype=object)[rows], "dst": np.array(next_units, dtype=object)[cols],
            "layer": layer, "next_layer": nxt, "prob": A[rows, cols], "lift": lift[rows, cols],
            "tokens": tokens, "bytes": tokens * bytes_per_token}))
    if not frames:
        return pd.DataFrame(columns=AFFINITY_COLUMNS)
    return pd.concat(frames, ignore_index=True)[AFFINITY_COLUMNS]
