"""Time, memory and FLOP utilisation of one training iteration of a model on a system with a strategy.

Model (each term's source in its function):
* One transformer layer's forward pass on one device is the project's own operator trace of the layer
  (workloads, prefill of ``micro_batch`` sequences of ``seq`` tokens, sharded ``tp`` ways) costed by the
  device's chiplet model and run kernel by kernel (arch.roofline: compute and memory overlapped, kernel
  overhead, routed experts in grouped kernels: dse.model.grouped; the host's issue time bounds a layer
  when it issues ahead, else floors each kernel). The
  backward pass costs twice the forward (a data-gradient and a weight-gradient GEMM per forward GEMM;
  Narayanan et al. SC'21, section 5.1), except a fused attention core (FlashAttention, the default):
  its backward recomputes the scores, 5 matrix products against the forward's 2, 2.5 x the forward
  (Dao, FlashAttention-2, 2023, section 4.1), and its forward is one kernel that keeps the scores on
  chip (dse.model.tables' grouping); full recomputation adds a forward, selective recomputation the
  attention core (Korthikanti et al. MLSys'23).
* The software stack (dse.training.stacks) scales the chiplet's GEMM efficiency and says whether the
  tensor-parallel collectives run behind the layer's GEMMs (Transformer Engine's overlap: a layer pass
  then takes the longer of its kernels and its collectives).
* Tensor parallelism: two all-reduces of the layer's activations per forward, two per backward (and two
  per recomputed forward), or as many reduce-scatter + all-gather pairs with sequence parallelism (the
  same ring volume: Korthikanti et al. MLSys'23, section 4.2.2): a ring inside the node (systems.py,
  alpha-beta). Sequence parallelism also runs the norms and residual adds on s / t tokens a rank
  (`SEQUENCE_SHARDED`) and, keeping only the sequence shard of the two column-parallel GEMMs' input,
  all-gathers it again in the backward for their weight gradients (one all-reduce's ring more).
* Pipeline parallelism, 1F1B with ``interleave`` = v model chunks per device: the iteration takes
  ``(m + (p - 1) / v)`` micro-batch times of the slowest stage (the bubble is (p - 1) / (v m) of the
  work; Narayanan et al. section 2.2), plus a point-to-point send of the stage boundary's activations
  per micro-batch and chunk each way (scatter/gather over the tp devices' NICs, section 4.1).
  Uneven stages (a pp that does not divide the layers, or ``pp_layers``; dse.training.stages): the
  first stage also runs the embedding, the last the final norm, output layer and loss, and 1F1B takes
  m max_i t_i + (sum_i t_i - max_i t_i) / v (the slowest stage sets the pace); data parallelism and the optimizer
  are paced by the deepest stage, memory is the largest stage's (its layers x its micro-batches in flight).
* Data parallelism: a ring all-reduce of the device's gradients after the pipeline flush, then the
  Adam step streaming the device's optimizer state through its HBM once. ZeRO-3 moves 1.5 x the bytes
  (parameters all-gathered for the forward and the backward, gradients reduce-scattered: 3 x the
  parameters against 2 x; Rajbhandari et al. SC'20, section 7). With ``overlap_grad_reduce``
  (Megatron-LM's bucketed reduction) the all-reduce runs behind the last micro-batch's backward and
  only what is longer is exposed.
* Memory (dse.training.memory): weights, gradients and optimizer state (ZeRO) as the stack holds them,
  activations of the micro-batches in flight (p of them on the first stage under 1F1B, times
  1 + (p - 1)/(p v) interleaved, at most m; Korthikanti et al. section 4.2.3; checked against the
  schedule run op by op, dse.training.stages.schedule), and the last stage's logits.
* Energy (dse.training.energy): the same kernels' compute, SRAM and HBM energy, the bytes each device
  sends per collective times the energy per byte of the level it crosses, the Adam step's HBM traffic,
  and the chiplet's static power over the iteration.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

import numpy as np

import arch
import workloads
from arch.costing import CostTable
from arch.roofline import kernel_times_s
from workloads.training import model_flops

from ..errors import StudyError
from ..model.expert_tiles import expected_costs
from ..model.grouped import CERTAIN
from ..model.tables import by_kernel, first_rows, kernels_of
from .energy import DeviceEnergy, ring_bytes
from .memory import activation_bytes_per_token_layer, device_bytes, logits_bytes_per_token
from .stacks import DEFAULT, STACKS
from .stages import in_flight as in_flight_of
from .stages import pipeline_s, stage_times, uneven_peak_bytes
from .stages import stage_layers as stage_layers_of
from .strategy import Strategy
from .systems import TrainingSystem

ATTENTION_CORE = ("attn_score", "softmax", "attn_context")
#: operators outside the tensor-parallel regions, split along the sequence under sequence parallelism
SEQUENCE_SHARDED = ("attn_norm", "ffn_norm", "norm_scale", "attn_residual", "ffn_residual", "final_norm")
ADAM_BYTES_PER_PARAM = 28.0      # read fp32 master, m, v (12) and the 16-bit gradient (2); write 12 + 16-bit weights
FUSED_BACKWARD = 2.5             # a fused attention core's backward / forward (FlashAttention-2, section 4.1)


@dataclass
class Iteration:
    """What `iteration` computes; times in seconds, memory in bytes."""

    iteration_s: float
    tokens_per_s: float
    model_tflops_per_device: float
    mfu: float
    memory_per_device_bytes: float
    fits: bool
    energy_j: float = 0.0             # of the whole system, per iteration
    power_per_device_w: float = 0.0   # average over the iteration
    clock_fraction: float = 1.0       # of f_max, the power limit's while busy (dse.training.energy)
    hardware_tflops_per_device: float = 0.0   # FLOPs executed, recomputation included (`_flops`)
    breakdown: dict = field(default_factory=dict)
    energy_breakdown: dict = field(default_factory=dict)
    stage_layers: tuple = ()          # layers of each pipeline stage

    def as_dict(self) -> dict:
        return {"iteration_s": self.iteration_s, "tokens_per_s": self.tokens_per_s,
                "model_tflops_per_device": self.model_tflops_per_device,
                "hardware_tflops_per_device": self.hardware_tflops_per_device, "mfu": self.mfu,
                "memory_per_device_bytes": self.memory_per_device_bytes, "fits": self.fits,
                "energy_per_iteration_j": self.energy_j, "power_per_device_w": self.power_per_device_w,
                "clock_fraction": self.clock_fraction, "breakdown": self.breakdown, "energy_breakdown": self.energy_breakdown}


@dataclass(frozen=True)
class LayerCosts:
    """Kernel times of one micro-batch on one device: an average decoder layer and the model's ends."""

    layer_fwd_s: float
    attention_core_fwd_s: float
    ends_fwd_s: float                 # embedding lookup, final norm, LM head (and the loss)
    experts_fwd_s: float              # routed experts' part of layer_fwd_s (divided by ep)
    dense_params: float               # parameters of the whole model outside routed experts
    expert_params: float
    forward_flops: float              # of one micro-batch, every tp shard
    layer_fwd_j: float = 0.0          # compute, SRAM and HBM energy of the same kernels
    attention_core_fwd_j: float = 0.0
    ends_fwd_j: float = 0.0
    layer_fwd_dram_j: float = 0.0     # the HBM traffic's part of each of the three
    attention_core_fwd_dram_j: float = 0.0
    ends_fwd_dram_j: float = 0.0
    embedding_fwd_s: float = 0.0      # the embedding's part of ends_fwd_s (the first pipeline stage's)
    attention_core_flops: float = 0.0     # the attention cores' forward FLOPs of one micro-batch, every layer and shard

    def params_per_device(self, s: Strategy) -> float:
        """Dense parameters split over tp x pp devices, routed experts over ep x pp."""
        return self.dense_params / (s.tp * s.pp) + self.expert_params / (s.ep * s.pp)


