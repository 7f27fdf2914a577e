"""Normalise a HuggingFace ``config.json`` into the numbers the operator builder needs.

Key names follow each family's checkpoint config (see ``shared/reference/workloads.md``); transformers'
class defaults are never used as a model's numbers, so a key a family needs and the file lacks is an error
naming the key. Which layers are MoE follows the families' own rules:

* deepseek_v2 / deepseek_v3: layer i is MoE iff ``i >= first_k_dense_replace`` and
  ``i % moe_layer_freq == 0`` (vLLM / HF DeepseekV3DecoderLayer);
* qwen2_moe / qwen3_moe: MoE iff ``i not in mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``;
* mixtral, olmoe: every layer.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .errors import WorkloadError

#: Families whose FFN is gated (SwiGLU: gate, up and down matrices) rather than two matrices.
GATED_FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                  "deepseek_v2", "deepseek_v3", "olmoe", "phi3"}
SUPPORTED_FAMILIES = GATED_FAMILIES | {"gpt2"}
MLA_FAMILIES = {"deepseek_v2", "deepseek_v3"}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of one decoder-only transformer, in the builder's terms (widths in elements)."""

    name: str
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_width: int                 # dense FFN width (layers that are not MoE)
    vocab: int
    gated_ffn: bool
    tied_embeddings: bool
    activation: str = "silu"
    learned_positions: int = 0     # rows of a learned position table (gpt2), 0 for RoPE
    layernorm: bool = False        # LayerNorm with bias (gpt2) instead of RMSNorm
    qkv_bias: bool = False         # biases on the q/k/v projections (gpt2, qwen2, llama attention_bias)
    o_bias: bool = False           # bias on the output projection (gpt2, llama attention_bias)
    mlp_bias: bool = False         # FFN biases (gpt2, llama mlp_bias)
    qk_norm: str = ""              # "" | "head" (qwen3: RMSNorm per head_dim) | "full" (olmoe: over all heads)
    # MLA (deepseek): low-rank query and joint KV compression; the cache holds kv_lora + rope per token
    mla: bool = False
    q_lora_rank: int = 0           # 0: plain query projection (DeepSeek-V2-Lite)
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE
    experts: int = 0               # routed experts per MoE layer, 0 for dense
    top_k: int = 0
    expert_width: int = 0
    shared_experts: int = 0        # shared experts (all run on every token), each of width shared_width
    shared_width: int = 0
    shared_gate: bool = False      # sigmoid gate on the shared expert output (qwen2_moe)
    router_bias: bool = False      # per-expert score-correction bias (deepseek_v3 noaux_tc)
    n_group: int = 1               # group-limited routing (deepseek_v3): groups and groups kept
    topk_group: int = 1
    norm_topk_prob: bool = True    # the k selected weights renormalised to sum 1 (HF mixtral always; olmoe,
                                   # qwen2_moe, qwen3_moe and deepseek by config.json's norm_topk_prob)
    moe_layers: tuple[bool, ...] = field(default=())  # per layer: MoE or dense

    @property
    def is_moe(self) -> bool:
        return self.experts > 0 and any(self.moe_layers)

    @property
    def kv_elements_per_token_layer(self) -> int:
        """KV-cache elements one token stores in one layer (MLA: the shared latent plus the RoPE key)."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim


def _get(cfg: dict, keys: tuple[str, ...], source: str, default=None, required=True):
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if required and default is None:
        raise WorkloadError(f"{source}: missing key {' / '.join(repr(k) for k in keys)}")
    return default


#: largest size a config key may give (widths, layers, heads, vocabulary, experts); published models stay
#: below 10^6 (vocabularies of 256 K), and the operator tables multiply several of them together
MAX_DIMENSION = 10_000_000


def _int(cfg: dict, keys: tuple[str, ...], source: str, default=None, required=True) -> int:
    value = _get(cfg, keys, source, default, required)
    if value is None:
        return 0
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or int(value) != value or not 0 <= value <= MAX_DIMENSION):
        key = next((k for k in keys if cfg.get(k) is not None), keys[0])
        raise WorkloadError(f"{source}: key {key!r} must be a whole number in 0..{MAX_DIMENSION:,}, got {value!r}")
    return int(value)


def _moe_layers(cfg: dict, model_type: str, layers: int, experts: int, source: str) -> tuple[bool, ...]:
    if not experts:
        return tuple(False for _ in range(layers))
    if model_type in MLA_FAMILIES:
        first = _int(cfg, ("first_k_dense_replace",), source)
        freq = max(_int(cfg, ("moe_layer_freq",), source, default=1), 1)
        return tuple(i >= first and i % freq == 0 for i in range(layers))
    if model_type in ("qwen2_moe", "qwen3_moe"):
        step = max(_int(cfg, ("decoder_sparse_step",), source, default=1), 1)
        dense = set(cfg.get("mlp_only_layers") or [])
        return tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
    return tuple(True for _ in range(layers))


def parse_config(cfg: dict, name: str = "model", source: str = "config.json") -> ModelConfig:
    """Build a :class:`ModelConfig` from a HuggingFace config dictionary."""
    if not isinstance(cfg, dict):
        raise WorkloadError(f"{source}: a model config is a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_FAMILIES:
        raise WorkloadError(
            f"{source}: unsupported model_type {model_type!r}; allowed: {', '.join(sorted(SUPPORTED_FAMILIES))}")
    gpt2 = model_type == "gpt2"
    hidden = _int(cfg, ("hidden_size", "n_embd", "d_model"), source)
    layers = _int(cfg, ("num_hidden_layers", "n_layer", "num_layers"), source)
    heads = _int(cfg, ("num_attention_heads", "n_head", "num_heads"), source)
    if hidden < 1 or layers < 1 or heads < 1:
        raise WorkloadError(f"{source}: hidden size, layers and heads must be >= 1")
    kv_heads = _int(cfg, ("num_key_value_heads",), source, default=heads)
    head_dim = _int(cfg, ("head_dim",), source, default=hidden // heads)
    if heads % max(kv_heads, 1):
        raise WorkloadError(f"{source}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    vocab = _int(cfg, ("vocab_size",), source)
    if gpt2:   # n_inner null means 4 x n_embd (GPT2MLP)
        ffn_width = _int(cfg, ("n_inner",), source, required=False) or 4 * hidden
    else:
        ffn_width = _int(cfg, ("intermediate_size",), source)
    tied = bool(cfg.get("tie_word_embeddings", gpt2))
    activation = str(cfg.get("hidden_act") or cfg.get("activation_function") or ("gelu_new" if gpt2 else "silu"))
    llama_like = model_type in ("llama", "mistral")
    attention_bias = bool(cfg.get("attention_bias", False)) if llama_like else False

    mla = model_type in MLA_FAMILIES
    mla_dims = {}
    if mla:
        mla_dims = dict(
            q_lora_rank=_int(cfg, ("q_lora_rank",), source, required=False),
            kv_lora_rank=_int(cfg, ("kv_lora_rank",), source),
            qk_nope_head_dim=_int(cfg, ("qk_nope_head_dim",), source),
            qk_rope_head_dim=_int(cfg, ("qk_rope_head_dim",), source),
            v_head_dim=_int(cfg, ("v_head_dim",), source))

    moe: dict = {}
    if model_type == "mixtral":
        moe = dict(experts=_int(cfg, ("num_local_experts",), source), expert_width=ffn_width)
    elif model_type == "olmoe":
        moe = dict(experts=_int(cfg, ("num_experts",), source), expert_width=ffn_width)
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        moe = dict(experts=_int(cfg, ("num_experts",), source),
                   expert_width=_int(cfg, ("moe_intermediate_size",), source))
        if model_type == "qwen2_moe":
            shared = _int(cfg, ("shared_expert_intermediate_size",), source, required=False)
            moe.update(shared_experts=1 if shared else 0, shared_width=shared, shared_gate=bool(shared))
    elif mla and cfg.get("n_routed_experts"):
        width = _int(cfg, ("moe_intermediate_size",), source)
        n_shared = _int(cfg, ("n_shared_experts",), source, required=False)
        moe = dict(experts=_int(cfg, ("n_routed_experts",), source), expert_width=width,
                   shared_experts=1 if n_shared else 0, shared_width=n_shared * width,
                   router_bias=cfg.get("topk_method") == "noaux_tc",
                   n_group=_int(cfg, ("n_group",), source, default=1),
                   topk_group=_int(cfg, ("topk_group",), source, default=1))
    if moe and not moe["experts"]:
        key = "num_local_experts" if model_type == "mixtral" else "num_experts"
        raise WorkloadError(f"{source}: {key} is 0, but {model_type} is a mixture-of-experts family; give its "
                            "routed experts (>= 1), or a dense family (llama, mistral, qwen2, qwen3)")
    if moe.get("experts"):
        moe["top_k"] = _int(cfg, ("num_experts_per_tok",), source)
        if not 1 <= moe["top_k"] <= moe["experts"]:
            raise WorkloadError(f"{source}: num_experts_per_tok {moe['top_k']} must be in 1..{moe['experts']}")
        moe["norm_topk_prob"] = model_type == "mixtral" or bool(cfg.get("norm_topk_prob", False))
    moe_layers = _moe_layers(cfg, model_type, layers, moe.get("experts", 0), source)

    return ModelConfig(
        name=name, model_type=model_type, hidden=hidden, layers=layers, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, ffn_width=ffn_width, vocab=vocab,
        gated_ffn=model_type in GATED_FAMILIES, tied_embeddings=tied, activation=activation,
        learned_positions=_int(cfg, ("n_positions",), source) if gpt2 else 0,
        layernorm=gpt2, qkv_bias=gpt2 or model_type in ("qwen2", "qwen2_moe") or attention_bias,
        o_bias=gpt2 or attention_bias, mlp_bias=gpt2 or (llama_like and bool(cfg.get("mlp_bias", False))),
        qk_norm="head" if model_type in ("qwen3", "qwen3_moe") else ("full" if model_type == "olmoe" else ""),
        mla=mla, **mla_dims, **moe, moe_layers=moe_layers)


def list_presets() -> list[str]:
    """Names of the bundled model presets (their checkpoints' config.json files)."""
    folder = resources.files("workloads") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def read_config(model: str) -> tuple[dict, str, str]:
    """(config dictionary, display name, source) of a bundled preset name or a config.json path."""
    if not isinstance(model, str) or not model:
        raise WorkloadError(f"a model is a preset name or a path to a config.json, got {model!r}")
    if model in list_presets():
        text = (resources.files("workloads") / "presets" / f"{model}.json").read_text()
        return json.loads(text), model, f"preset {model}"
    path = Path(model)
    if path.suffix == ".json" or path.exists():
        try:
            cfg = json.loads(path.read_text())
        except OSError as exc:
            raise WorkloadError(f"cannot read model config {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise WorkloadError(f"{path} is not a text file: a model is a preset name or a HuggingFace "
                                "config.json (UTF-8 JSON)") from None
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{path} is not valid JSON: {exc}") from None
        return cfg, path.parent.name or path.stem, str(path)
    raise WorkloadError(f"unknown model {model!r}; bundled presets: {', '.join(list_presets())}, "
                        "or give a path to a HuggingFace config.json")


def load_model(model: str) -> ModelConfig:
    """Load a bundled preset by name, or a HuggingFace ``config.json`` by path."""
    cfg, name, source = read_config(model)
    return parse_config(cfg, name=name, source=source)
