"""LLM workloads: model configs and presets -> per-unit operator traces (see `Workload`)."""
from .config import ModelConfig, list_presets, load_model, parse_config
from .errors import WorkloadError
from .precision import BYTES_PER_ELEMENT, bytes_per_element
from .routing import expected_distinct_experts, selection_probabilities, touch_probability
from .transformer import PHASES, extract_transformer
from .workload import OP_COLUMNS, Workload


def extract(model: str, phase: str = "decode", batch: int = 1, context: int = 2048, precision: str = "bf16",
            routing: dict | None = None, per_layer: bool = False, seed: int = 0) -> Workload:
    """Operator trace of one step of a preset or HuggingFace config.json (see `extract_transformer`)."""
    return extract_transformer(load_model(model), phase=phase, batch=batch, context=context,
                               precision=precision, routing=routing, per_layer=per_layer, seed=seed)


__all__ = ["ModelConfig", "Workload", "WorkloadError", "OP_COLUMNS", "PHASES", "BYTES_PER_ELEMENT",
           "bytes_per_element", "extract", "extract_transformer", "list_presets", "load_model",
           "parse_config", "selection_probabilities", "touch_probability", "expected_distinct_experts"]
