"""Memory of one training device: the tensors each layer keeps for its backward pass, the logits, and the
weights, gradients and optimizer state present at the peak.

Activations, bytes per token per layer, summed over the tensors the backward pass reads (Korthikanti et
al., "Reducing Activation Recomputation in Large Transformer Models", MLSys'23, section 4.1, generalised
from GPT's 4h MLP and multi-head attention to any widths):

* attention block: the norm's input (``residual_bytes`` x h: 2 in Megatron, 4 when the residual stream
  is fp32 as under torch.autocast over fp32 weights), the QKV GEMM's input 2h, Q, K and V 2(q + 2kv)
  (grouped-query attention: kv < h), the output projection's input 2h, a dropout mask h;
* the attention core: *unfused*, the softmax output 2as per token (a heads, s keys) and with attention
  dropout its mask as and output 2as (Korthikanti's 5as); *fused* (FlashAttention, Dao et al. 2022,
  FlashAttention-2 2023), no scores: the output (already the projection's input) and the softmax
  statistics, 4 bytes per head;
* MLP block: the norm's input, the first GEMM's input 2h, a dropout mask h, and per FFN width f: GeLU's
  input and the second GEMM's input 2f + 2f; gated (SwiGLU) the gate and up outputs 4f and the down
  GEMM's input 2f (a fused SwiGLU kernel keeps no more); MoE: top_k routed experts' widths plus the
  shared experts';
* an eager stack (PyTorch modules one at a time) keeps copies a fused one does not: the rotated Q and K
  (RoPE) 2(q + kv), the attention output before its transpose 2h, and SiLU's output 2f.
For GPT (f = 4h, MHA, dropout, unfused) this is Korthikanti's ``sbh (34 + 5as/h)``; tensor parallelism
over t divides all but the norm inputs, the GEMM inputs of the norms' outputs and the dropout masks
(``10 + 24/t``), sequence parallelism divides those too; selective recomputation drops the unfused
scores, full recomputation keeps the layer's input only (Korthikanti Table 2).

The peak comes either at the end of the forward pass (every activation, the logits and their gradient)
or at the end of the backward pass (every gradient): `device_bytes` takes the larger, with the
weights, gradients and optimizer state each stack holds at each point (dse.training.stacks).
"""
from __future__ import annotations

from typing import NamedTuple

import workloads

ACTIVATION_BYTES = 2.0        # 16-bit activations (bf16 / fp16 autocast and Megatron alike)
STATS_BYTES = 4.0             # FlashAttention's fp32 log-sum-exp per head and query


class Widths(NamedTuple):
    """Elements one token has in the attention block's tensors."""

    q: float
    k: float
    v: float
    out: float


def _widths(cfg: workloads.ModelConfig) -> Widths:
    """Query, key, value and attention-output widths (MLA: the expanded heads of training)."""
    if cfg.mla:
        qk = cfg.heads * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
        return Widths(float(qk), float(qk), float(cfg.heads * cfg.v_head_dim), float(cfg.heads * cfg.v_head_dim))
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return Widths(float(q), float(kv), float(kv), float(q))


def mlp_width(cfg: workloads.ModelConfig) -> float:
    """FFN width a token runs through in an average layer (MoE: top_k routed experts and the shared)."""
    if not cfg.is_moe:
        return float(cfg.ffn_width)
    share = sum(cfg.moe_layers) / cfg.layers
    moe = cfg.top_k * cfg.expert_width + cfg.shared_experts * cfg.shared_width
    return share * moe + (1.0 - share) * cfg.ffn_width


def activation_bytes_per_token_layer(cfg: workloads.ModelConfig, seq: int, tp: int = 1,
                                     sequence_parallel: bool = False, recompute: str = "none",
                                     attention: str = "fused", residual_bytes: float = 2.0,
                                     eager: bool = False, dropout: bool | None = None) -> float:
    """Bytes one token keeps in one layer on one of ``tp`` devices (module docstring). ``dropout``:
    default for GPT-2/3 models (trained with dropout 0.1), none for the others."""
    if recompute not in workloads.training.RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(workloads.training.RECOMPUTE)}, got {recompute!r}")
    if attention not in ("fused", "unfused"):
        raise ValueError(f"attention must be fused or unfused, got {attention!r}")
    a = ACTIVATION_BYTES
    h = float(cfg.hidden)
    split = tp if sequence_parallel else 1          # what stays whole under tp without sequence parallelism
    if recompute == "full":
        return residual_bytes * h / split
    drop = cfg.model_type == "gpt2" if dropout is None else dropout
    w = _widths(cfg)
    q, k, o = w.q, w.k, w.out
    f = mlp_width(cfg)
    whole = 2.0 * residual_bytes * h + 2.0 * a * h + (2.0 * h if drop else 0.0)   # norms, GEMM inputs, masks
    sharded = a * (q + k + w.v) + a * o                                            # Q, K, V; o_proj input
    sharded += a * (3.0 * f if cfg.gated_ffn else 2.0 * f)                       # MLP intermediates
    if eager:
        sharded += a * (q + k) * (0 if cfg.learned_positions else 1) + a * o + (a * f if cfg.gated_ffn else 0.0)
    if attention == "fused":
        sharded += STATS_BYTES * cfg.heads
    elif recompute != "selective":
        sharded += a * cfg.heads * seq * (2.5 if drop else 1.0)                  # softmax (+ mask, dropout)
    return whole / split + sharded / tp


def logits_bytes_per_token(cfg: workloads.ModelConfig, tp: int, logit_bytes: float,
                           residual_bytes: float = 2.0) -> float:
    """The last stage's final norm input, LM head input and logits (``logit_bytes`` per vocabulary entry:
    what the stack's loss keeps), per token on one of ``tp`` devices."""
    return residual_bytes * cfg.hidden + ACTIVATION_BYTES * cfg.hidden + logit_bytes * cfg.vocab / tp


def state_bytes_per_param(stack, zero: int, dp: int) -> tuple[float, float]:
    """(bytes per parameter at the end of the forward pass, at the end of the backward pass): weights,
    gradients and optimizer state the stack holds at each point, ZeRO's partitions over ``dp`` ranks
    (Rajbhandari et al. SC'20, 3.1: stage 1 the optimizer state, 2 the gradients, 3 the weights)."""
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    states = stack.optimizer_bytes / (dp if zero >= 1 else 1)
    grads = stack.gradient_bytes / (dp if zero >= 2 else 1)
    weights = stack.weight_bytes / (dp if zero >= 3 else 1)
    casts = stack.cast_bytes / (dp if zero >= 3 else 1)
    forward = weights + casts + states + (grads if stack.persistent_gradients else 0.0)
    return forward, weights + states + grads


def device_bytes(params: float, stack, zero: int, dp: int, activations: float, logits: float) -> float:
    """Peak memory of one device: the larger of the forward's end (state, activations of the
    micro-batches in flight, logits) and the backward's end (state with every gradient)."""
    forward, backward = state_bytes_per_param(stack, zero, dp)
    return max(params * forward + activations + logits, params * backward)
