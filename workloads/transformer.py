"""Operator trace of a decoder-only transformer (dense or MoE) for one prefill or decode step.

Per layer, with T tokens in the step (prefill: batch x context, decode: batch) and context L
(operator list of shared/reference/workloads.md): norm; QKV projection (writes the KV cache); RoPE;
Q.K^T and P.V per sequence and KV head (GQA: the query heads sharing a KV head form the GEMM's M);
softmax; output projection; residual; then the dense FFN (gate+up, activation, down) or the MoE block
(router GEMM and top-k in the attention unit, each routed expert on its expected tokens, shared
experts on all tokens). Embedding lookup first, final norm and LM head (last position only) at the end.

Activations and the KV cache are stored at the weight precision, but never below one byte
(int4 weights run with int8 activations).
"""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pandas as pd

from .config import ModelConfig
from .errors import WorkloadError
from .precision import bytes_per_element
from .routing import selection_probabilities, touch_probability
from .workload import OP_COLUMNS, Workload

PHASES = ("prefill", "decode")
RMSNORM_FLOPS_PER_ELEMENT = 4      # square, sum, scale, multiply by weight
SOFTMAX_FLOPS_PER_ELEMENT = 5      # max, subtract, exp, sum, divide
ROPE_FLOPS_PER_ELEMENT = 3         # two multiplies and an add per rotated element
ACTIVATION_FLOPS_PER_ELEMENT = 4   # SiLU/GELU and, when gated, the product with the up projection


class _Builder:
    """Accumulates operator rows and graph nodes for one workload."""

    def __init__(self, wbytes: float, abytes: float):
        self.wbytes, self.abytes = wbytes, abytes
        self.rows: list[dict] = []
        self.graph = nx.DiGraph()

    def unit(self, unit: str, kind: str, stage: int, layers: int, params: float, expert: int = -1,
             kv_bytes_per_token: float = 0.0, prob: float = 1.0, selection_prob: float = 1.0):
        self.graph.add_node(unit, kind=kind, stage=stage, layers=layers, expert=expert, params=params * layers,
                            weight_bytes=params * layers * self.wbytes, kv_bytes_per_token=kv_bytes_per_token,
                            prob=prob, selection_prob=selection_prob)

    def gemm(self, unit, name, M, K, N, layers, batch=1, weights=True, bias=False, prob=1.0, tokens=None,
             kv_read=0.0, kv_write=0.0):
        """A GEMM (M x K) @ (K x N); weights=True means the K x N operand is a parameter matrix."""
        wb = (K * N + (N if bias else 0)) * self.wbytes if weights else 0.0
        self.rows.append(dict(
            unit=unit, name=name, engine="matrix", M=float(M), N=float(N), K=float(K), batch=float(batch),
            elements=0.0, flops=2.0 * M * N * K * batch, weight_bytes=wb,
            act_in_bytes=M * K * batch * self.abytes + (0.0 if weights or kv_read else K * N * batch * self.abytes),
            act_out_bytes=M * N * batch * self.abytes, kv_read_bytes=kv_read, kv_write_bytes=kv_write,
            prob=prob, tokens=float(M if tokens is None else tokens), layers=layers))

    def vector(self, unit, name, elements, flops_per_element, layers, weight_elements=0.0, prob=1.0,
               tokens=0.0, reads_per_element=1.0):
        self.rows.append(dict(
            unit=unit, name=name, engine="vector", M=0.0, N=0.0, K=0.0, batch=1.0, elements=float(elements),
            flops=float(elements) * flops_per_element, weight_bytes=weight_elements * self.wbytes,
            act_in_bytes=elements * reads_per_element * self.abytes, act_out_bytes=elements * self.abytes,
            kv_read_bytes=0.0, kv_write_bytes=0.0, prob=prob, tokens=float(tokens), layers=layers))


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


