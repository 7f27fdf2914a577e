"""Study schema: the ``workload`` section (one model or an ensemble of experts; phase, batch, routing).

A study names either ``model`` (a preset or a HuggingFace config.json) or ``ensemble`` (experts,
routers and composers; see docs/workloads.md), never both.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import (BeforeValidator, Field, NonNegativeInt, PositiveInt, ValidationInfo, field_validator,
                      model_validator)

import workloads

from . import limits
from .common import StrictModel


#: routing skew beyond these bounds is one expert per layer taking every token (a routing trace says that
#: directly); Dirichlet draws below ALPHA_MIN underflow to exact zeros for all but one expert
ZIPF_S_MAX = 100.0
ALPHA_MIN, ALPHA_MAX = 1e-3, 1e6


def _few_nodes(value):
    if isinstance(value, list) and len(value) > limits.ENSEMBLE_NODES.limit:
        raise ValueError(f"{len(value):,} nodes; " + limits.ENSEMBLE_NODES.message("an ensemble holds"))
    return value


def relative_to_study(value: str | None, info: ValidationInfo) -> str | None:
    """A relative file path resolved against the study file's folder (``base_dir`` in the validation
    context) when the file is there; presets and absolute paths unchanged."""
    base = (info.context or {}).get("base_dir") if info is not None else None
    if value is None or base is None or value in workloads.list_presets() or Path(value).is_absolute():
        return value
    candidate = Path(base) / value
    return str(candidate) if candidate.exists() else value


class RoutingSpec(StrictModel):
    #: uniform, zipf (exponent s), dirichlet (concentration alpha) or trace (a JSONL routing trace)
    distribution: Literal["uniform", "zipf", "dirichlet", "trace"] = "uniform"
    s: float = Field(1.0, ge=0.0, le=ZIPF_S_MAX, description="Zipf exponent")
    alpha: float = Field(1.0, ge=ALPHA_MIN, le=ALPHA_MAX, description="Dirichlet concentration (small: skewed)")
    trace: str | None = Field(None, description="JSONL routing trace, rows {layer, token, experts, weights}")
    affinity: float = Field(0.0, ge=0.0, le=1.0, description="inter-layer expert affinity rho (per_layer mode)")
    #: random seed of the sampled routing
    seed: Annotated[NonNegativeInt, limits.at_most(limits.SEED)] = 0

    _trace = field_validator("trace")(lambda value, info: relative_to_study(value, info))

    @model_validator(mode="after")
    def _trace_given(self):
        if (self.distribution == "trace") != (self.trace is not None):
            raise ValueError("routing.trace (a JSONL file) goes with distribution: trace, and only with it")
        return self


def _check_model(value: str | None, info: ValidationInfo) -> str | None:
    value = relative_to_study(value, info)
    if value is not None:
        try:
            workloads.load_model(value)
        except workloads.WorkloadError as exc:
            raise ValueError(str(exc)) from None
    return value


class ClassifierSpec(StrictModel):
    in_features: PositiveInt = Field(description="width of the pooled prompt representation it reads")


class RouterSpec(StrictModel):
    model: str | None = Field(None, description="a small LM used as the router (preset or config.json)")
    #: a linear classifier over the pooled prompt instead of a model
    classifier: ClassifierSpec | None = None

    _model = field_validator("model")(_check_model)

    @model_validator(mode="after")
    def _one(self):
        if (self.model is None) == (self.classifier is None):
            raise ValueError("a router is either model: <preset> or classifier: {in_features: F}")
        return self


class EnsembleNodeSpec(StrictModel):
    #: the node's name, as edges name it
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    model: str | None = Field(None, description="expert: a preset or config.json path")
    tp: Annotated[PositiveInt, limits.at_most(limits.COPIES)] = Field(1, description="tensor-parallel shards of "
                                                                        "this expert")
    #: a router: a small model or a classifier choosing the children a request goes to
    router: RouterSpec | None = None
    #: a composer: average (representation averaging) or weight_sum (weight summation) of its inputs
    composer: Literal["average", "weight_sum"] | None = None
    top_k: PositiveInt = Field(1, description="router: children each request goes to")
    #: router without edge probabilities: how its children are chosen
    distribution: Literal["uniform", "zipf", "dirichlet"] = "uniform"
    #: Zipf exponent of the router's choice (distribution zipf)
    s: float = Field(1.0, ge=0.0, le=ZIPF_S_MAX)
    #: Dirichlet concentration of the router's choice (distribution dirichlet; small: skewed)
    alpha: float = Field(1.0, ge=ALPHA_MIN, le=ALPHA_MAX)

    _model = field_validator("model")(_check_model)

    @model_validator(mode="after")
    def _one_role(self):
        roles = [r for r in ("model", "router", "composer") if getattr(self, r) is not None]
        if len(roles) != 1:
            raise ValueError(f"node {self.name!r} needs exactly one of model, router, composer"
                             f" (got {', '.join(roles) or 'none'})")
        return self


class EnsembleSpec(StrictModel):
    #: the ensemble's name, for reports
    name: str = "ensemble"
    #: chain (each node feeds the next), tree (routers over experts) or graph (edges as given)
    morphology: Literal["chain", "tree", "graph"] = "graph"
    #: request: routers choose in prefill and the choice holds while decoding; token: every step
    route_every: Literal["request", "token"] = "request"
    #: the ensemble's experts, routers and composers
    nodes: Annotated[list[EnsembleNodeSpec], BeforeValidator(_few_nodes)] = Field(min_length=1)
    edges: list[list[str | float]] | None = Field(
        None, description="[src, dst] or [src, dst, probability] (router edges); chain: defaults to node order")
    max_scenarios: Annotated[PositiveInt, limits.at_most(limits.SCENARIOS)] = Field(
        64, description="most step scenarios kept (sampled beyond)")

    def to_spec(self) -> dict:
        """The plain dictionary `workloads.extract_ensemble` reads."""
        spec = self.model_dump(exclude_none=True, exclude={"max_scenarios"})
        for node in spec["nodes"]:
            for key, default in (("tp", 1), ("top_k", 1), ("distribution", "uniform"), ("s", 1.0), ("alpha", 1.0)):
                if node.get(key) == default:
                    node.pop(key)
        return spec


#: a training run's largest token budget: 10^16 (about 1,000 x the largest published pretraining runs)
MAX_TRAINING_TOKENS = 1e16


class WorkloadSpec(StrictModel):
    model: str | None = Field(None, description="bundled preset name or path to a HuggingFace config.json")
    _model_path = field_validator("model")(lambda value, info: relative_to_study(value, info))
    ensemble: EnsembleSpec | None = Field(None, description="an ensemble of expert models instead of one model")
    #: prefill (the whole prompt), decode (one token per sequence), serve (requests under SLOs, with serving:) or train (with training:)
    phase: Literal["prefill", "decode", "train", "serve"] = "decode"
    #: sequences processed together (phase train: the micro-batch)
    batch: Annotated[PositiveInt, limits.at_most(limits.BATCH)] = 1
    #: tokens of context each sequence attends to (phase train: the sequence length)
    context: Annotated[PositiveInt, limits.at_most(limits.CONTEXT)] = 2048
    #: the weights' and activations' element type
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    kv_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] | None = Field(
        None, description="KV-cache element type (default: the weights' precision, at least 8 bits)")
    attention: Literal["fused", "unfused"] = Field("unfused", description=(
        "unfused: Q.K^T, softmax and P.V are kernels of their own; fused: one kernel keeping the scores on "
        "chip and skipping masked blocks (FlashAttention; docs/workloads.md); default fused in phase "
        "train (every current training stack; dse/training/memory.py), unfused otherwise"))
    elementwise: Literal["fused", "unfused"] = Field("fused", description=(
        "fused: each norm, RoPE, activation and the MoE routing one kernel (serving stacks' fused kernels, "
        "vLLM's fused_moe); unfused: the kernels plain PyTorch runs (RoPE in four a tensor, the KV cache "
        "copied, SiLU and its product apart, HuggingFace's MoE block; workloads/layers.py)"))
    #: how a MoE layer's experts run: fused, loop, sum or index_add (default: loop with elementwise unfused, else fused)
    moe_form: Literal["fused", "loop", "sum", "index_add"] | None = Field(None, description=(
        "how a MoE layer's experts run: fused (vLLM's fused_moe), loop (HuggingFace's loop over the experts), "
        "sum or index_add (torch.bmm over the stacked experts at a common padded count, combined by a weighted "
        "sum or by index_add_'s atomics; workloads/layers.py); default loop with elementwise unfused, else fused"))
    #: true: each layer's experts are placement units of their own; false: one unit per expert shared by every layer
    per_layer: bool = False
    tokens: float | None = Field(None, gt=0, le=MAX_TRAINING_TOKENS, description=(
        "phase train: the training run's token budget (time, energy and carbon to train)"))
    tp: Annotated[PositiveInt, limits.at_most(limits.COPIES)] = Field(
        1, description="tensor-parallel shards of the model's dense units")
    expert_tp: bool = Field(False, description="shard routed experts tp ways too (TensorRT-LLM's MoE TP)")
    #: how tokens pick routed experts
    routing: RoutingSpec = RoutingSpec()

    @model_validator(mode="before")
    @classmethod
    def _training_attention(cls, data):
        """Training defaults to fused attention (FlashAttention stores no scores; docs/training.md)."""
        if isinstance(data, dict) and "attention" not in data and data.get("phase") == "train":
            return {**data, "attention": "fused"}
        return data

    @model_validator(mode="after")
    def _model_or_ensemble(self):
        if (self.model is None) == (self.ensemble is None):
            raise ValueError("give exactly one of workload.model (one LLM) or workload.ensemble (experts, "
                             "routers, composers)")
        return self

    @property
    def label(self) -> str:
        """What the workload is, for messages and reports."""
        return self.model if self.model is not None else f"ensemble {self.ensemble.name}"

    def model_refs(self) -> list[tuple[str, str]]:
        """(study key below ``workload``, model) of every model the workload names."""
        if self.model is not None:
            return [("model", self.model)]
        refs = []
        for i, node in enumerate(self.ensemble.nodes):
            if node.model is not None:
                refs.append((f"ensemble.nodes[{i}].model", node.model))
            if node.router is not None and node.router.model is not None:
                refs.append((f"ensemble.nodes[{i}].router.model", node.router.model))
        return refs
