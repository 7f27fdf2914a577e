"""The `Workload`: an operator table plus the graph of placement units that carry it.

Operator table (``Workload.ops``, one row per operator kind per unit, costs per *one* layer instance):

==================  ==========================================================================
column              meaning
==================  ==========================================================================
unit                placement unit (node of ``graph``) the operator belongs to
name                operator name (``qkv_proj``, ``attn_score``, ``down_proj`` ...)
engine              ``matrix`` (GEMM on the array / tensor cores) or ``vector`` (elementwise unit)
M, N, K             GEMM shape (M x K times K x N); 0 for vector operators
batch               independent GEMM instances per layer (e.g. sequences x KV heads)
elements            elements a vector operator touches (0 for GEMMs)
flops               floating-point operations of all ``batch`` instances
weight_bytes        parameter bytes the operator reads
act_in_bytes        activation bytes read; ``act_out_bytes`` written
kv_read_bytes       KV-cache bytes read; ``kv_write_bytes`` written
prob                probability the operator runs in a step (routed experts: touched at all)
tokens              expected tokens it processes when it runs
layers              identical layers the row stands for (the unit's layer count)
atomic_bytes        L2 sector traffic of the scalar atomic adds a vector operator issues (64 B each: the
                    sector read and written; ``index_add_``'s scatter), 0 for most rows
expert              routed-expert index within its layer (-1 for other units)
layer               first decoder layer of the row's unit (-1 for embedding / LM head / routers)
==================  ==========================================================================

Costs of a row are those of one run of the operator; ``prob`` is the probability it runs in a step
*given that its stage runs* (a dense or MoE model: every stage runs; an ensemble: see ``scenarios``).

Graph (``Workload.graph``, a networkx DiGraph): nodes are placement units with attributes ``kind``
(``embedding``, ``attention``, ``ffn``, ``expert``, ``shared_expert``, ``lm_head``, ``router``,
``composer``), ``stage``, ``layers``, ``expert`` (index within its layer, -1 otherwise), ``params`` and
``weight_bytes`` (stored, all layers), ``kv_bytes_per_token`` (all layers), ``prob`` (runs in a step,
given its stage runs), ``selection_prob`` (per-token selection probability within its model; 1 for
dense units), ``tokens`` (expected tokens the unit's model processes in a step when it runs),
``first_layer``, ``model`` (ensemble member, "" for a single model), ``logical`` and ``shards``
(tensor-parallel shards ``name.tp0`` ... of one logical unit). Edges carry ``bytes`` (activation bytes
sent per occurrence) and ``repeat`` (occurrences per step).

Stages (``Workload.stages``, columns ``stage, name, repeat, prob, after``): units of one stage may run
in parallel on different chiplets; stage ``s`` runs ``repeat`` times (identical layers), with marginal
probability ``prob`` of running in a step, once every stage in its ``after`` tuple has finished
(a DAG; a plain transformer is a chain).

Scenarios (``Workload.scenarios``): the sets of stages that run together in one step, with their
probabilities (summing to 1). A dense or MoE model has one scenario holding every stage; an ensemble
of experts has one per combination of expert models its routers can pick. The evaluator takes the
critical path through each scenario's stages and weights it by probability (expected latency, p99).

Affinity (``Workload.affinity``, per_layer mode with inter-layer routing affinity): expert pairs of
consecutive MoE layers that co-activate more than chance (columns AFFINITY_COLUMNS; docs/workloads.md).
Ensemble (``Workload.ensemble``): the node graph of an ensemble of experts, None for one model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .config import ModelConfig

OP_COLUMNS = ["unit", "name", "engine", "M", "N", "K", "batch", "elements", "flops", "weight_bytes",
              "act_in_bytes", "act_out_bytes", "kv_read_bytes", "kv_write_bytes", "prob", "tokens",
              "layers", "atomic_bytes"]
#: columns `Workload.ops` carries besides OP_COLUMNS
EXTRA_COLUMNS = ["expert", "layer"]
AFFINITY_COLUMNS = ["src", "dst", "layer", "next_layer", "prob", "lift", "tokens", "bytes"]


@dataclass
class Workload:
    """Per-unit operator trace of one inference step of a model (see module docstring)."""

    name: str
    phase: str
    batch: int
    context: int
    precision: str
    tokens_per_step: int
    ops: pd.DataFrame
    graph: nx.DiGraph
    stages: pd.DataFrame
    scenarios: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    #: co-activation of experts of consecutive MoE layers (per_layer mode with affinity; see docs)
    affinity: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=AFFINITY_COLUMNS))
    #: ensemble structure (nodes: routers, experts, composers with visit probabilities), None for one model
    ensemble: nx.DiGraph | None = None

    @property
    def units(self) -> list[str]:
        """Placement units in stage order."""
        return sorted(self.graph.nodes, key=lambda u: (self.graph.nodes[u]["stage"], u))

    def to_dict(self) -> dict:
        """JSON-ready view: the summary figures plus every operator row."""
        return {**self.summary, "ops": self.ops.to_dict(orient="records")}


def per_row(units: pd.Series, value_of: dict, dtype=None) -> np.ndarray:
    """``value_of[unit]`` for each row's unit (an operator table's ``unit`` column), looked up once per
    distinct unit: ``units.map(value_of)`` took ~0.05 s for DeepSeek-V3 per layer's 15,000 units."""
    codes, names = pd.factorize(units)
    return np.array(list(map(value_of.__getitem__, names.tolist())), dtype=dtype)[codes]


