"""Cycle model of a GEMM on an R x C systolic array, after SCALE-Sim's analytical model.

For a GEMM (M x K) @ (K x N) the dataflow decides which dimensions map onto the array rows (S_R),
onto the columns (S_C) and which one streams through in time (T) (Samajdar et al., "SCALE-Sim",
arXiv:1811.02883, Table II):

=========  =====  =====  =====
dataflow    S_R    S_C     T
=========  =====  =====  =====
os           M      N      K
ws           K      N      M
is           K      M      N
=========  =====  =====  =====

Each fold of the operand onto the array costs ``2R + C + T - 2`` cycles (fill, stream, drain) and
there are ``ceil(S_R / R) * ceil(S_C / C)`` folds. Mapping efficiency is the fraction of PEs holding
useful work averaged over the folds; utilisation is useful MACs / (PEs x cycles).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

DATAFLOW_CODE = {"os": 0, "ws": 1, "is": 2}


@nb.njit(cache=True, inline="always")
def _map_dims(M, N, K, dataflow):
    if dataflow == 0:
        return M, N, K
    if dataflow == 1:
        return K, N, M
    return K, M, N


@nb.njit(cache=True)
def gemm_cycles(M, N, K, rows, cols, dataflow):
    """Stall-free cycles of one GEMM instance (see module docstring)."""
    s_r, s_c, t = _map_dims(M, N, K, dataflow)
    folds = math.ceil(s_r / rows) * math.ceil(s_c / cols)
    return folds * (2.0 * rows + cols + t - 2.0)


@nb.njit(cache=True)
def gemm_cycles_batch(M, N, K, rows, cols, dataflow, out):
    """Fill ``out[i, j]`` with cycles of GEMM i on array configuration j (arrays of equal length)."""
    for i in range(M.shape[0]):
        for j in range(rows.shape[0]):
            out[i, j] = gemm_cycles(M[i], N[i], K[i], rows[j], cols[j], dataflow[j])
    return out


def mapping_efficiency(M: float, N: float, K: float, rows: int, cols: int, dataflow: str) -> float:
    """Average fraction of PEs that hold a useful operand across the folds."""
    s_r, s_c, _ = _map_dims(M, N, K, DATAFLOW_CODE[dataflow])
    folds = math.ceil(s_r / rows) * math.ceil(s_c / cols)
    return (s_r * s_c) / (folds * rows * cols)


def utilisation(M: float, N: float, K: float, rows: int, cols: int, dataflow: str) -> float:
    """Useful MACs over PE-cycles spent, in [0, 1]."""
    cycles = gemm_cycles(float(M), float(N), float(K), rows, cols, DATAFLOW_CODE[dataflow])
    return M * N * K / (rows * cols * cycles)


def cycles_table(M: np.ndarray, N: np.ndarray, K: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                 dataflows: np.ndarray) -> np.ndarray:
    """Cycles of every (GEMM, array) pair: shape (len(M), len(rows))."""
    out = np.empty((len(M), len(rows)))
    return gemm_cycles_batch(np.asarray(M, float), np.asarray(N, float), np.asarray(K, float),
                             np.asarray(rows, np.int64), np.asarray(cols, np.int64),
                             np.asarray(dataflows, np.int64), out)
