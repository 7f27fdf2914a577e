"""Closed forms of GPT-style transformer training: FLOPs, parameters, activation and optimizer memory.

Sources, each formula checked in tests/test_training_formulas.py:

* Model FLOPs per iteration (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", SC'21, section 5.1): a GEMM of m x n by n x k is 2mnk FLOPs; a forward pass
  of batch B, sequence s, l layers of width h, vocabulary V is 24 B s l h^2 (1 + s/6h) + 2 B s h V; the
  backward pass is twice that; full recomputation adds one more forward of the layers:
  ``96 B s l h^2 (1 + s/6h + V/16lh)`` with recomputation, ``72 B s l h^2 (1 + s/6h + V/12lh)`` without;
  selective recomputation (Korthikanti et al. 2023) adds the attention core's forward, ``4 B s^2 h l``.
  MFU divides the FLOPs *without* recomputation by time x devices x peak (Chowdhery et al., PaLM 2022,
  appendix B; Korthikanti et al. 2023 report "model FLOPs utilization" the same way).
* Parameters (same paper, section 5.1): ``12 l h^2 (1 + 13/12h + (V + s)/12lh)``.
* Activation memory per layer in bytes (Korthikanti et al., "Reducing Activation Recomputation in Large
  Transformer Models", MLSys'23, section 4 and Table 2), 16-bit activations, a attention heads:
  no parallelism ``s b h (34 + 5 a s / h)``; tensor parallel t ``s b h (10 + 24/t + 5 a s / h t)``;
  with sequence parallelism ``s b h / t (34 + 5 a s / h)``; with selective recomputation (the attention
  core recomputed) the ``5 a s / h`` term goes; full recomputation keeps only the layer input ``2 s b h``
  (divided by t with sequence parallelism).
* Optimizer state (Rajbhandari et al., "ZeRO", SC'20, section 3.1): mixed-precision Adam keeps 2 bytes of
  16-bit weights, 2 of gradients and K = 12 of fp32 master weights, momentum and variance per
  parameter; ZeRO stage 1 partitions the K bytes over the data-parallel ranks, stage 2 the gradients too,
  stage 3 the weights as well.
"""
from __future__ import annotations

RECOMPUTE = ("none", "selective", "full")


def model_flops(batch: float, seq: float, layers: float, hidden: float, vocab: float,
                recompute: bool | str = False) -> float:
    """FLOPs of one training iteration of a GPT model (Megatron-LM's count, module docstring).
    ``recompute`` True or "full": the layers' forward once more; "selective": the attention core's
    forward once more, Q K^T and the weighting of V, 2 B s^2 h each a layer: ``+ 4 B s^2 h l``
    (Korthikanti et al.'s hardware FLOPs count it as the core's forward and backward, ``1 + s/3h``
    for ``1 + s/6h``: tests/test_training.py reads that from their Table 5's MFU and HFU)."""
    if recompute not in (False, True, *RECOMPUTE):
        raise ValueError(f"recompute must be a bool or one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    if recompute is True or recompute == "full":
        return 96.0 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    core = 4.0 * batch * seq ** 2 * hidden * layers if recompute == "selective" else 0.0
    return 72.0 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden)) + core


def gpt_params(layers: float, hidden: float, vocab: float, seq: float) -> float:
    """Parameters of a GPT model (Megatron-LM's count: layers, biases, word and position embeddings)."""
    return 12.0 * layers * hidden ** 2 * (1 + 13 / (12 * hidden) + (vocab + seq) / (12 * layers * hidden))


def activation_bytes_per_layer(seq: float, micro_batch: float, hidden: float, heads: float, tp: int = 1,
                               sequence_parallel: bool = False, recompute: str = "none") -> float:
    """Activation memory one transformer layer keeps for its backward pass (Korthikanti et al. 2023)."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    sbh = seq * micro_batch * hidden
    if recompute == "full":
        return 2.0 * sbh / (tp if sequence_parallel else 1)
    attention = 0.0 if recompute == "selective" else 5.0 * heads * seq / (hidden * tp)
    if sequence_parallel:
        return sbh * (34.0 / tp + attention)
    return sbh * (10.0 + 24.0 / tp + attention)


def optimizer_bytes_per_param(zero: int, dp: int) -> float:
    """Bytes per parameter of weights, gradients and Adam state on one device under ZeRO stage ``zero``
    with ``dp`` data-parallel ranks (mixed precision: 2 + 2 + 12, ZeRO section 3.1)."""
    if zero not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {zero!r}")
    weights, grads, states = 2.0, 2.0, 12.0
    states /= dp if zero >= 1 else 1
    grads /= dp if zero >= 2 else 1
    weights /= dp if zero >= 3 else 1
    return weights + grads + states
