"""A GEMM over a grid of systolic arrays: each array's block, and what the links between arrays add.

A systolic chiplet's ``arrays`` form a ``g_r x g_c`` grid (arch.SystolicChiplet.grid; ``arrays: n`` is a
1 x n grid). The grid's columns split N; its rows split the dataflow's row dimension, S_R of arch.systolic:
K under ws and is (each array then holds a K x N block of the weights, or of the stationary inputs, and the
partial sums of a grid column are summed down it), M under os. Every array runs its block as arch.systolic
runs a GEMM (folds, double-buffered stationary tiles).

Links (``array_link_words`` > 0, PE words per cycle each way between neighbouring arrays; 0 feeds every
array from the shared SRAM and adds nothing). The streamed inputs enter a grid row at its edge and pass
array to array along it, the partial sums (os: the second operand) pass down a grid column, one hop a cycle:

* fill: ``(g_r - 1) + (g_c - 1)`` cycles before the far corner starts (the same skew a systolic array has
  over its PEs, one level up);
* bandwidth: each array forwards its whole input block east (ws, is: M x K_a words; os: M_a x K) and, with
  more than one grid row, its partial sums south (ws, is: M x N_a, after summing its own K folds in its
  SRAM; os: the K x N_a weight block). A link carries ``array_link_words`` a cycle, so the GEMM takes at
  least the larger of those over the link rate: the arrays' compute and the link traffic overlap, the
  slower one sets the time.

Source of the mapping: the 2D block decomposition of a matrix over a mesh of cores with the activations
broadcast along rows and partial sums reduced along columns, as Cerebras's SDK tutorials distribute a GEMV
over a rectangle of PEs (sdk.cerebras.net, "GEMV" tutorials) and WaferLLM's MeshGEMM/MeshGEMV do on WSE-2/3
(He et al., OSDI 2025). The per-core rates and link width of the WSE-3 preset are in arch/data/chiplets.yaml.
"""
from __future__ import annotations

import numpy as np


def block(M, N, K, grid: tuple[int, int], dataflow: int, pack: float):
    """(M_a, N_a, K_a) of the block each array of the grid runs (arrays of GEMMs). Under ws and is, K is
    split in PE words (``ceil(K / pack)``), so a block's K is a whole number of packed words."""
    g_r, g_c = grid
    M, N, K = (np.asarray(x, dtype=float) for x in (M, N, K))
    n_a = np.ceil(N / g_c)
    if g_r == 1:
        return M, n_a, K
    if dataflow == 0:
        return np.ceil(M / g_r), n_a, K
    return M, n_a, np.ceil(np.ceil(K / pack) / g_r) * pack


def link_cycles(M, N, K, grid: tuple[int, int], dataflow: int, pack: float, link_words: float):
    """(fill cycles, the least cycles the links allow) of a GEMM's block per array (module docstring);
    (0, 0) when the arrays have no links (``link_words`` 0)."""
    g_r, g_c = grid
    m_a, n_a, k_a = block(M, N, K, grid, dataflow, pack)
    if link_words <= 0.0:
        return np.zeros_like(m_a), np.zeros_like(m_a)
    k_words = np.ceil(k_a / pack)
    east = m_a * k_words if g_c > 1 else np.zeros_like(m_a)
    south = np.zeros_like(m_a)
    if g_r > 1:
        south = k_words * n_a if dataflow == 0 else m_a * n_a
    fill = np.full_like(m_a, (g_r - 1.0) + (g_c - 1.0))
    return fill, np.maximum(east, south) / link_words
