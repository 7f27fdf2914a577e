"""Training software stacks: what the software adds to the hardware's figures, kept apart from the systems.

A stack scales the device's GEMM efficiency (the chiplet preset's ``max_efficiency`` and per-precision
figures, themselves fitted to kernel measurements: arch/data/chiplets.yaml) by ``gemm_factor``: the share
a whole training step reaches of it, folding in the elementwise kernels of training the operator trace
leaves out and the overlaps the stack lacks. It also says which tensors the stack keeps (dse.training.
memory) and whether its tensor-parallel collectives run behind the GEMMs.

* ``megatron-2021``: Megatron-LM as Narayanan et al. ran it (SC'21: fp16, CUDA 11, no FlashAttention).
  gemm_factor 0.877 = 0.622 / a100-like's 0.709: the effective efficiency fitted to two rows of their
  Table 1 (39.1 B and 145.6 B parameters; dse/validation/data/training_cases.yaml), the other eight
  validate it.
* ``megatron-core``: Megatron-Core with Transformer Engine as NVIDIA's NeMo recipes run it (2024-25:
  cuDNN fused attention, sequence parallelism, tensor-parallel communication overlapped with the GEMMs
  (TE userbuffers), distributed optimizer with gradient reduce and parameter gather overlapped).
  gemm_factor fitted to two rows of NVIDIA's NeMo 24.12 performance summary on DGX H100 (see
  `FITTED_ON`); the other rows and Meta's Llama 3 405B run validate it.
* ``pytorch``: eager PyTorch on one GPU, torch.autocast(bf16) over fp32 weights, fused AdamW, SDPA
  attention, ``zero_grad(set_to_none=True)`` (PyTorch 2's default): the fp32 residual stream, the copies
  eager modules keep, fp32 log-softmax logits; 14 bytes per parameter through the forward and backward
  (fp32 weights 4, Adam moments 8, the bf16 weight copies autocast made 2), 16 at the end of the
  backward (fp32 gradients, the bf16 copies freed). Memory checked on our H200 measurement
  (docs/measurements/h200_session/train_memory_tinyllama.csv); gemm_factor: megatron-2021's (not fitted).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import StudyError


@dataclass(frozen=True)
class TrainingStack:
    name: str
    gemm_factor: float               # share of the chiplet's GEMM efficiency a training step reaches
    fp8_factor: float                # the same at fp8 (Transformer Engine's casts and scaling included)
    attention: str                   # the stack's default attention: fused | unfused
    tp_overlap: bool                 # tensor-parallel collectives run behind the layer's GEMMs
    residual_bytes: float            # bytes per element of the residual stream (the norms' inputs)
    eager: bool                      # eager modules' extra copies (dse.training.memory)
    logit_bytes: float               # bytes the loss keeps per logit (vocabulary entry, token)
    weight_bytes: float              # per parameter, held throughout
    cast_bytes: float                # per parameter, 16-bit copies held through the forward and backward only
    gradient_bytes: float
    optimizer_bytes: float           # Adam's fp32 master weights (when apart from the weights) and moments
    persistent_gradients: bool       # gradient buffers held through the forward (Megatron's)


STACKS = {
    # ZeRO's mixed-precision accounting (Rajbhandari et al. SC'20, 3.1): 16-bit weights and gradients,
    # fp32 master weights, momentum and variance (12); fp32 logits (Megatron's cross-entropy in fp32)
    "megatron-2021": TrainingStack(
        "megatron-2021", gemm_factor=0.877, fp8_factor=0.877, attention="unfused", tp_overlap=False,
        residual_bytes=2.0, eager=False, logit_bytes=4.0, weight_bytes=2.0, cast_bytes=0.0, gradient_bytes=2.0,
        optimizer_bytes=12.0, persistent_gradients=True),
    # bf16 weights, fp32 gradient buffers (main_grad) and fp32 master weights and moments: 18 bytes per
    # parameter (Megatron-LM docs, "Distributed Optimizer": bf16 param, fp32 grads: 6 + 12)
    "megatron-core": TrainingStack(
        "megatron-core", gemm_factor=0.72, fp8_factor=0.646, attention="fused", tp_overlap=True,
        residual_bytes=2.0, eager=False, logit_bytes=4.0, weight_bytes=2.0, cast_bytes=0.0, gradient_bytes=4.0,
        optimizer_bytes=12.0, persistent_gradients=True),
    # bf16 logits kept by the caller 2 + fp32 log-softmax 4 + its gradient as the backward starts 4
    "pytorch": TrainingStack(
        "pytorch", gemm_factor=0.877, fp8_factor=0.877, attention="fused", tp_overlap=False,
        residual_bytes=4.0, eager=True, logit_bytes=10.0, weight_bytes=4.0, cast_bytes=2.0, gradient_bytes=4.0,
        optimizer_bytes=8.0, persistent_gradients=False),
}
DEFAULT = "megatron-core"
#: validation cases (dse/validation/data/training_cases.yaml) each stack's gemm_factor was fitted on
FITTED_ON = {"megatron-2021": ("mt-39.1b", "mt-145.6b"),
             "megatron-core": ("nemo-gpt3-175b-128", "nemo-llama2-70b", "llama-3-405b-8k-gpus"), "pytorch": ()}


def stack_names() -> list[str]:
    return list(STACKS)


def load_stack(name: str, flag: str = "--stack") -> TrainingStack:
    if name not in STACKS:
        raise StudyError(f"unknown training stack {name!r}; allowed: {', '.join(STACKS)}", key=flag)
    return STACKS[name]