def extract_transformer(cfg: ModelConfig, phase: str = "decode", batch: int = 1, context: int = 2048,
                        precision: str = "bf16", routing: dict | None = None, per_layer: bool = False,
                        seed: int = 0) -> Workload:
    """Operator trace and unit graph of one step of ``cfg`` (see module docstring)."""
    if phase not in PHASES:
        raise WorkloadError(f"unknown phase {phase!r}; allowed: {', '.join(PHASES)}")
    if batch < 1 or context < 1:
        raise WorkloadError(f"batch and context must be >= 1, got batch={batch}, context={context}")
    routing = dict(routing or {})
    wbytes = bytes_per_element(precision)
    abytes = max(wbytes, 1.0)
    b = _Builder(wbytes, abytes)

    h, hd = cfg.hidden, cfg.head_dim
    q_len = context if phase == "prefill" else 1
    T = batch * q_len
    kv_len = context
    group = cfg.heads // cfg.kv_heads
    qkv_width = (cfg.heads + 2 * cfg.kv_heads) * hd
    kv_per_token_layer = 2 * cfg.kv_heads * hd * abytes

    stages: list[dict] = []

    def new_stage(name: str, repeat: int) -> int:
        after = (len(stages) - 1,) if stages else ()
        stages.append(dict(stage=len(stages), name=name, repeat=repeat, prob=1.0, after=after))
        return len(stages) - 1

    # Embedding: lookup reads T rows of the table (plus learned positions for gpt2).
    s = new_stage("embedding", 1)
    embed_params = cfg.vocab * h + cfg.learned_positions * h
    b.unit("embed", "embedding", s, 1, embed_params)
    b.vector("embed", "embed_lookup", T * h, 0, 1, weight_elements=T * h * (2 if cfg.learned_positions else 1),
             tokens=T, reads_per_element=0.0)
    prev_units = ["embed"]

    for g, (first, count) in enumerate(_layer_groups(cfg, per_layer)):
        tag = f"L{first}" if count == 1 else f"L{first}-{first + count - 1}"
        moe = cfg.moe_layers[first]
        # ---- attention unit (and the MoE router, which runs where attention runs) ----
        s = new_stage(f"{tag}.attention", count)
        attn = f"{tag}.attn"
        bias = cfg.attention_bias
        attn_params = h * qkv_width + cfg.heads * hd * h + h     # projections and the input norm
        if bias:
            attn_params += qkv_width + h + h              # qkv and o biases, LayerNorm bias
        if moe:
            attn_params += h * cfg.experts
        b.unit(attn, "attention", s, count, attn_params, kv_bytes_per_token=kv_per_token_layer * count)
        b.vector(attn, "attn_norm", T * h, RMSNORM_FLOPS_PER_ELEMENT, count, weight_elements=h, tokens=T)
        b.gemm(attn, "qkv_proj", T, h, qkv_width, count, bias=bias, tokens=T,
               kv_write=T * kv_per_token_layer)
        if not cfg.learned_positions:
            b.vector(attn, "rope", T * (cfg.heads + cfg.kv_heads) * hd, ROPE_FLOPS_PER_ELEMENT, count, tokens=T)
        kv_read = batch * kv_len * cfg.kv_heads * hd * abytes if phase == "decode" else 0.0
        b.gemm(attn, "attn_score", q_len * group, hd, kv_len, count, batch=batch * cfg.kv_heads, weights=False,
               tokens=T, kv_read=kv_read)
        b.vector(attn, "softmax", batch * cfg.heads * q_len * kv_len, SOFTMAX_FLOPS_PER_ELEMENT, count, tokens=T)
        b.gemm(attn, "attn_context", q_len * group, kv_len, hd, count, batch=batch * cfg.kv_heads, weights=False,
               tokens=T, kv_read=kv_read)
        b.gemm(attn, "o_proj", T, cfg.heads * hd, h, count, bias=bias, tokens=T)
        b.vector(attn, "attn_residual", T * h, 1, count, tokens=T, reads_per_element=2.0)
        if moe:
            b.gemm(attn, "router", T, h, cfg.experts, count, tokens=T)
            b.vector(attn, "router_topk", T * cfg.experts, math.log2(max(cfg.experts, 2)), count, tokens=T)
        for prev in prev_units:
            b.graph.add_edge(prev, attn, bytes=_sent_bytes(b, prev, T, h, abytes), repeat=1)

        # ---- FFN: dense, or routed experts (+ shared experts) ----
        s = new_stage(f"{tag}.{'moe' if moe else 'ffn'}", count)
        ffn_units: list[tuple[str, float]] = []       # (unit, expected tokens per step)
        if moe:
            q = selection_probabilities(cfg.experts, cfg.top_k, routing.get("distribution", "uniform"),
                                        routing.get("s", 1.0), routing.get("seed", seed), layer=first)
            touched = touch_probability(q, T)
            for e in range(cfg.experts):
                unit = f"{tag}.e{e}"
                tokens = T * q[e]
                tokens_if_run = tokens / touched[e] if touched[e] > 0 else 0.0
                b.unit(unit, "expert", s, count, _ffn_params(cfg, cfg.expert_width), expert=e,
                       prob=float(touched[e]), selection_prob=float(q[e]))
                _ffn_ops(b, cfg, unit, tokens_if_run, cfg.expert_width, count, prob=float(touched[e]))
                ffn_units.append((unit, tokens))
        else:
            unit = f"{tag}.ffn"
            norm_params = h * (2 if cfg.attention_bias else 1)
            b.unit(unit, "ffn", s, count, _ffn_params(cfg, cfg.ffn_width) + norm_params)
            b.vector(unit, "ffn_norm", T * h, RMSNORM_FLOPS_PER_ELEMENT, count, weight_elements=h, tokens=T)
            _ffn_ops(b, cfg, unit, T, cfg.ffn_width, count)
            ffn_units.append((unit, T))
        if moe:   # the post-attention norm runs with the router, before dispatch
            b.vector(attn, "ffn_norm", T * h, RMSNORM_FLOPS_PER_ELEMENT, count, weight_elements=h, tokens=T)
            b.graph.nodes[attn]["params"] += h * count
            b.graph.nodes[attn]["weight_bytes"] += h * count * wbytes
        for unit, tokens in ffn_units:
            b.graph.add_edge(attn, unit, bytes=tokens * h * abytes, repeat=count)
            if count > 1:   # output returns to the next layer of the same group
                b.graph.add_edge(unit, attn, bytes=tokens * h * abytes, repeat=count - 1)
        prev_units = [u for u, _ in ffn_units]

    s = new_stage("lm_head", 1)
    lm_params = (0 if cfg.tied_embeddings else cfg.vocab * h) + h * (2 if cfg.attention_bias else 1)
    b.unit("lm_head", "lm_head", s, 1, lm_params)
    b.vector("lm_head", "final_norm", batch * h, RMSNORM_FLOPS_PER_ELEMENT, 1, weight_elements=h, tokens=batch)
    b.gemm("lm_head", "lm_head", batch, h, cfg.vocab, 1, tokens=batch)
    for prev in prev_units:
        b.graph.add_edge(prev, "lm_head", bytes=_sent_bytes(b, prev, T, h, abytes), repeat=1)
    if cfg.tied_embeddings:   # the LM head reads the embedding table: it needs its own copy where it runs
        b.graph.nodes["lm_head"]["weight_bytes"] += cfg.vocab * h * wbytes

    ops = pd.DataFrame(b.rows, columns=OP_COLUMNS)
    stage_table = pd.DataFrame(stages)
    summary = _summary(cfg, b.graph, ops, phase, batch, context, precision, kv_per_token_layer)
    return Workload(name=cfg.name, phase=phase, batch=batch, context=context, precision=precision,
                    tokens_per_step=T, ops=ops, graph=b.graph, stages=stage_table,
                    scenarios=[(1.0, tuple(stage_table["stage"]))], summary=summary)


