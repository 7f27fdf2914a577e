"""Quality of an ensemble of expert models: each member's published score weighted by the router's
traffic, with the router's accuracy.

A query belongs to member i's domain with probability ``t_i`` (the traffic a correct router sends it).
The router sends it there with probability ``a`` (its accuracy) and scores the member's in-domain score
``s_in_i``; otherwise to another member j (in proportion to the traffic) and scores that member's
general score ``s_j``: ``score = sum_i t_i (a s_in_i + (1 - a) sum_{j != i} t_j s_j / (1 - t_i))``.

What this can claim: with published general scores only (``s_in = s``), the ensemble scores the mean
of its members' scores weighted by the share of queries each actually answers (the traffic when the
router is right; misrouted queries shift the mix), so never more than its best member.
What it cannot claim: gains from specialisation (a member beating a larger dense model on its own
domain) need in-domain scores, which the caller must supply from a published source; and no published
mapping from a scaling-law loss to a benchmark score was retrieved, so `chinchilla_loss` (Hoffmann et al.
2022, Approach 3: ``L = E + A / N^alpha + B / D^beta``, E = 1.69, A = 406.4, B = 410.7, alpha = 0.34,
beta = 0.28) ranks members by expected pre-training loss but does not give a score. The router's accuracy
has no retrieved published default: 1.0 (perfect routing) is the optimistic bound, and the caller should
give a measured one.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import StudyError

CHINCHILLA = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)   # Hoffmann et al. 2022, Eq. 10
ROUTER_ACCURACY = 1.0      # no published default retrieved: the optimistic bound


def chinchilla_loss(params: float, tokens: float) -> float:
    """Expected pre-training loss (nats per token) of a model of ``params`` parameters trained on ``tokens``."""
    if not (params > 0 and tokens > 0 and math.isfinite(params) and math.isfinite(tokens)):
        raise StudyError("parameters and training tokens must be finite and > 0", key="chinchilla")
    c = CHINCHILLA
    return c["E"] + c["A"] / params ** c["alpha"] + c["B"] / tokens ** c["beta"]


def ensemble_score(scores, traffic, router_accuracy: float = ROUTER_ACCURACY, in_domain=None) -> float:
    """The ensemble's expected score (module docstring); ``traffic`` is normalised to sum to 1."""
    s = np.asarray(scores, dtype=float)
    t = np.asarray(traffic, dtype=float)
    s_in = s if in_domain is None else np.asarray(in_domain, dtype=float)
    if s.ndim != 1 or s.shape != t.shape or s.shape != s_in.shape or len(s) == 0:
        raise StudyError("scores, traffic and in-domain scores need one value per member", key="ensemble")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(s_in)) and np.all(t >= 0) and t.sum() > 0):
        raise StudyError("scores must be finite and traffic >= 0 with a positive sum", key="ensemble")
    if not 0.0 <= router_accuracy <= 1.0:
        raise StudyError(f"router accuracy must be in 0..1, got {router_accuracy}", key="router_accuracy")
    t = t / t.sum()
    if len(s) == 1:
        return float(s_in[0])
    others = np.array([(t @ s - t[i] * s[i]) / (1.0 - t[i]) if t[i] < 1.0 else s[i] for i in range(len(s))])
    return float(t @ (router_accuracy * s_in + (1.0 - router_accuracy) * others))
