"""LLM workloads: model configs, presets and ensembles -> per-unit operator traces (see `Workload`)."""
from .config import ModelConfig, list_presets, load_model, parse_config, read_config
from .ensemble import extract_ensemble
from .errors import WorkloadError
from .export import to_chakra, to_scalesim_topology, write_ops
from .precision import BYTES_PER_ELEMENT, bytes_per_element
from .routing import (DISTRIBUTIONS, Router, RoutingTrace, expected_distinct_experts, selection_probabilities,
                      touch_probability)
from .layers import BATCHED_FORMS
from .transformer import MOE_FORMS, PHASES, extract_transformer
from .workload import AFFINITY_COLUMNS, OP_COLUMNS, Workload


def extract(model: str, phase: str = "decode", batch: int = 1, context: int = 2048, precision: str = "bf16",
            routing: dict | None = None, per_layer: bool = False, seed: int = 0, tp: int = 1,
            kv_precision: str | None = None, expert_tp: bool = False, fused_attention: bool = False,
            unfused_elementwise: bool = False, moe_form: str | None = None) -> Workload:
    """Operator trace of one step of a preset or HuggingFace config.json (see `extract_transformer`)."""
    return extract_transformer(load_model(model), phase=phase, batch=batch, context=context,
                               precision=precision, routing=routing, per_layer=per_layer, seed=seed, tp=tp,
                               kv_precision=kv_precision, expert_tp=expert_tp, fused_attention=fused_attention,
                               unfused_elementwise=unfused_elementwise, moe_form=moe_form)


__all__ = ["BATCHED_FORMS", "MOE_FORMS", "ModelConfig", "Workload", "WorkloadError", "OP_COLUMNS", "AFFINITY_COLUMNS", "PHASES",
           "BYTES_PER_ELEMENT", "DISTRIBUTIONS", "Router", "RoutingTrace", "bytes_per_element", "extract",
           "extract_ensemble", "extract_transformer", "list_presets", "load_model", "parse_config", "read_config",
           "selection_probabilities", "touch_probability", "expected_distinct_experts", "write_ops",
           "to_scalesim_topology", "to_chakra"]