def layer_costs(cfg: workloads.ModelConfig, system: TrainingSystem, s: Strategy) -> LayerCosts:
    """Forward kernel times of one micro-batch on one device (module docstring)."""
    fused = s.attention == "fused"
    wl = workloads.extract_transformer(cfg, phase="train", batch=s.micro_batch, context=s.seq,
                                       precision=s.precision, tp=s.tp, routing={"distribution": "uniform"},
                                       fused_attention=fused)
    ops = every_ops = wl.ops
    mine = ops["unit"].map(lambda u: not u.rpartition(".tp")[1] or u.endswith(".tp0")).to_numpy(bool)
    ops = ops[mine].sort_values("unit", kind="stable")
    ch = system.chiplet
    # routed experts' GEMMs over their token counts, whole tiles each (dse.model.expert_tiles), as the step model
    every = expected_costs(wl, [ch], s.precision, arch.op_costs(wl.ops, [ch], s.precision))
    rows = ops.index.to_numpy()
    costs = CostTable(**{f.name: getattr(every, f.name)[rows] for f in fields(CostTable)})
    if s.sequence_parallel and s.tp > 1:
        costs = _sequence_sharded(costs, ops["name"].isin(SEQUENCE_SHARDED).to_numpy(), s.tp)
    ahead = ch.dispatch_mode == "ahead"
    kt = _kernel_times(ops, costs, system, fused, 0.0 if ahead else ch.dispatch_s)
    prob = ops["prob"].to_numpy(float)
    layers = ops["layers"].to_numpy(float)
    in_layer = ops["layer"].to_numpy() >= 0
    expert = ops["expert"].to_numpy() >= 0
    # routed experts run as grouped kernels (dse.model.grouped): their kernel overhead is paid per launch
    kt = np.where(expert, kernel_times_s(costs.time_s[:, 0], costs.dram_bytes[:, 0] / system.memory_Bps,
                                         1.0 / costs.overlap_steps[:, 0], 0.0, 0.0), kt)
    launches = _grouped_launches(ops[in_layer & expert], s.ep, cfg.layers)
    share = np.where(expert, 1.0 / s.ep, 1.0)          # routed experts spread over the ep ranks
    weight = prob * share
    per_layer = weight * layers / cfg.layers
    core_ops = in_layer & ops["name"].isin(ATTENTION_CORE).to_numpy()
    dram_j = costs.dram_bytes[:, 0] * system.hbm.energy_j_per_byte
    kj = costs.energy_j[:, 0] + dram_j
    params = wl.summary["total_params"]
    expert_params = float(sum(d["params"] for _, d in wl.graph.nodes(data=True) if d.get("kind") == "expert"))
    embedding = {n for n, d in wl.graph.nodes(data=True) if d.get("kind") == "embedding"}
    in_embedding = ops["unit"].map(lambda u: u.rpartition(".tp")[0] in embedding or u in embedding).to_numpy(bool)
    issue_s = ch.dispatch_s if ahead else 0.0      # a host issuing ahead: a layer takes max(device, host)
    device_s = float((kt * per_layer)[in_layer].sum()) + launches * ch.kernel_overhead_s
    issued = kt > 0 if fused else np.ones(len(kt), dtype=bool)     # a fused core is issued once
    host_s = (float(per_layer[in_layer & ~expert & issued].sum()) + launches) * issue_s
    return LayerCosts(layer_fwd_s=max(device_s, host_s),
                      attention_core_fwd_s=float((kt * per_layer)[core_ops].sum()),
                      ends_fwd_s=float((kt * weight)[~in_layer].sum()),
                      experts_fwd_s=float((kt * per_layer)[in_layer & expert].sum()) + launches * ch.kernel_overhead_s,
                      dense_params=params - expert_params, expert_params=expert_params,
                      forward_flops=float(wl.summary["flops_per_step"]),
                      layer_fwd_j=float((kj * per_layer)[in_layer].sum()),
                      attention_core_fwd_j=float((kj * per_layer)[core_ops].sum()),
                      ends_fwd_j=float((kj * weight)[~in_layer].sum()),
                      layer_fwd_dram_j=float((dram_j * per_layer)[in_layer].sum()),
                      attention_core_fwd_dram_j=float((dram_j * per_layer)[core_ops].sum()),
                      ends_fwd_dram_j=float((dram_j * weight)[~in_layer].sum()),
                      embedding_fwd_s=float((kt * weight)[~in_layer & in_embedding].sum()),
                      attention_core_flops=float((every_ops["flops"] * every_ops["layers"] * every_ops["prob"])[
                          (every_ops["layer"] >= 0) & every_ops["name"].isin(ATTENTION_CORE)].sum()))


