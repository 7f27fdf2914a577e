"""Training on the study's own designs (``workload.phase: train``): `dse run` searches packages, systems
of packages and their parallel layouts for training with the same objectives as inference.

Each design is costed by the system evaluator (dse.system) on one *forward* micro-batch (``workload.batch``
sequences of ``workload.context`` tokens, every position's logits: the workloads' ``train`` phase), then
composed into a training iteration
with the formulas of dse.training.iteration (sources there):

* a pipeline stage's forward time ``t`` is the period of the system's forward pipeline (its slowest
  stage with its expert all-to-alls and hand-offs: tokens per micro-batch x replicas / throughput);
  backward costs 2t (a fused attention core, ``workload.attention: fused``, the default for training:
  2.5 x its FLOP share of t, FlashAttention-2's recomputed scores), recomputation adds t (full) or the
  attention core's FLOP share of t (selective);
* 1F1B over P stages with m = global_batch / (batch x replicas) micro-batches per replica:
  ``(m + P - 1) (3 + r) t``; a P that does not divide the layers gives the system's packages dse train's
  balanced split (`StudySplit`, dse.training.stages) and 1F1B over unequal stages, ``(3 + r)(m t_max +
  sum t - t_max)``, sum t the replica's forward latency (every stage and hand-off once), memory, gradients
  and Adam the deepest stage's (dse.training.stages.uneven_peak_bytes); the replicas are the
  data-parallel ranks: a ring all-reduce of each package's 16-bit gradients over the replicas, on the fabric when a whole layout fits in a node and on
  the network otherwise (dse.system.collectives; 1.5 x the bytes under ZeRO-3, exposed only beyond the
  last backward with ``overlap_grad_reduce``); then Adam streams 28 bytes per parameter (fp32 master,
  moments; over the replicas with ZeRO >= 1) through the package's HBM;
* memory per package (dse.training.memory, the megatron-core stack's accounting): parameters (dense over
  P, routed experts over P x E) at ZeRO's bytes per parameter, activations of the micro-batches in flight
  (no attention scores when fused) and the last stage's fp32 logits, against the package's HBM and DDR
  (``capacity_short_bytes``: the search's memory constraint, never less than the forward pass's own
  shortfall of a chiplet's weights beyond its HBM and the DDR);
* energy: the forward's dynamic energy per token x (3 + r) for every token of the iteration, static
  power over the iteration, gradient bytes x the level's energy per byte, Adam's HBM bytes;
* MFU: Megatron-LM's model FLOPs (GPT models' closed form, otherwise 3 x the trace's forward FLOPs)
  over iteration time x packages x the package's peak FLOP/s.

The objectives keep their names with training's meaning: ``latency`` is the iteration time,
``throughput`` training tokens/s, ``energy`` J and ``carbon`` g CO2e per training token. Tensor
parallelism across packages is not searched: a package's chiplets already split each layer by the
study's mapping. Fault tolerance stays the forward pipeline's (the throughput a package failure keeps).

With ``training.resilience`` (dse.training.resilience) each design's job of P x E x R packages fails at
the section's rate (per-package and per-node rates scaled by the design's packages and nodes), saves the
model's weights and Adam state to the storage tier from all its nodes, and restarts: the columns
``effective_training_frac``, ``goodput_tokens_per_s``, ``checkpoint_interval_s`` and ``checkpoint_write_s``,
and the token budget's time, energy (idle packages at static power through stalls and restarts) and carbon
include lost work and restarts; the objective ``time_to_train`` weighs them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

import memory
import workloads
from workloads.training import model_flops

from ..errors import StudyError
from ..model.phases import Phase
from ..model.prepare import Prepared
from ..study.spec import Study
from ..system.collectives import allreduce_s
from ..system.evaluator import SystemEvaluator
from ..system.layout import Layout, layout_of
from ..system.metrics import SYSTEM_METRICS, C
from ..system.phase_evaluator import PhaseEvaluator
from ..system.prepare import prepare_step
from ..system.slices import stage_layers as workload_layers
from .iteration import ADAM_BYTES_PER_PARAM, ATTENTION_CORE, FUSED_BACKWARD
from .memory import activation_bytes_per_token_layer, device_bytes, logits_bytes_per_token
from .resilience import from_spec, job_plan
from .stages import stage_layers, uneven_peak_bytes
from .stacks import STACKS

#: columns a training study adds to the system's (units in the names)
TRAINING_METRICS = ["iteration_s", "mfu", "memory_per_device_bytes", "bubble_s", "dp_communication_s",
                    "optimizer_s", "time_to_train_s", "energy_to_train_j", "carbon_to_train_kg",
                    "effective_training_frac", "goodput_tokens_per_s", "checkpoint_interval_s", "checkpoint_write_s"]
METRICS = SYSTEM_METRICS + TRAINING_METRICS
RESILIENCE = ("effective_training_frac", "goodput_tokens_per_s", "checkpoint_interval_s", "checkpoint_write_s")
BUDGET = ("time_to_train_s", "energy_to_train_j", "carbon_to_train_kg")
T = {name: i for i, name in enumerate(METRICS)}
GRADIENT_BYTES = 2.0            # 16-bit gradients (mixed precision, Micikevicius et al. 2018)
STACK = STACKS["megatron-core"]   # the memory accounting of a study's training software


def prepare_training(study: Study) -> Prepared:
    """The study's designs made ready to cost as training devices (module docstring): the system
    evaluator of the forward pass (workloads' ``train`` phase: every position's logits, no KV cache)."""
    p = prepare_step(study)
    bank = getattr(p.evaluator, "bank", None)
    if bank is not None:          # the system's packages hold dse train's stages (built again with them)
        bank.split = study_split(p.tables)
        bank.cache.clear()
        p.evaluator.traffic_cache.clear()
    return dataclasses.replace(p, evaluator=TrainingEvaluator(p.evaluator, study, p.tables), system_evaluator=p.evaluator)


class TrainingEvaluator(PhaseEvaluator):
    """The evaluator contract (dse.model.contract) over training iterations of the system evaluator's
    designs (module docstring)."""

    def __init__(self, system: SystemEvaluator, study: Study, tables):
        super().__init__(system)
        self.study, self.tables = study, tables
        self.split = study_split(tables)
        w, t = study.workload, study.training
        cfg = workloads.load_model(w.model)
        self.cfg, self.batch, self.seq, self.global_batch = cfg, w.batch, w.context, t.global_batch
        core = _attention_core_share(tables)
        self.recompute_share = {"none": 0.0, "full": 1.0, "selective": core}[t.recompute]
        self.fused = w.attention == "fused"
        self.backward_extra = (FUSED_BACKWARD - 2.0) * core if self.fused else 0.0
        self.element_bytes = workloads.bytes_per_element(w.precision)
        wl = tables.workload          # parameters counted once (a tied LM head shares the embedding's)
        self.expert_params = float(sum(d["params"] for _, d in wl.graph.nodes(data=True) if d.get("kind") == "expert"))
        self.dense_params = float(wl.summary["total_params"]) - self.expert_params
        self.checkpoint_bytes = (self.dense_params + self.expert_params) * (STACK.weight_bytes + STACK.optimizer_bytes)
        self.kind_peak_flops = np.array([c.peak_flops(w.precision) for c in study.hardware.library()])
        tokens = self.global_batch * self.seq
        if cfg.model_type == "gpt2" and not cfg.experts:
            self.flops_per_iteration = model_flops(self.global_batch, self.seq, cfg.layers, cfg.hidden, cfg.vocab)
        else:
            self.flops_per_iteration = 3.0 * tables.workload.summary["flops_per_step"] * tokens / (
                self.batch * self.seq)

    @property
    def columns(self) -> list[str]:
        return METRICS

    @property
    def metric_names(self) -> list[str]:
        """METRICS, but those of the token budget only when the study gives one, of failures only with
        ``training.resilience``."""
        left_out = (() if self.study.workload.tokens is not None else BUDGET) + (
            () if self.study.training.resilience is not None else RESILIENCE)
        return [m for m in METRICS if m not in left_out]

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = self.vectors(X)
        forward = self.system.metrics_array(X, with_faults)
        d = self.system.decode(X)
        return self._train(forward, self.system.layouts_of(X), d.chiplets, d.kind, d.stacks, d.ddr)

    def design_metrics(self, designs, with_faults: bool = True) -> np.ndarray:
        forward = self.system.design_metrics(designs, with_faults)
        a = self.system.package_arrays(designs)
        return self._train(forward, [layout_of(d) for d in designs], a.chiplets, a.kind, a.stacks, a.ddr)

    # --- the iteration ---------------------------------------------------------------------------------
    def _train(self, forward: np.ndarray, layouts, n, kind, stacks, ddr) -> np.ndarray:
        out = np.zeros((len(forward), len(METRICS)))
        out[:, : len(SYSTEM_METRICS)] = forward
        present = np.arange(kind.shape[1])[None, :] < np.asarray(n)[:, None]
        peak = np.where(present, self.kind_peak_flops[kind], 0.0).sum(axis=1)
        hbm_stacks = np.where(present, stacks, 0).sum(axis=1)
        ddr = np.asarray(ddr)
        t = self.tables
        capacity = hbm_stacks * (t.hbm.capacity_bytes if t.hbm else 0.0) + ddr * (t.ddr.capacity_bytes if t.ddr else 0.0)
        bandwidth = _bandwidth_Bps(t, hbm_stacks, ddr)
        if t.ddr_stream:      # weight streaming: the optimizer runs in the tier streamed from (`_streamed`)
            bandwidth = np.maximum(memory.effective_bandwidth_Bps(t.ddr, 1) * ddr, 0.0).astype(float)
        groups: dict = {}
        for i, layout in enumerate(layouts):
            groups.setdefault(layout, []).append(i)
        for layout, rows in groups.items():
            rows = np.array(rows)
            out[rows] = self._layout_rows(out[rows], layout, peak[rows], capacity[rows], bandwidth[rows])
        return out

    def _layout_rows(self, row: np.ndarray, layout: Layout, peak_flops, capacity, state_Bps) -> np.ndarray:
        """Training metrics of the designs ``row`` (their forward metrics in, one layout) (module docstring);
        ``state_Bps``: the bandwidth of the tier holding the weights and optimizer state (HBM, or the DDR streamed
        from under weight streaming)."""
        P, E, R = layout.pipeline, layout.experts, layout.replicas
        packages = P * E * R
        micro = self.global_batch / (self.batch * R)
        ok = row[:, C["throughput_tok_s"]] > 0
        if micro < 1 or micro != int(micro):
            return _infeasible(row)
        m = int(micro)
        training = self.study.training
        with np.errstate(divide="ignore", invalid="ignore"):
            stage_s = np.where(ok, self.batch * self.seq * R / np.where(ok, row[:, C["throughput_tok_s"]], 1.0), np.inf)
            passes = 3.0 + self.recompute_share + self.backward_extra
            counts = self.split(self.cfg.layers, P) if P > 1 else (self.cfg.layers,)
            uneven = len(set(counts)) > 1
            pipeline_s = (m + P - 1) * passes * stage_s
            bubble_s = (P - 1) * passes * stage_s
            micro_s = passes * stage_s               # one micro-batch's passes through a stage
            params = self.dense_params / P + self.expert_params / (P * E)
            if uneven:     # 1F1B over unequal stages (dse.training.stages): m max + (sum - max)
                bubble_s = passes * (row[:, C["latency_s"]] - stage_s)   # the forward's other stages, hand-offs
                pipeline_s = m * passes * stage_s + bubble_s
                layer_params = (self.dense_params + self.expert_params / E) / self.cfg.layers
                params = layer_params * max(counts)            # the deepest stage paces gradients and Adam
            if self.tables.ddr_stream:
                streamed = self._streamed(stage_s, passes, params, max(counts), state_Bps)
                pipeline_s = pipeline_s + (m + (0 if uneven else P - 1)) * (streamed - micro_s)
            grads_bytes = params * GRADIENT_BYTES
            zero3 = 1.5 if training.zero == 3 else 1.0               # dse.training.iteration
            level = self._dp_level(packages)
            dp_s = zero3 * allreduce_s(R, grads_bytes, level) if level is not None else 0.0
            dp_s = np.maximum(0.0, dp_s - 2.0 * stage_s) if training.overlap_grad_reduce else np.full(len(row), dp_s)
            optimizer_bytes = params / (R if training.zero >= 1 else 1) * ADAM_BYTES_PER_PARAM
            optimizer_s = np.where(state_Bps > 0, optimizer_bytes / np.where(state_Bps > 0, state_Bps, 1.0), np.inf)
            iteration_s = pipeline_s + dp_s + optimizer_s
            tokens = self.global_batch * self.seq

            cfg = self.cfg
            tokens_mb = self.batch * self.seq
            activations = tokens_mb * activation_bytes_per_token_layer(
                cfg, self.seq, 1, False, training.recompute, "fused" if self.fused else "unfused",
                STACK.residual_bytes, STACK.eager)
            logits = tokens_mb * logits_bytes_per_token(cfg, 1, STACK.logit_bytes, STACK.residual_bytes)
            if uneven:
                mem = uneven_peak_bytes(counts, layer_params, activations / E, logits, m, 1, STACK, training.zero, R)
            else:
                mem = device_bytes(params, STACK, training.zero, R, activations * cfg.layers / P * min(P, m) / E,
                                   logits)

            dynamic_j_per_token = sum(row[:, C[c]] for c in ("energy_compute_j_per_token", "energy_dram_j_per_token",
                                                              "energy_network_j_per_token"))
            static_w = row[:, C["energy_static_j_per_token"]] * row[:, C["throughput_tok_s"]]
            ring_bytes = zero3 * 2.0 * (R - 1) / R * grads_bytes if R > 1 else 0.0
            comm_j = packages * ring_bytes * (level.energy_j_per_byte if level is not None else 0.0)
            update = self.tables.ddr if self.tables.ddr_stream else self.tables.hbm    # where Adam runs
            optimizer_j = packages * optimizer_bytes * (update.energy_j_per_byte if update else 0.0)
            energy = dynamic_j_per_token * passes * tokens + static_w * iteration_s + comm_j + optimizer_j

            row[:, C["latency_s"]] = row[:, C["latency_p99_s"]] = iteration_s
            row[:, C["throughput_tok_s"]] = tokens / iteration_s
            row[:, C["energy_j_per_token"]] = energy / tokens
            row[:, C["energy_compute_j_per_token"]] *= passes
            row[:, C["energy_dram_j_per_token"]] = row[:, C["energy_dram_j_per_token"]] * passes + optimizer_j / tokens
            row[:, C["energy_network_j_per_token"]] = row[:, C["energy_network_j_per_token"]] * passes + comm_j / tokens
            row[:, C["energy_static_j_per_token"]] = static_w * iteration_s / tokens
            # the package short of the iteration's bytes, or a chiplet short of its forward share's
            row[:, C["capacity_short_bytes"]] = np.maximum(row[:, C["capacity_short_bytes"]], mem - capacity)
            operational, embodied = self.system.factors.per_token(energy / tokens, row[:, C["embodied_kg"]] * 1e3,
                                                                  tokens / iteration_s)
            row[:, C["carbon_operational_g_per_token"]] = operational
            row[:, C["carbon_embodied_g_per_token"]] = embodied
            row[:, C["carbon_g_per_token"]] = operational + embodied
            row[:, T["iteration_s"]] = iteration_s
            row[:, T["mfu"]] = self.flops_per_iteration / (iteration_s * packages * peak_flops)
            row[:, T["memory_per_device_bytes"]] = mem
            row[:, T["bubble_s"]] = bubble_s
            row[:, T["dp_communication_s"]] = dp_s
            row[:, T["optimizer_s"]] = optimizer_s
        frac, compute = self._resilience(row, packages, iteration_s)
        budget = self.study.workload.tokens
        budget_columns = [T["time_to_train_s"], T["energy_to_train_j"], T["carbon_to_train_kg"]]
        if budget is None:
            row[:, budget_columns] = np.nan
        else:
            iterations = math.ceil(budget / tokens)
            if self.study.training.resilience is None:
                row[:, T["time_to_train_s"]] = iterations * iteration_s
                row[:, T["energy_to_train_j"]] = iterations * energy
                row[:, T["carbon_to_train_kg"]] = iterations * tokens * row[:, C["carbon_g_per_token"]] / 1e3
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    wall = iterations * iteration_s / frac
                    # running iterations (kept or redone) at their power, idle at static power otherwise
                    spent = wall * (compute * energy / iteration_s + (1.0 - compute) * static_w)
                    carbon = row[:, C["carbon_operational_g_per_token"]] * spent / (iterations * energy) + \
                        row[:, C["carbon_embodied_g_per_token"]] / frac
                row[:, T["time_to_train_s"]] = wall
                row[:, T["energy_to_train_j"]] = spent
                row[:, T["carbon_to_train_kg"]] = iterations * tokens * carbon / 1e3
        return row

    def _streamed(self, stage_s, passes: float, params: float, layers: int, stream_Bps) -> np.ndarray:
        """One micro-batch's passes through a stage under weight streaming (``stream_weights``: Cerebras's
        MemoryX, the Cerebras "MemoryX" glossary; SN40L's DDR): the weights and optimizer state live in the tier
        streamed from and the update runs there (Adam's bytes at its bandwidth: `_train`); each pass streams the
        stage's weights in, layer by layer ahead of use, and the backward streams its 16-bit gradients out over
        the same path (one DDR bus: in and out share it). A pass takes its fill (one layer's weights, hidden
        behind nothing; the forward's is in t already) plus max(its compute, its transfers): the forward max(t, W / B), the backward and
        recomputation max((passes - 1) t, (W + G) / B), over identical layers the pipeline's fill + sum of
        each layer's max (t: the forward stage time, which already streams the forward's DDR share)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            weights_s = np.where(stream_Bps > 0, params * self.element_bytes / stream_Bps, np.inf)
            grads_s = np.where(stream_Bps > 0, params * GRADIENT_BYTES / stream_Bps, np.inf)
        fill = weights_s / max(layers, 1)       # the backward's (the forward's is in t)
        return fill + np.maximum(stage_s, weights_s) + np.maximum((passes - 1.0) * stage_s, weights_s + grads_s)

    def _resilience(self, row: np.ndarray, packages: int, iteration_s: np.ndarray) -> tuple:
        """Each design's effective training fraction and the share of wall time it runs iterations
        (1 and 1 without ``training.resilience``), its resilience columns written (module docstring)."""
        spec = self.study.training.resilience
        ones = np.ones(len(row))
        if spec is None:
            row[:, [T[c] for c in RESILIENCE]] = np.nan
            return ones, ones
        hardware = self.system.hardware
        nodes = hardware.nodes(packages) if hardware is not None else packages
        r = from_spec(spec, packages, nodes)
        plans = [job_plan(r, float(s), self.checkpoint_bytes, nodes) for s in iteration_s]
        frac = np.array([p.effective_training_frac for p in plans])
        row[:, T["effective_training_frac"]] = frac
        row[:, T["goodput_tokens_per_s"]] = row[:, C["throughput_tok_s"]] * frac
        row[:, T["checkpoint_interval_s"]] = [p.checkpoint_interval_s for p in plans]
        row[:, T["checkpoint_write_s"]] = [p.checkpoint_write_s for p in plans]
        return frac, np.array([p.compute_frac for p in plans])

    def _dp_level(self, packages: int):
        """The level the replicas' gradient all-reduce crosses (None: one package, no system)."""
        hardware = self.system.hardware
        if hardware is None:
            return None
        if packages <= hardware.packages_per_node:
            return hardware.fabric_level()
        return hardware.network_level(hardware.nodes(packages))


@dataclass(frozen=True)
class StudySplit:
    """dse train's default split (dse.training.stages.stage_layers: L / P, or balanced when P does not
    divide L) from the study's own costs: a layer's time, the embedding's (first stage) and the ends'
    (last stage, as dse.training.iteration charges them: embedding, final norm, output layer and loss)."""

    layer_s: float
    first_s: float
    last_s: float

    def __call__(self, layers: int, pipeline: int) -> tuple[int, ...]:
        if pipeline > layers:
            raise StudyError(f"{pipeline} pipeline stages for the model's {layers} layers; at most one stage a layer",
                             key="system.parallel.pipeline")
        return stage_layers(layers, pipeline, (), self.layer_s, self.first_s, self.last_s)


def study_split(tables) -> StudySplit:
    """The `StudySplit` of a study's tables: each unit's expected forward time per layer instance on its
    fastest chiplet kind (mapping-independent), summed over the layers, the stages before them and
    every stage outside them; a layer's time is the layers' sum over L."""
    layers = workload_layers(tables)
    per_unit = tables.unit_time_s.min(axis=1) * tables.unit_prob * tables.stage_prob[tables.unit_stage]
    per_stage = np.bincount(tables.unit_stage, per_unit, minlength=len(layers.count)) * layers.count
    inside = layers.first >= 0
    before = ~inside & (np.arange(len(inside)) < (int(np.argmax(inside)) if inside.any() else len(inside)))
    return StudySplit(layer_s=float(per_stage[inside].sum()) / max(layers.total, 1),
                      first_s=float(per_stage[before].sum()), last_s=float(per_stage[~inside].sum()))


def _infeasible(row: np.ndarray) -> np.ndarray:
    """Designs whose replicas do not divide the global batch into whole micro-batches: never chosen."""
    row[:, [C["latency_s"], C["latency_p99_s"], T["iteration_s"], C["capacity_short_bytes"],
            C["energy_j_per_token"], C["carbon_g_per_token"]]] = np.inf
    row[:, C["throughput_tok_s"]] = 0.0
    row[:, len(SYSTEM_METRICS):] = np.nan
    row[:, T["iteration_s"]] = np.inf
    return row


def _attention_core_share(tables) -> float:
    """The attention core's share of the forward FLOPs (what selective recomputation repeats)."""
    ops = tables.workload.ops
    flops = ops["flops"].to_numpy(float) * ops["prob"].to_numpy(float) * ops["layers"].to_numpy(float)
    core = ops["name"].isin(ATTENTION_CORE).to_numpy()
    return float(flops[core].sum() / flops.sum()) if flops.sum() > 0 else 0.0


def _bandwidth_Bps(tables, stacks: np.ndarray, ddr: np.ndarray) -> np.ndarray:
    """Sustained bandwidth of each package's HBM stacks (its DDR channels without HBM)."""
    hbm = memory.effective_bandwidth_Bps(tables.hbm, 1) * stacks if tables.hbm is not None else 0.0 * stacks
    dram = memory.effective_bandwidth_Bps(tables.ddr, 1) * ddr if tables.ddr is not None else 0.0 * ddr
    return np.where(stacks > 0, hbm, dram).astype(float)


#: ``workload.phase: train``, registered by the facade (dse.model.phases); the objectives keep their names
PHASE = Phase(name="train", prepare=prepare_training, metrics=tuple(TRAINING_METRICS),
              objectives={"time_to_train": ("time_to_train_s", 1.0)})
