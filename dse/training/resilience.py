"""Training that survives failures: checkpoints to a storage tier, restarts, goodput (docs/training.md).

A synchronous job stops whole when any of its parts fails; it restarts from its last durable
checkpoint. Model, SI units:

* Failures: a Poisson process of rate ``lam`` per second of wall time for the job (``--failures-per-day``,
  ``--mtbf-hours``, or a system YAML's per-component rates scaled by the job's devices and nodes).
* Checkpoint: the model state needed to resume, weights and Adam's state (the stack's bytes per
  parameter), each device writing its shard as ZeRO and the model-parallel split leave it, spread over
  the data-parallel replicas (a fully parallel save, Megatron-core's distributed checkpointing), so the
  ``nodes`` write ``C`` bytes together: ``delta = latency + C / write_Bps(nodes)`` blocks training.
  Asynchronous (``--async-checkpoint``): training stops only while each device copies its shard to host
  memory (the host tier), then the node drains it to storage behind compute in ``D = C / write_Bps``;
  the checkpoint is durable ``D`` after the snapshot, and the interval is at least ``D``.
* Restart: ``R`` = the fixed part (``--restart-minutes``: rescheduling, re-initialisation, warm-up) plus
  reloading ``C`` from the tier; a failure during a restart starts it again.
* Interval: ``tau`` of training between checkpoints, ``c = tau + delta`` a cycle, rounded up to whole
  iterations. ``auto``: Daly's higher-order optimum (Daly, FGCS 22, 2006, eq. 37),
  ``sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + delta / 18M] - delta`` for ``delta < 2M`` (else ``M``),
  which reduces to Young's ``sqrt(2 delta M)`` (CACM 17, 1974) for ``delta << M``; ``M = 1 / lam``.
* Renewal reward over the segments between failures (``X ~ Exp(lam)``): a segment keeps the cycles whose
  checkpoint is durable, ``E[N] = e^{-lam (c + D)} / (1 - e^{-lam c})``; a restart takes
  ``(e^{lam R} - 1) / lam`` on average (Daly 2006, section 3). So
  ``effective_training_frac = lam tau e^{-lam (D + R)} / (e^{lam c} - 1)`` (with ``D = 0`` Daly's exact
  wall time) and the expected lost work per failure, rework plus restart, is
  ``1/lam - c E[N] + (e^{lam R} - 1)/lam``: to first order half a cycle plus the drain plus the restart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import memory

from ..errors import StudyError
from .strategy import Strategy
from .systems import MAX_FAILURES_PER_DAY, TrainingSystem

DAY_S = 86_400.0
MAX_MINUTES = 1e6


@dataclass(frozen=True)
class Resilience:
    """What the user asks for: a failure rate and a checkpoint policy (SI units)."""

    failures_per_s: float = 0.0
    checkpoint_every_s: float | None = None     # None: auto (Daly's interval; no checkpoints without failures)
    storage: str = "tectonic"
    restart_s: float = 600.0                    # fixed part: rescheduling, re-initialisation, warm-up
    async_checkpoint: bool = False
    host: str = "host-dram"                     # the tier an asynchronous snapshot goes to

    @property
    def active(self) -> bool:
        return self.failures_per_s > 0 or self.checkpoint_every_s is not None


@dataclass(frozen=True)
class Plan:
    """What `plan` computes for one job (seconds, bytes)."""

    checkpoint_bytes: float
    checkpoint_write_s: float          # training stopped per checkpoint
    checkpoint_drain_s: float          # asynchronous: to durable, behind compute (0 when blocking)
    checkpoint_interval_s: float       # training between checkpoints (inf: none)
    restart_s: float                   # reload and warm-up, one attempt
    failures_per_s: float
    lost_work_per_failure_s: float
    effective_training_frac: float
    young_interval_s: float
    daly_interval_s: float
    compute_frac: float                # of wall time spent running iterations (kept or redone)

    def as_dict(self, tokens_per_s: float) -> dict:
        mtbf = 1.0 / self.failures_per_s if self.failures_per_s > 0 else math.inf
        return {"failures_per_day": self.failures_per_s * DAY_S, "mtbf_hours": _finite_or_none(mtbf / 3600.0),
                "checkpoint_bytes": self.checkpoint_bytes, "checkpoint_write_s": self.checkpoint_write_s,
                "checkpoint_drain_s": self.checkpoint_drain_s, "checkpoint_interval_s": _finite_or_none(self.checkpoint_interval_s),
                "restart_s": self.restart_s, "lost_work_per_failure_s": _finite_or_none(self.lost_work_per_failure_s),
                "effective_training_frac": self.effective_training_frac,
                "goodput_tokens_per_s": tokens_per_s * self.effective_training_frac}


def _finite_or_none(value: float) -> float | None:
    """JSON has no infinity: none (no failures, no checkpoints) is null."""
    return value if math.isfinite(value) else None


def young_interval_s(delta: float, mtbf: float) -> float:
    """Young's first-order optimum, sqrt(2 delta M)."""
    return math.sqrt(2.0 * delta * mtbf)


