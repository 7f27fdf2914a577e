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

import networkx as nx
import pandas as pd

OP_COLUMNS = ["unit", "name", "engine", "M", "N", "K", "batch", "elements", "flops", "weight_bytes",
              "act_in_bytes", "act_out_bytes", "kv_read_bytes", "kv_write_bytes", "prob", "tokens",
              "layers"]
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