def _sequence_sharded(costs: CostTable, rows: np.ndarray, tp: int) -> CostTable:
    """``rows`` (the norms and residual adds between the tensor-parallel regions) run on s / t of the
    tokens on each of the t ranks under sequence parallelism (Korthikanti et al. MLSys'23, section 4.2.2):
    their time, energy and traffic over t (a norm's weight, h elements, is read whole: negligible)."""
    k = np.where(rows, 1.0 / tp, 1.0)[:, None]
    return dataclasses.replace(costs, time_s=costs.time_s * k, energy_j=costs.energy_j * k,
                               dram_bytes=costs.dram_bytes * k, sram_bytes=costs.sram_bytes * k)


def _kernel_times(ops, costs, system: TrainingSystem, fused: bool, dispatch_s: float) -> np.ndarray:
    """Each operator row's kernel time (arch.roofline); with fused attention a unit's Q.K^T, softmax and
    P.V are one kernel (dse.model.tables.kernels_of) over their summed compute, each matrix product taking
    its unmasked share of its full-tile time, and traffic: the kernel's time sits on its first row."""
    ch = system.chiplet
    compute, dram = costs.time_s[:, 0], costs.dram_bytes[:, 0] / system.memory_Bps
    if not fused:
        return kernel_times_s(compute, dram, 1.0 / costs.overlap_steps[:, 0], ch.kernel_overhead_s, dispatch_s)
    kernel = kernels_of(ops["name"].to_numpy(), ops["unit"].to_numpy(), True)
    in_kernel = np.diff(np.r_[-1, kernel]) == 0
    in_kernel[np.flatnonzero(in_kernel) - 1] = True
    full = 2.0 * ops["M"].to_numpy(float) * ops["N"].to_numpy(float) * ops["K"].to_numpy(float) * \
        np.maximum(ops["batch"].to_numpy(float), 1.0)
    matrix = (ops["engine"].to_numpy() == "matrix") & (full > 0) & in_kernel
    useful = np.where(matrix, ops["flops"].to_numpy(float) / np.where(matrix, full, 1.0), 1.0)
    first = first_rows(kernel)
    steps = costs.overlap_steps[first, 0]
    per_kernel = kernel_times_s(by_kernel(kernel, compute * useful), by_kernel(kernel, dram), 1.0 / steps,
                                ch.kernel_overhead_s, dispatch_s)
    out = np.zeros(len(ops))
    out[first] = per_kernel
    return out


