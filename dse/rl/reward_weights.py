"""``reward_weights``: how the environments of dse.rl trade time, energy and utilisation.

A mapping of ``time``, ``energy`` and ``utilisation`` (any may be left out: 0) to finite weights >= 0,
not all zero. The default ``{"time": 1, "energy": 0, "utilisation": 0}`` is each environment's reward
from before the weights existed. How each environment scales its terms, so that the weights mean
something, is in its module docstring (dse.rl.training_env, dse.rl.cluster_reward) and docs/rl.md.
"""
from __future__ import annotations

import math

from ..errors import StudyError

TERMS = ("time", "energy", "utilisation")
DEFAULT = {"time": 1.0, "energy": 0.0, "utilisation": 0.0}


def reward_weights(value, key: str = "reward_weights") -> dict[str, float]:
    """The weights of ``value`` (None: the default), each term present; bad input names ``key``."""
    if value is None:
        return dict(DEFAULT)
    if not isinstance(value, dict):
        raise StudyError(f"must be a mapping of {', '.join(TERMS)} to weights, got {value!r}", key=key)
    unknown = sorted(set(value) - set(TERMS), key=str)
    if unknown:
        raise StudyError(f"unknown term {unknown[0]!r}; allowed: {', '.join(TERMS)}", key=key)
    out = {}
    for term in TERMS:
        w = value.get(term, 0.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise StudyError(f"{term} must be a finite weight >= 0, got {w!r}", key=key)
        out[term] = float(w)
    if not any(out.values()):
        raise StudyError("at least one weight must be above 0", key=key)
    return out
