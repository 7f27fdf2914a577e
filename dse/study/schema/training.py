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
* ``overlap_grad_reduce``: the gradient all-reduce runs behind the last micro-batch's backward;
* ``resilience``: failures, checkpoints and restarts (dse.training.resilience, `dse train`'s flags):
  ``failures_per_day`` or ``mtbf_hours`` of the whole job, or ``failure_rates`` per device (package), node
  and job per day, scaled by each design's packages; ``checkpoint_every`` (auto: Daly's interval, or
  minutes), ``storage`` (a memory.storage tier), ``restart_minutes``, ``async_checkpoint``. The search's
  ``time_to_train`` objective then includes lost work and restarts.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

import memory

from .common import StrictModel

#: sequences per iteration: 2^20 (published runs use up to a few thousand)
MAX_GLOBAL_BATCH = 1 << 20


#: failures per day of anything (the CLI's bound, dse.training.systems.MAX_FAILURES_PER_DAY)
MAX_FAILURES_PER_DAY = 1e5
MAX_MINUTES = 1e6


class FailureRatesSpec(StrictModel):
    """Failures per day of each device (package), node and the job itself."""

    #: failures per device (package) per day
    device_per_day: float = Field(default=0.0, ge=0, le=MAX_FAILURES_PER_DAY)
    #: failures per node per day
    node_per_day: float = Field(default=0.0, ge=0, le=MAX_FAILURES_PER_DAY)
    #: failures of the job itself per day
    job_per_day: float = Field(default=0.0, ge=0, le=MAX_FAILURES_PER_DAY)


class ResilienceSpec(StrictModel):
    """Failures, checkpoints and restarts of the training job (module docstring)."""

    #: failures of the whole job per day
    failures_per_day: float | None = Field(default=None, ge=0, le=MAX_FAILURES_PER_DAY)
    #: mean time between the job's failures, hours (instead of failures_per_day)
    mtbf_hours: float | None = Field(default=None, gt=0, le=1e9)
    #: failures per day of each device, node and the job (instead of the two above)
    failure_rates: FailureRatesSpec | None = None
    #: auto (the interval that loses least) or minutes between checkpoints
    checkpoint_every: Literal["auto"] | float = "auto"
    #: where checkpoints are written (a storage preset, memory/data/storage.yaml)
    storage: str = "tectonic"
    #: time to restart the job after a failure, minutes
    restart_minutes: float = Field(default=10.0, ge=0, le=MAX_MINUTES)
    #: write checkpoints behind the computation
    async_checkpoint: bool = False

    @field_validator("checkpoint_every")
    @classmethod
    def _minutes(cls, value):
        if value != "auto" and not 0 < value <= MAX_MINUTES:
            raise ValueError(f"auto or minutes between checkpoints in (0, {MAX_MINUTES:g}], got {value!r}")
        return value

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str) -> str:
        if value not in memory.storage_names():
            raise ValueError(f"unknown storage {value!r}; allowed: {', '.join(memory.storage_names())}")
        return value

    @model_validator(mode="after")
    def _one_rate(self):
        given = [k for k in ("failures_per_day", "mtbf_hours", "failure_rates") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of failures_per_day, mtbf_hours, failure_rates (got {', '.join(given)})")
        return self


class TrainingSpec(StrictModel):
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH, description="sequences per training iteration")
    #: activation recomputation: none, selective (attention) or full
    recompute: Literal["none", "selective", "full"] = "none"
    #: ZeRO stage: optimizer states (1), gradients (2) and parameters (3) sharded over data-parallel ranks
    zero: Literal[0, 1, 2, 3] = 0
    #: overlap the gradient all-reduce with the backward pass
    overlap_grad_reduce: bool = False
    #: failures, checkpoints and restarts of the run
    resilience: ResilienceSpec | None = None
