"""Normalise a HuggingFace ``config.json`` into the few numbers the operator builder needs.

Key names follow each family's checkpoint config (see ``shared/reference/workloads.md``); transformers'
class defaults are never used as a model's numbers, so a key a family needs and the file lacks is an error.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .errors import WorkloadError

#: Families whose FFN is gated (SwiGLU: gate, up and down matrices) rather than two matrices.
GATED_FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                  "deepseek_v2", "deepseek_v3", "olmoe", "phi3"}
SUPPORTED_FAMILIES = GATED_FAMILIES | {"gpt2"}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of one decoder-only transformer, in the builder's terms."""

    name: str
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_width: int                 # dense FFN width
    vocab: int
    gated_ffn: bool
    tied_embeddings: bool
    learned_positions: int = 0     # rows of a learned position table (gpt2), 0 for RoPE
    attention_bias: bool = False   # q/k/v/o (and FFN) biases (gpt2)
    experts: int = 0               # routed experts per MoE layer, 0 for dense
    top_k: int = 0
    expert_width: int = 0
    shared_experts: int = 0        # count of shared experts of width shared_width
    shared_width: int = 0
    shared_gate: bool = False      # sigmoid gate on the shared expert (qwen2_moe)
    moe_layers: tuple[bool, ...] = field(default=())  # per layer: MoE or dense

    @property
    def is_moe(self) -> bool:
        return self.experts > 0 and any(self.moe_layers)


def _get(cfg: dict, keys: tuple[str, ...], source: str, default=None, required=True):
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if required and default is None:
        raise WorkloadError(f"{source}: missing key {' / '.join(repr(k) for k in keys)}")
    return default


def parse_config(cfg: dict, name: str = "model", source: str = "config.json") -> ModelConfig:
    """Build a :class:`ModelConfig` from a HuggingFace config dictionary."""
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_FAMILIES:
        raise WorkloadError(
            f"{source}: unsupported model_type {model_type!r}; allowed: {', '.join(sorted(SUPPORTED_FAMILIES))}")
    hidden = int(_get(cfg, ("hidden_size", "n_embd", "d_model"), source))
    layers = int(_get(cfg, ("num_hidden_layers", "n_layer", "num_layers"), source))
    heads = int(_get(cfg, ("num_attention_heads", "n_head", "num_heads"), source))
    kv_heads = int(_get(cfg, ("num_key_value_heads",), source, default=heads))
    head_dim = int(_get(cfg, ("head_dim",), source, default=hidden // heads))
    vocab = int(_get(cfg, ("vocab_size",), source))
    gpt2 = model_type == "gpt2"
    ffn_width = int(_get(cfg, ("n_inner",), source, required=False) or 0) if gpt2 else 0
    if gpt2 and not ffn_width:
        ffn_width = 4 * hidden
    if not gpt2:
        ffn_width = int(_get(cfg, ("intermediate_size",), source))
    tied = bool(cfg.get("tie_word_embeddings", gpt2))

    experts = top_k = expert_width = 0
    moe_layers = tuple(False for _ in range(layers))
    if model_type == "mixtral":
        experts = int(_get(cfg, ("num_local_experts",), source))
        top_k = int(_get(cfg, ("num_experts_per_tok",), source))
        expert_width = ffn_width
        moe_layers = tuple(True for _ in range(layers))
    return ModelConfig(
        name=name, model_type=model_type, hidden=hidden, layers=layers, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, ffn_width=ffn_width, vocab=vocab,
        gated_ffn=model_type in GATED_FAMILIES, tied_embeddings=tied,
        learned_positions=int(cfg.get("n_positions", 0)) if gpt2 else 0,
        attention_bias=gpt2, experts=experts, top_k=top_k, expert_width=expert_width,
        moe_layers=moe_layers)


def list_presets() -> list[str]:
    """Names of the bundled model presets (their checkpoints' config.json files)."""
    folder = resources.files("workloads") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def load_model(model: str) -> ModelConfig:
    """Load a bundled preset by name, or a HuggingFace ``config.json`` by path."""
    if model in list_presets():
        text = (resources.files("workloads") / "presets" / f"{model}.json").read_text()
        return parse_config(json.loads(text), name=model, source=f"preset {model}")
    path = Path(model)
    if path.suffix == ".json" or path.exists():
        try:
            cfg = json.loads(path.read_text())
        except OSError as exc:
            raise WorkloadError(f"cannot read model config {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{path} is not valid JSON: {exc}") from None
        return parse_config(cfg, name=path.parent.name or path.stem, source=str(path))
    raise WorkloadError(f"unknown model {model!r}; bundled presets: {', '.join(list_presets())}, "
                        "or give a path to a HuggingFace config.json")
