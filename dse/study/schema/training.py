"""Study schema: the ``training`` section (``workload.phase: train``; dse.training.package).

A design is trained as the device of data-parallel training: each package (or, with a ``system``
section, each pipeline stage x expert-parallel rank of a replica, the replicas being the data-parallel
ranks) runs micro-batches of ``workload.batch`` sequences of ``workload.context`` tokens, forward and
backward, under a 1F1B pipeline schedule, then all-reduces its gradients and takes an Adam step.

* ``global_batch``: sequences per iteration (a multiple of ``workload.batch`` x the replicas);
* ``workload.tokens`` (in the workload section): the training run's token budget (time, energy and
  carbon to train);
* ``recompute``: none, selective (the attention core) or full (Korthikanti et al., MLSys 2023);
* ``zero``: ZeRO stage 0-3 of the optimizer state over the replicas (Rajbhandari et al., SC 2020);
* ``overlap_grad_reduce``: the gradient all-reduce runs behind the last micro-batch's backward.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import StrictModel

#: sequences per iteration: 2^20 (published runs use up to a few thousand)
MAX_GLOBAL_BATCH = 1 << 20


class TrainingSpec(StrictModel):
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH, description="sequences per training iteration")
    recompute: Literal["none", "selective", "full"] = "none"
    zero: Literal[0, 1, 2, 3] = 0
    overlap_grad_reduce: bool = False
