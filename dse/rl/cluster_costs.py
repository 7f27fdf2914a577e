"""What a training job costs at the nodes it is given: dse.training's iteration model and its resilience
model, cached by value.

* Shape: a job's model-parallel layout (tensor, pipeline, micro-batch, interleaving; ZeRO-1 and selective
  recomputation, Megatron-LM's usual settings) is the fastest strategy that fits which `dse train
  --search` finds (dse.training.search.fastest) on the fewest nodes where one fits (1, 2, 4, ... nodes);
  the cluster changes only its data-parallel degree, dp = nodes x devices per node / (tp x pp), in steps
  of ``unit`` nodes (one node, or the nodes one model replica spans).
* Batch: Megatron-LM needs the global batch to be a whole number of micro-batches per data-parallel rank
  (of ``pp`` of them, interleaved); at dp ranks the job runs the nearest such multiple of micro-batch x
  dp to its global batch (an elastic job keeps its batch as nearly as its ranks allow), and at most the
  nodes where every rank still has one micro-batch.
* `Rate`: iteration time, tokens per second, the job's average power over an iteration (its energy per
  iteration, the power limit's clock included: dse.training.energy) and its MFU, whether it fits the
  devices' memory: dse.training.iteration at those degrees.
* `Plan`: checkpoint write, restart and the kept fraction of wall time under failures (dse.training.
  resilience.job_plan: Daly's interval, renewal reward) at ``failures_per_day`` per node (times the job's
  nodes); re-sharding (growing or shrinking a job) stops it for its checkpoint write at the old size and
  its reload from the storage tier at the new one.

Caches: a job's shape by (model, system, global batch, sequence), each rate and plan by those and the
node count; the values are the key (the system by its repr), so environments built alike share them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import arch
import memory
import workloads

from ..errors import StudyError
from ..training.iteration import iteration, layer_costs
from ..training.resilience import Resilience, checkpoint_bytes, job_failure_rate, job_plan
from ..training.search import fastest
from ..training.strategy import check
from ..training.systems import TrainingSystem

BASE = dict(recompute="selective", zero=1)      # Megatron-LM's distributed optimizer, selective recompute
_SHAPES: dict = {}
_RATES: dict = {}
_PLANS: dict = {}


@dataclass(frozen=True)
class Rate:
    """A job at ``nodes`` nodes (SI units; power of the whole job)."""

    nodes: int
    dp: int
    iteration_s: float
    tokens_per_s: float
    power_w: float
    mfu: float
    fits: bool


@dataclass(frozen=True)
class Plan:
    """The resilience model's answer for a job at ``nodes`` nodes."""

    kept_frac: float            # of wall time, training that is kept (effective_training_frac)
    compute_frac: float         # of wall time, running iterations (kept or redone)
    failure_frac: float         # of wall time, lost to failures: rework and restarts
    write_s: float              # a checkpoint write (training stopped)
    reload_s: float             # reading the checkpoint back from the storage tier


@dataclass(frozen=True)
class Shape:
    """A job's model-parallel layout and the node counts it can run on."""

    strategy: object            # dse.training Strategy at min_nodes
    unit: int                   # nodes per step of data parallelism
    min_nodes: int
    max_nodes: int
    checkpoint_bytes: float


