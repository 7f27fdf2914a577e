"""A parallel training strategy: tensor, pipeline, data and expert parallel degrees, batches, memory savers.

`check` refuses a strategy the model and system cannot run, naming the flag and what is allowed
(Megatron-LM's constraints: tp divides the heads and the FFN width, tp x pp x dp the devices; the global
batch is a whole number of micro-batches per data-parallel rank; interleaving needs the layers of a stage
to split into ``interleave`` chunks). A pp that does not divide the layers splits them unevenly
(dse.training.stages: ``pp_layers`` given, or balanced by default), each stage in ``interleave`` chunks
of whole layers.
"""
from __future__ import annotations

from dataclasses import dataclass

from workloads.training import RECOMPUTE

from ..errors import StudyError
from .stages import split

MAX_DEGREE = 1 << 20
ATTENTION = ("fused", "unfused")


@dataclass(frozen=True)
class Strategy:
    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    seq: int
    ep: int = 1
    interleave: int = 1              # model chunks per pipeline stage (Megatron's interleaved 1F1B)
    recompute: str = "none"          # none | selective | full
    sequence_parallel: bool = False
    zero: int = 0                    # ZeRO stage 0-3 over the data-parallel ranks
    precision: str = "bf16"
    overlap_grad_reduce: bool = False   # Megatron-LM's --overlap-grad-reduce
    attention: str = "fused"         # fused (FlashAttention: no scores kept, recomputed in the backward) | unfused
    pp_layers: tuple = ()            # layers per stage: (first, last) or one per stage; () = even or balanced

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        """Micro-batches each data-parallel rank runs per iteration."""
        return self.global_batch // (self.micro_batch * self.dp)


def _divisors(n: int) -> str:
    found = [d for d in range(1, min(n, 4096) + 1) if n % d == 0]
    return ", ".join(map(str, found[:12])) + (" ..." if len(found) > 12 else "")


def check(s: Strategy, layers: int, heads: int, ffn_width: int, experts: int, devices: int | None,
          kv_heads: int | None = None) -> None:
    """A `StudyError` naming the flag when the strategy cannot run (see module docstring)."""
    for flag, value in (("--tp", s.tp), ("--pp", s.pp), ("--dp", s.dp), ("--ep", s.ep),
                        ("--micro-batch", s.micro_batch), ("--global-batch", s.global_batch), ("--seq", s.seq),
                        ("--interleave", s.interleave)):
        if not 1 <= value <= MAX_DEGREE:
            raise StudyError(f"must be a whole number from 1 to {MAX_DEGREE:,}, got {value}", key=flag)
    if s.recompute not in RECOMPUTE:
        raise StudyError(f"unknown value {s.recompute!r}; allowed: {', '.join(RECOMPUTE)}", key="--recompute")
    if s.attention not in ATTENTION:
        raise StudyError(f"unknown value {s.attention!r}; allowed: {', '.join(ATTENTION)}", key="--attention")
    if s.zero not in (0, 1, 2, 3):
        raise StudyError(f"must be 0, 1, 2 or 3, got {s.zero}", key="--zero")
    if heads % s.tp:
        raise StudyError(f"must divide the model's {heads} attention heads; allowed: {_divisors(heads)}", key="--tp")
    if kv_heads and kv_heads % s.tp:
        raise StudyError(f"must divide the model's {kv_heads} key-value heads (grouped-query attention); allowed: "
                         f"{_divisors(kv_heads)}", key="--tp")
    if ffn_width % s.tp:
        raise StudyError(f"must divide the model's FFN width {ffn_width}; allowed: {_divisors(ffn_width)}", key="--tp")
    if s.pp > layers:
        raise StudyError(f"must be at most the model's {layers} layers (one a stage at least)", key="--pp")
    counts = split(layers, s.pp, s.pp_layers) if s.pp_layers else None
    even = layers % s.pp == 0 and (counts is None or len(set(counts)) == 1)
    if not even and s.interleave > min(counts or (layers // s.pp,)):
        raise StudyError(f"must be at most the {min(counts or (layers // s.pp,))} layers of the shallowest stage "
                         "(an uneven split's chunks)", key="--interleave")
    if even and (layers // s.pp) % s.interleave:
        raise StudyError(f"must divide the {layers // s.pp} layers of a pipeline stage; allowed: "
                         f"{_divisors(layers // s.pp)}", key="--interleave")
    if s.interleave > 1 and s.pp == 1:
        raise StudyError("interleaving needs pipeline parallelism (--pp > 1)", key="--interleave")
    if devices is not None and s.devices != devices:
        raise StudyError(f"tp x pp x dp = {s.tp} x {s.pp} x {s.dp} = {s.devices} must equal the {devices} devices",
                         key="--dp")
    if s.global_batch % (s.micro_batch * s.dp):
        raise StudyError(f"{s.global_batch} is not a multiple of micro-batch x dp = {s.micro_batch} x {s.dp}",
                         key="--global-batch")
    if s.ep > 1 and (experts == 0 or experts % s.ep or s.dp % s.ep):
        raise StudyError(f"must divide the model's {experts} experts and the data-parallel degree {s.dp}"
                         if experts else "the model has no experts: use --ep 1", key="--ep")
    if s.interleave > 1 and s.micro_batches % s.pp:
        raise StudyError(f"the interleaved schedule needs the {s.micro_batches} micro-batches per rank to be a "
                         f"multiple of --pp {s.pp}", key="--global-batch")