def summarize(wl: Workload, cfg: ModelConfig | None, logical_params: dict[str, float],
              kv_per_token_layer: float, tp: int = 1) -> dict:
    """Headline figures of one step (``Workload.summary``): parameters (total, active per token), KV cache
    bytes per token, FLOPs, weight and KV bytes per step (weighted by the probability each row runs), units."""
    g, ops = wl.graph, wl.ops
    total = float(sum(logical_params.values()))
    active = 0.0
    for unit, params in logical_params.items():
        node = g.nodes[unit] if unit in g else g.nodes[unit + ".tp0"]
        active += params * node["selection_prob"]
    stage_prob = wl.stages.set_index("stage")["prob"].to_dict()
    unit_stage_prob = pd.Series(per_row(ops["unit"], {u: stage_prob[d["stage"]] for u, d in g.nodes(data=True)}),
                                index=ops.index)
    weighted = ops["layers"] * ops["prob"] * unit_stage_prob
    expert_probs = [d["prob"] for _, d in g.nodes(data=True) if d["kind"] == "expert"]
    summary = dict(
        model=wl.name, model_type=cfg.model_type if cfg else "ensemble", phase=wl.phase, batch=wl.batch,
        context=wl.context, precision=wl.precision, tensor_parallel=tp,
        total_params=total, active_params_per_token=float(active),
        kv_cache_bytes_per_token=float(kv_per_token_layer * (cfg.layers if cfg else 1)),
        flops_per_step=float((ops["flops"] * weighted).sum()),
        weight_bytes_per_step=float((ops["weight_bytes"] * weighted).sum()),
        kv_bytes_per_step=float(((ops["kv_read_bytes"] + ops["kv_write_bytes"]) * weighted).sum()),
        tokens_per_step=float(wl.tokens_per_step),
        experts=int(cfg.experts if cfg and cfg.is_moe else 0), top_k=int(cfg.top_k if cfg else 0),
        moe_layers=int(sum(cfg.moe_layers)) if cfg else 0, layers=int(cfg.layers) if cfg else 0,
        units=g.number_of_nodes())
    if cfg is not None and cfg.is_moe:
        # mean over MoE layers of the distinct experts a step touches
        layers = np.array([d["layers"] for _, d in g.nodes(data=True) if d["kind"] == "expert"], float)
        summary["expected_distinct_experts_per_layer"] = float(
            np.dot(expert_probs, layers) / layers.sum() * cfg.experts)
    else:
        summary["expected_distinct_experts_per_layer"] = 0.0
    return summary