def daly_interval_s(delta: float, mtbf: float) -> float:
    """Daly's higher-order optimum (2006, eq. 37): the time to compute between checkpoints."""
    if delta >= 2.0 * mtbf:
        return mtbf
    x = delta / (2.0 * mtbf)
    return math.sqrt(2.0 * delta * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def restart_wall_s(lam: float, restart: float) -> float:
    """Mean wall time of a restart that starts again on every failure during it: (e^{lam R} - 1) / lam."""
    if lam <= 0:
        return restart
    return math.inf if lam * restart > 700.0 else math.expm1(lam * restart) / lam


def durable_cycles(lam: float, cycle: float, drain: float) -> float:
    """Mean cycles a segment between failures keeps: sum over k >= 1 of P(X >= k c + D)."""
    return math.exp(-lam * (cycle + drain)) / -math.expm1(-lam * cycle)


def effective_frac(lam: float, tau: float, delta: float, drain: float, restart: float) -> float:
    """Kept training time over wall time (module docstring)."""
    if lam <= 0:
        return tau / (tau + delta) if math.isfinite(tau) else 1.0
    if not math.isfinite(tau) or lam * (tau + delta) > 700.0:       # no cycle ever completes (e^700: overflow)
        return 0.0
    return lam * tau * math.exp(-lam * (drain + restart)) / math.expm1(lam * (tau + delta))


def lost_work_s(lam: float, tau: float, delta: float, drain: float, restart: float) -> float:
    """Expected wall time a failure costs: the segment's work not yet durable, and the restart."""
    if lam <= 0:
        return 0.0
    cycle = tau + delta
    kept = cycle * durable_cycles(lam, cycle, drain) if math.isfinite(tau) else 0.0
    return 1.0 / lam - kept + restart_wall_s(lam, restart)


def checkpoint_bytes(params: float, system: TrainingSystem) -> float:
    """Bytes of the model state a job saves: weights and optimizer state (Adam's fp32 master and moments)
    per parameter as the stack keeps them; ZeRO shards them but the sum over the devices is the same."""
    stack = system.stack
    return params * (stack.weight_bytes + stack.optimizer_bytes)


def nodes_of(strategy: Strategy, system: TrainingSystem) -> int:
    return math.ceil(strategy.devices / system.gpus_per_node)


def job_failure_rate(failure_rates: dict, devices: int, nodes: int) -> float:
    """Failures per second of a job from per-component rates (per device, per node, per job, per day)."""
    return (failure_rates.get("device_per_day", 0.0) * devices + failure_rates.get("node_per_day", 0.0) * nodes
            + failure_rates.get("job_per_day", 0.0)) / DAY_S


def plan(r: Resilience, iteration_s: float, params: float, strategy: Strategy, system: TrainingSystem) -> Plan:
    """Checkpoint size, write and restart times, the interval, lost work and the effective training time
    of ``strategy`` on ``system`` (params: the model's parameters)."""
    return job_plan(r, iteration_s, checkpoint_bytes(params, system), nodes_of(strategy, system))


def job_plan(r: Resilience, iteration_s: float, size: float, nodes: int) -> Plan:
    """`plan` for a job of ``nodes`` nodes saving ``size`` bytes per checkpoint (module docstring)."""
    try:
        tier = memory.storage_preset(r.storage)
        host = memory.storage_preset(r.host)
    except memory.MemorySpecError as exc:
        raise StudyError(str(exc), key="--storage") from None
    durable_s = tier.write_s(size / nodes, nodes)
    if r.async_checkpoint:
        # each device copies its shard to its node's host memory; the node drains it behind compute
        delta, drain = host.write_s(size / nodes, nodes), durable_s
    else:
        delta, drain = durable_s, 0.0
    restart = r.restart_s + tier.read_s(size / nodes, nodes)
    lam = r.failures_per_s
    mtbf = 1.0 / lam if lam > 0 else math.inf
    young = young_interval_s(delta, mtbf) if lam > 0 else math.inf
    daly = daly_interval_s(delta, mtbf) if lam > 0 else math.inf
    tau = r.checkpoint_every_s if r.checkpoint_every_s is not None else daly
    if math.isfinite(tau) and math.isfinite(iteration_s) and iteration_s > 0:
        tau = max(tau, drain, iteration_s)
        tau = math.ceil(tau / iteration_s - 1e-9) * iteration_s          # checkpoints between iterations
    if not math.isfinite(tau):
        delta = drain = 0.0
    frac = effective_frac(lam, tau, delta, drain, restart)
    lost = lost_work_s(lam, tau, delta, drain, restart)
    restart_wall = restart_wall_s(lam, restart)
    restarting = 0.0 if lam <= 0 else 1.0 if math.isinf(restart_wall) else \
        lam * restart_wall / (1.0 + lam * restart_wall)
    cycle_share = tau / (tau + delta) if math.isfinite(tau) else 1.0
    return Plan(checkpoint_bytes=size, checkpoint_write_s=delta, checkpoint_drain_s=drain,
                checkpoint_interval_s=tau, restart_s=restart, failures_per_s=lam, lost_work_per_failure_s=lost,
                effective_training_frac=frac, young_interval_s=young, daly_interval_s=daly,
                compute_frac=(1.0 - restarting) * cycle_share)


def _finite(value, key: str, low: float, high: float, low_open: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
        value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
        raise StudyError(f"must be a number in {bound}, got {value!r}", key=key)
    return float(value)


def checkpoint_every(value: str | float | None, key: str = "--checkpoint-every") -> float | None:
    """``auto`` (None) or minutes between checkpoints, in seconds."""
    if value is None or value == "auto":
        return None
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        raise StudyError(f"must be auto or minutes between checkpoints, got {value!r}", key=key) from None
    return _finite(minutes, key, 0.0, MAX_MINUTES) * 60.0


def resilience_from(failures_per_day: float | None = None, mtbf_hours: float | None = None,
                    checkpoint: str | float | None = None, storage: str | None = None,
                    restart_minutes: float | None = None, async_checkpoint: bool = False,
                    system_rates: dict | None = None, devices: int = 1, nodes: int = 1,
                    keys: dict | None = None) -> Resilience:
    """A `Resilience` from the CLI's flags (or a study's keys: ``keys`` maps each flag to its name there);
    bad values name the flag. A system's per-component rates apply when neither rate is given."""
    k = {"failures": "--failures-per-day", "mtbf": "--mtbf-hours", "checkpoint": "--checkpoint-every",
         "storage": "--storage", "restart": "--restart-minutes", **(keys or {})}
    if failures_per_day is not None and mtbf_hours is not None:
        raise StudyError(f"give {k['failures']} or {k['mtbf']}, not both", key=k["mtbf"])
    if failures_per_day is not None:
        lam = _finite(failures_per_day, k["failures"], 0.0, MAX_FAILURES_PER_DAY, low_open=False) / DAY_S
    elif mtbf_hours is not None:
        lam = 1.0 / (_finite(mtbf_hours, k["mtbf"], 0.0, 1e9) * 3600.0)
    elif system_rates:
        lam = job_failure_rate(system_rates, devices, nodes)
    else:
        lam = 0.0
    name = storage or Resilience.storage
    if name not in memory.storage_names():
        raise StudyError(f"unknown storage {name!r}; allowed: {', '.join(memory.storage_names())}", key=k["storage"])
    restart = Resilience.restart_s if restart_minutes is None else \
        _finite(restart_minutes, k["restart"], 0.0, MAX_MINUTES, low_open=False) * 60.0
    return Resilience(failures_per_s=lam, checkpoint_every_s=checkpoint_every(checkpoint, k["checkpoint"]),
                      storage=name, restart_s=restart, async_checkpoint=bool(async_checkpoint))



def from_spec(spec, devices: int, nodes: int) -> Resilience:
    """A `Resilience` from a training study's ``training.resilience`` section (dse.study.schema.training)
    for a job of ``devices`` packages in ``nodes`` nodes."""
    rates = spec.failure_rates.model_dump() if spec.failure_rates is not None else None
    key = "training.resilience."
    return resilience_from(spec.failures_per_day, spec.mtbf_hours, spec.checkpoint_every, spec.storage,
                           spec.restart_minutes, spec.async_checkpoint, rates, devices, nodes,
                           keys={"failures": key + "failures_per_day", "mtbf": key + "mtbf_hours",
                                 "checkpoint": key + "checkpoint_every", "storage": key + "storage",
                                 "restart": key + "restart_minutes"})
