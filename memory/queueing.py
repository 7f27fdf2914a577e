"""Queueing delay of a DRAM channel as its utilisation rises: the M/D/1 queue.

Requests arrive at random (Poisson) and each occupies the channel's data bus for a fixed service time
S (one burst at the sustained rate), so a channel is an M/D/1 server. Its mean waiting time is the
Pollaczek-Khinchine formula with a deterministic service (coefficient of variation 0):

    W = rho S / (2 (1 - rho))      (P-K mean-value formula; Kleinrock, Queueing Systems Vol. 1, 1975, ch. 5)

with rho the utilisation (offered load over sustained bandwidth). At rho >= 1 the queue grows without
bound and W is infinite.
"""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def md1_wait_s(utilisation: float, service_s: float) -> float:
    """Mean waiting time (before service) of an M/D/1 queue; ``inf`` at utilisation >= 1."""
    if utilisation <= 0.0:
        return 0.0
    if utilisation >= 1.0:
        return np.inf
    return utilisation * service_s / (2.0 * (1.0 - utilisation))


@nb.njit(cache=True)
def md1_wait_array_s(utilisation: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    """`md1_wait_s` over arrays of the same shape (a whole population per call)."""
    out = np.empty(utilisation.shape[0])
    for i in range(utilisation.shape[0]):
        out[i] = md1_wait_s(utilisation[i], service_s[i])
    return out
