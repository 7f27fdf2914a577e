"""What a design gives up in accuracy: quality as the fraction of the 16-bit, all-experts model's
benchmark score kept under weight precision, KV-cache precision, expert pruning and skipping, from
published evaluations (data/quality.yaml; docs/quality.md). Knows only workloads' model configs."""
from .ensemble import CHINCHILLA, ROUTER_ACCURACY, chinchilla_loss, ensemble_score
from .estimate import QualityEstimate, estimate, model_params
from .evidence import load_data, prune_law, prune_rows, weight_law, weight_rows
from .terms import KV_BITS, mixed_weight_term, pruned_mass, skip_mass, weight_term

__all__ = ["CHINCHILLA", "ROUTER_ACCURACY", "chinchilla_loss", "ensemble_score", "QualityEstimate", "estimate", "model_params", "load_data", "prune_law", "prune_rows", "weight_law",
           "weight_rows", "KV_BITS", "mixed_weight_term", "pruned_mass", "skip_mass", "weight_term"]