def _grouped_launches(expert_ops, ep: int, n_layers: int) -> float:
    """Grouped expert kernels one device launches per layer: per operator of a layer's experts, one launch
    when any of the device's 1/ep share of them runs (1 - prod(1 - p_e)^(1/ep); dse.model.grouped)."""
    if expert_ops.empty:
        return 0.0
    no_launch = np.log(np.maximum(1.0 - expert_ops["prob"].to_numpy(float), CERTAIN))
    g = expert_ops.assign(no_launch=no_launch).groupby(["layer", "name"]).agg(
        layers=("layers", "first"), no_launch=("no_launch", "sum"))
    return float((g["layers"] / n_layers * (1.0 - np.exp(g["no_launch"] / ep))).sum())


def ring_s(ranks: int, bytes_: float, alpha_s: float, bus_Bps: float) -> float:
    """Ring all-reduce (or reduce-scatter + all-gather) of ``bytes_`` over ``ranks``: 2(p - 1) steps of
    alpha + bytes / (p x bus bandwidth) (Thakur et al. 2005; NCCL's busbw = algbw x 2(p - 1)/p)."""
    if ranks <= 1:
        return 0.0
    return 2.0 * (ranks - 1) * (alpha_s + bytes_ / (ranks * bus_Bps))


def iteration(cfg: workloads.ModelConfig, system: TrainingSystem, s: Strategy, costs: LayerCosts | None = None
              ) -> Iteration:
    """One training iteration (module docstring)."""
    c = costs or layer_costs(cfg, system, s)
    stack = system.stack or STACKS[DEFAULT]
    node = system.gpus_per_node
    abytes = workloads.bytes_per_element(s.precision)
    h, L = cfg.hidden, cfg.layers
    fabric_bus = system.fabric.bandwidth_Bps * system.fabric_efficiency
    net_bus = system.network_Bps * system.network_efficiency

    # --- one micro-batch through one layer, forward and backward, on one device ---
    act = s.micro_batch * s.seq * h * abytes
    tp_alpha, tp_bus = ((system.fabric.sync_latency_s, fabric_bus) if s.tp <= node
                        else (system.network_latency_s, net_bus))
    energy = DeviceEnergy(system)
    tp_collective = ring_s(s.tp, act, tp_alpha, tp_bus)
    recompute_fwd = {"none": 0.0, "selective": c.attention_core_fwd_s, "full": c.layer_fwd_s}[s.recompute]
    recompute_comm = 2.0 if s.recompute == "full" else 0.0
    # sequence parallelism keeps the sequence shard of the QKV and first MLP GEMMs' input: the backward
    # all-gathers it again for their weight gradients, two all-gathers, one all-reduce's ring
    # (Korthikanti et al. section 4.2.2; Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication)
    regather = 1.0 if s.sequence_parallel and s.tp > 1 else 0.0
    recompute_fwd_j, recompute_fwd_dram_j = {"none": (0.0, 0.0),
                                             "selective": (c.attention_core_fwd_j, c.attention_core_fwd_dram_j),
                                             "full": (c.layer_fwd_j, c.layer_fwd_dram_j)}[s.recompute]
    a2a = a2a_bytes = 0.0
    if s.ep > 1:      # dispatch and combine all-to-all of the routed tokens' activations, each way
        a2a_bytes = 2.0 * (s.ep - 1) / s.ep * act * cfg.top_k
        a2a = a2a_bytes / fabric_bus + 2.0 * system.fabric.sync_latency_s
    core_extra = (FUSED_BACKWARD - 2.0) if s.attention == "fused" else 0.0    # the fused backward's recompute
    bwd_kernels = 2.0 * c.layer_fwd_s + core_extra * c.attention_core_fwd_s + recompute_fwd
    if stack.tp_overlap:          # collectives behind the GEMMs: the longer of the two
        layer_fwd = max(c.layer_fwd_s, 2.0 * tp_collective) + a2a
        layer_bwd = max(bwd_kernels, (2.0 + recompute_comm + regather) * tp_collective) + 2.0 * a2a
    else:
        layer_fwd = c.layer_fwd_s + 2.0 * tp_collective + a2a
        layer_bwd = bwd_kernels + (2.0 + recompute_comm + regather) * tp_collective + 2.0 * a2a
    stage_layers = L / s.pp
    ends = 3.0 * c.ends_fwd_s                    # forward and backward of the LM head (and embedding)
    micro = stage_layers * (layer_fwd + layer_bwd) + ends

    # --- pipeline ---
    m = s.micro_batches
    v = s.interleave
    p2p_bytes = act / s.tp                        # scatter/gather: each tp device sends its slice
    inter_node = s.tp * s.pp > node
    p2p = 0.0
    if s.pp > 1:
        alpha, bus = (system.network_latency_s, system.network_Bps * system.network_efficiency) if inter_node \
            else (system.fabric.sync_latency_s, fabric_bus)
        p2p = 2.0 * v * (alpha + p2p_bytes / bus)
    pipeline = (m + (s.pp - 1) / v) * micro + m * p2p
    bubble = (s.pp - 1) / v * micro
    counts = stage_layers_of(L, s.pp, s.pp_layers, layer_fwd + layer_bwd, 3.0 * c.embedding_fwd_s, ends)
    pace_layers, pace_ends, widest = stage_layers, ends, stage_layers
    if len(set(counts)) > 1:      # uneven stages (dse.training.stages): the slowest sets the pace
        if v > min(counts):
            raise StudyError(f"must be at most the {min(counts)} layers of the shallowest stage", key="--interleave")
        times = stage_times(counts, layer_fwd + layer_bwd, 3.0 * c.embedding_fwd_s, ends)
        k = int(np.argmax(times))
        pipeline, bubble = pipeline_s(times, m, v) + m * p2p, (sum(times) - times[k]) / v
        pace_layers, pace_ends, widest = counts[k], times[k] - counts[k] * (layer_fwd + layer_bwd), max(counts)

    # --- data parallelism: gradients, then the optimizer ---
    dp_ranks_in_node = max(1, node // (s.tp * s.pp))
    dp_alpha, dp_bus = ((system.fabric.sync_latency_s, fabric_bus) if s.dp <= dp_ranks_in_node
                        else (system.network_latency_s, net_bus))
    params = c.params_per_device(s)
    widest_params = params if widest == stage_layers else params * widest / stage_layers   # the deepest stage's
    zero3 = 1.5 if s.zero == 3 else 1.0
    grads = zero3 * ring_s(s.dp, widest_params * abytes, dp_alpha, dp_bus)
    if s.overlap_grad_reduce:
        grads = max(0.0, grads - widest * layer_bwd)
    optimizer = widest_params / (s.dp if s.zero >= 1 else 1) * ADAM_BYTES_PER_PARAM / system.memory_Bps
    total = pipeline + grads + optimizer

    # --- memory ---
    tokens_mb = s.micro_batch * s.seq
    per_layer = tokens_mb * activation_bytes_per_token_layer(
        cfg, s.seq, s.tp, s.sequence_parallel, s.recompute, s.attention, stack.residual_bytes, stack.eager)
    in_flight = in_flight_of(s.pp, m, v)[0]      # the first stage's: the most (dse.training.stages)
    logits = tokens_mb * logits_bytes_per_token(cfg, s.tp, stack.logit_bytes, stack.residual_bytes)
    mem = device_bytes(params, stack, s.zero, s.dp, stage_layers * per_layer * in_flight, logits)
    if widest != stage_layers:
        mem = uneven_peak_bytes(counts, params / stage_layers, per_layer, logits, m, v, stack, s.zero, s.dp)

    tokens = s.global_batch * s.seq
    flops, flops_no_recompute = _flops(cfg, s, c)
    tflops = flops_no_recompute / total / s.devices / 1e12          # model FLOP/s: recomputation not counted
    mfu = tflops * 1e12 / system.chiplet.peak_flops(s.precision)
    tp_count = m * stage_layers * (4.0 + recompute_comm + regather)
    energy.compute(m * (stage_layers * (3.0 * c.layer_fwd_j + core_extra * c.attention_core_fwd_j + recompute_fwd_j)
                        + 3.0 * c.ends_fwd_j),
                   m * (stage_layers * (3.0 * c.layer_fwd_dram_j + core_extra * c.attention_core_fwd_dram_j
                                        + recompute_fwd_dram_j) + 3.0 * c.ends_fwd_dram_j))
    energy.send("tp_communication_j", tp_count * ring_bytes(s.tp, act), inter_node=s.tp > node)
    energy.send("ep_communication_j", m * stage_layers * 3.0 * a2a_bytes, inter_node=False)
    energy.send("pp_communication_j", m * 2.0 * v * p2p_bytes if s.pp > 1 else 0.0, inter_node=inter_node)
    energy.send("dp_communication_j", zero3 * ring_bytes(s.dp, params * abytes), inter_node=s.dp > dp_ranks_in_node)
    energy.optimizer(params / (s.dp if s.zero >= 1 else 1) * ADAM_BYTES_PER_PARAM)
    energy.active(total - bubble)
    energy.limit_power(total - bubble)          # the clock the power limit leaves the busy device
    energy.static(total, waiting=bubble)
    breakdown = {"compute_s": m * pace_layers * (c.layer_fwd_s + bwd_kernels) + m * pace_ends,
                 "tp_communication_s": max(0.0, m * pace_layers * (layer_fwd + layer_bwd - 3.0 * a2a
                                                                   - c.layer_fwd_s - bwd_kernels))
                 if s.tp > 1 else 0.0,          # exposed; none without tensor parallelism (no rounding residue)
                 "ep_communication_s": m * pace_layers * 3.0 * a2a,
                 "pp_communication_s": m * p2p, "bubble_s": bubble, "dp_communication_s": grads,
                 "optimizer_s": optimizer}
    return Iteration(iteration_s=total, tokens_per_s=tokens / total, model_tflops_per_device=tflops, mfu=mfu,
                     hardware_tflops_per_device=flops / total / s.devices / 1e12,
                     memory_per_device_bytes=mem, fits=bool(mem <= system.memory_bytes),
                     energy_j=energy.total_j * s.devices, power_per_device_w=energy.total_j / total, clock_fraction=energy.clock,
                     breakdown=breakdown, energy_breakdown=energy.parts_j(s.devices), stage_layers=counts)


def _flops(cfg: workloads.ModelConfig, s: Strategy, c: LayerCosts) -> tuple[float, float]:
    """(hardware FLOPs: what the devices execute, a full recomputation's extra forward included, as Megatron-LM
    SC'21 reports its TFLOP/s; model FLOPs: without recomputation, Megatron-LM's count of 6 N per token plus
    attention, for model FLOP/s and MFU). GPT-style dense models use Megatron's closed form; others three
    times the trace's forward FLOPs (plus one forward with full recomputation). Selective recomputation
    adds the attention core's forward to the hardware FLOPs (workloads.training.model_flops; the trace's
    core for the others)."""
    if cfg.model_type == "gpt2" and not cfg.experts:
        args = (s.global_batch, s.seq, cfg.layers, cfg.hidden, cfg.vocab)
        return model_flops(*args, recompute=s.recompute), model_flops(*args, recompute=False)
    batches = s.global_batch / s.micro_batch          # the trace holds every tp shard
    again = {"none": 0.0, "selective": c.attention_core_flops, "full": c.forward_flops}[s.recompute]
    return (3.0 * c.forward_flops + again) * batches, 3.0 * c.forward_flops * batches
