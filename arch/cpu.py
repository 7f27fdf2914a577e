"""A GEMM (M x K) @ (K x N) on CPU cores with SIMD FMA units, as a BLIS/GotoBLAS kernel runs it.

Model (Goto & van de Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS 2008;
Van Zee & van de Geijn, BLIS, ACM TOMS 2015): the output is computed in mr x nr register blocks
(mr = 6 rows, nr = two SIMD vectors of the operand precision), each taking ``mr nr K / (fma_units x
lanes)`` cycles; blocks are shared out over the cores, so the slowest core does
``ceil(blocks / cores)`` of them; the whole is divided by ``max_efficiency`` (packing, loop overhead;
BLIS reaches ~90 % of peak on large DGEMMs). Traffic: B is packed in kc x nc panels that fill half
the last-level cache (kc = 256) and read once; A is re-read once per nc-wide panel unless it fits in
half the cache; C is read and written once per kc slice unless the M x N output fits in half the cache.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

MR = 6.0
KC = 256.0

CPU_FIELDS = ("cycles", "efficiency", "dram_a_bytes", "dram_b_bytes", "dram_c_bytes", "cache_bytes")
N_CPU_FIELDS = len(CPU_FIELDS)


@nb.njit(cache=True)
def cpu_gemm(M, N, K, batch, cores, fma_units, lanes, max_efficiency, llc_bytes, elem_bytes, out):
    """Fill ``out[:N_CPU_FIELDS]`` for ``batch`` independent GEMMs (see module docstring)."""
    nr = 2.0 * lanes
    blocks = batch * math.ceil(M / MR) * math.ceil(N / nr)
    per_block = MR * nr * K / (fma_units * lanes)
    cycles = math.ceil(blocks / cores) * per_block / max_efficiency
    out[0] = cycles
    out[1] = batch * M * N * K / (cycles * cores * fma_units * lanes)
    a = M * K * elem_bytes
    b = K * N * elem_bytes
    c = M * N * elem_bytes
    nc = max(nr, math.floor(0.5 * llc_bytes / (KC * elem_bytes)))
    out[2] = batch * (a if a <= 0.5 * llc_bytes else a * math.ceil(N / nc))
    out[3] = batch * b
    out[4] = batch * (c if c <= 0.5 * llc_bytes else c * (2.0 * math.ceil(K / KC) - 1.0))
    out[5] = batch * (a * math.ceil(N / nr) + b * math.ceil(M / MR))     # cache -> registers, every block's panels


@nb.njit(cache=True)
def cpu_batch(M, N, K, batch, cores, fma_units, lanes, max_efficiency, llc_bytes, elem_bytes, out):
    for i in range(M.shape[0]):
        cpu_gemm(M[i], N[i], K[i], batch[i], cores, fma_units, lanes, max_efficiency, llc_bytes, elem_bytes, out[i])
    return out


def simulate_cpu(M, N, K, ch, precision: str, batch=1.0) -> np.ndarray:
    """Results for GEMMs on one CpuChiplet: shape (n, N_CPU_FIELDS); see CPU_FIELDS."""
    from .technology import precision_bytes
    M, N, K = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (M, N, K))
    batch = np.broadcast_to(np.asarray(batch, dtype=float), M.shape).copy()
    out = np.zeros((M.shape[0], N_CPU_FIELDS))
    return cpu_batch(M, N, K, batch, float(ch.cores), float(ch.fma_units), float(ch.simd_lanes(precision)),
                     float(ch.max_efficiency), float(ch.llc_bytes), precision_bytes(precision), out)
