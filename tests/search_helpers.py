"""Small helpers shared by tests."""
import numpy as np


def dominates(a, b) -> bool:
    """True when objective vector a (minimised) dominates b."""
    a, b = np.asarray(a), np.asarray(b)
    return bool((a <= b).all() and (a < b).any())