class JobCosts:
    """Costs of one model's jobs on one system (module docstring)."""

    def __init__(self, model: str, system: TrainingSystem, global_batch: int, seq: int, nodes: int,
                 resilience: Resilience, failures_per_day: float):
        try:
            self.cfg = workloads.load_model(model)
        except workloads.WorkloadError as exc:
            raise StudyError(str(exc), key="models") from None
        self.system, self.global_batch, self.seq = system, global_batch, seq
        self.resilience, self.failures_per_day = resilience, failures_per_day
        self.key = (model, repr(system), global_batch, seq)
        if self.key not in _SHAPES:
            _SHAPES[self.key] = self._shape(model, nodes)
        self.shape = _SHAPES[self.key]
        if self.shape.min_nodes > nodes:
            raise StudyError(f"{model} needs {self.shape.min_nodes} nodes of {system.name}; the cluster has {nodes}",
                             key="nodes")
        self.idle_w = arch.idle_power_w(system.chiplet, arch.static_power_w(system.chiplet)) * system.gpus_per_node

    def _shape(self, model: str, nodes: int) -> Shape:
        gpn = self.system.gpus_per_node
        k = 1
        while True:
            try:
                s, _, _ = fastest(self.cfg, self.system, k * gpn, self.global_batch, self.seq, BASE)
                break
            except StudyError:
                if k >= nodes:
                    raise StudyError(f"no strategy fits {model} with global batch {self.global_batch} on up to "
                                     f"{nodes} nodes of {self.system.name}", key="nodes") from None
                k = min(2 * k, nodes)
        replica = s.tp * s.pp
        unit = replica // math.gcd(replica, gpn)
        params = layer_costs(self.cfg, self.system, s)
        size = checkpoint_bytes(params.dense_params + params.expert_params, self.system)
        max_dp = self.global_batch // (s.micro_batch * (s.pp if s.interleave > 1 else 1))
        return Shape(strategy=s, unit=unit, min_nodes=k, max_nodes=max(k, max_dp * replica // gpn // unit * unit),
                     checkpoint_bytes=size)

    def _layer_costs(self):
        key = self.key + ("layers",)
        if key not in _SHAPES:
            _SHAPES[key] = layer_costs(self.cfg, self.system, self.shape.strategy)
        return _SHAPES[key]

    def allowed(self, nodes: int) -> bool:
        """Whether the job can run on ``nodes`` nodes: a whole number of units in range, and it fits."""
        sh = self.shape
        return sh.min_nodes <= nodes <= sh.max_nodes and nodes % sh.unit == 0 and self.rate(nodes).fits

    def rate(self, nodes: int) -> Rate:
        """The job's iteration at ``nodes`` nodes (module docstring)."""
        key = self.key + (nodes,)
        if key not in _RATES:
            _RATES[key] = self._rate(nodes)
        return _RATES[key]

    def _rate(self, nodes: int) -> Rate:
        s = self.shape.strategy
        devices = nodes * self.system.gpus_per_node
        dp = max(1, devices // (s.tp * s.pp))
        per = s.micro_batch * dp * (s.pp if s.interleave > 1 else 1)
        batch = max(per, int(round(self.global_batch / per)) * per)
        strategy = dataclasses.replace(s, dp=dp, global_batch=batch)
        try:
            check(strategy, self.cfg.layers, self.cfg.heads, self.cfg.ffn_width, self.cfg.experts, devices,
                  self.cfg.kv_heads)
        except StudyError:
            return Rate(nodes, dp, math.inf, 0.0, 0.0, 0.0, False)
        it = iteration(self.cfg, self.system, strategy, self._layer_costs())
        return Rate(nodes=nodes, dp=dp, iteration_s=it.iteration_s, tokens_per_s=it.tokens_per_s,
                    power_w=it.energy_j / it.iteration_s, mfu=it.mfu, fits=it.fits)

    def plan(self, nodes: int) -> Plan:
        """Checkpoints, restarts and failures of the job at ``nodes`` nodes (module docstring)."""
        key = self.key + (nodes, self.resilience, self.failures_per_day)
        if key not in _PLANS:
            devices = nodes * self.system.gpus_per_node
            lam = job_failure_rate({"node_per_day": self.failures_per_day}, devices, nodes)
            r = dataclasses.replace(self.resilience, failures_per_s=lam)
            p = job_plan(r, self.rate(nodes).iteration_s, self.shape.checkpoint_bytes, nodes)
            tier = memory.storage_preset(r.storage)
            cycle = p.checkpoint_interval_s / (p.checkpoint_interval_s + p.checkpoint_write_s) \
                if math.isfinite(p.checkpoint_interval_s) else 1.0
            size = self.shape.checkpoint_bytes
            _PLANS[key] = Plan(kept_frac=p.effective_training_frac, compute_frac=p.compute_frac,
                               failure_frac=max(0.0, cycle - p.effective_training_frac),
                               write_s=tier.write_s(size / nodes, nodes), reload_s=tier.read_s(size / nodes, nodes))
        return _PLANS[key]