def _ffn_params(cfg: ModelConfig, width: int) -> float:
    mats = 3 if cfg.gated_ffn else 2
    bias = (width + cfg.hidden) if cfg.attention_bias else 0
    return mats * cfg.hidden * width + bias


def _ffn_ops(b: _Builder, cfg: ModelConfig, unit: str, tokens: float, width: int, layers: int,
             prob: float = 1.0):
    up = 2 * width if cfg.gated_ffn else width
    bias = cfg.attention_bias
    b.gemm(unit, "gate_up_proj" if cfg.gated_ffn else "up_proj", tokens, cfg.hidden, up, layers, bias=bias,
           prob=prob, tokens=tokens)
    b.vector(unit, "activation", tokens * width, ACTIVATION_FLOPS_PER_ELEMENT, layers, prob=prob, tokens=tokens,
             reads_per_element=2.0 if cfg.gated_ffn else 1.0)
    b.gemm(unit, "down_proj", tokens, width, cfg.hidden, layers, bias=bias, prob=prob, tokens=tokens)
    b.vector(unit, "ffn_residual", tokens * cfg.hidden, 1, layers, prob=prob, tokens=tokens, reads_per_element=2.0)


def _sent_bytes(b: _Builder, unit: str, T: float, h: int, abytes: float) -> float:
    """Activation bytes a unit hands to the next stage: its expected tokens times the hidden width."""
    node = b.graph.nodes[unit]
    tokens = T * node["selection_prob"] if node["kind"] == "expert" else T
    return tokens * h * abytes


def _summary(cfg, graph, ops, phase, batch, context, precision, kv_per_token_layer) -> dict:
    params = sum(graph.nodes[u]["params"] for u in graph.nodes)
    expert_params = sum(graph.nodes[u]["params"] for u in graph.nodes if graph.nodes[u]["kind"] == "expert")
    active = params - expert_params + (cfg.top_k / cfg.experts * expert_params if cfg.experts else 0.0)
    weighted = ops["layers"] * ops["prob"]
    experts_per_layer = cfg.experts if cfg.is_moe else 0
    return dict(
        model=cfg.name, model_type=cfg.model_type, phase=phase, batch=batch, context=context,
        precision=precision, total_params=float(params), active_params_per_token=float(active),
        kv_cache_bytes_per_token=float(kv_per_token_layer * cfg.layers),
        flops_per_step=float((ops["flops"] * weighted).sum()),
        weight_bytes_per_step=float((ops["weight_bytes"] * weighted).sum()),
        kv_bytes_per_step=float(((ops["kv_read_bytes"] + ops["kv_write_bytes"]) * weighted).sum()),
        experts=int(experts_per_layer), top_k=int(cfg.top_k),
        expected_distinct_experts_per_layer=float(np.mean(
            [graph.nodes[u]["prob"] for u in graph.nodes if graph.nodes[u]["kind"] == "expert"]) * cfg.experts)
        if experts_per_layer else 0.0,
        units=graph.number_of_nodes())
