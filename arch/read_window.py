"""SCALE-Sim's read buffer in bandwidth-limited (USER) runs: a forward window over a fixed prefetch order.

``arch.systolic`` models a tile-aware double buffer: an operand that overflows half its SRAM is
re-streamed once per pass its loop order makes over it. SCALE-Sim v2/v3 (Samajdar et al., ISPASS 2020;
its ``read_buffer`` in USER mode) buffers differently, and re-fetches far more. This module models
that buffer, so that our figures can be set against SCALE-Sim's where inputs overflow:

* the operand's words are laid out in its *prefetch order* (the order the compute model emits them:
  per fold block, rolled along anti-diagonals for streamed operands) and cut into sets of
  ``g = ceil(S / 100)`` words, ``floor(W / g) + 1`` sets in a ring;
* the SRAM's active half holds ``a = ceil(A / g)`` consecutive sets of the ring (``A = ceil(S / 2)``);
  a demanded word outside them makes the window jump ``p = min(ceil((S - A) / g), ring - a)`` sets
  forward (a whole half, not a sliding window) and costs one prefetch of ``S - A`` words (in
  ``bw``-word lines, rounded up), which the DRAM port delivers ``ceil((S - A) / bw) + 1`` cycles after
  the previous one;
* the window only moves forward: a word demanded again after the window has passed it is fetched by
  going round the whole ring. That happens when a fold revisits a block (os filter tiles, the
  ifmap of every column fold), when the array demands a block in a different order from its prefetch
  order (the skewed fold edges of rolled operands; the row-reversed load of a stationary tile), and,
  when the ring is not a multiple of ``p``, repeatedly: each lap leaves the window only
  ``ceil(ring / p) p - ring`` sets further on, so a demand that steps back across the window's edge
  laps again and again (a ratchet).

Demand order (SCALE-Sim's compute model, Table II of arXiv:1811.02883): column folds outermost; a
*streamed* operand (os: both; ws: ifmap; is: filter) is a block of ``T`` rows by ``w`` array lanes fed
skewed (lane j lags j cycles) after ``prefix`` idle cycles (R under ws/is); a *stationary* operand (ws
filter, is ifmap) is loaded as an R-row tile of its block, last row first. Folds last
``R + C + T - 2`` (os) or ``2R + C + T - 2`` cycles. The simulation walks every demanded word once
(the SRAM reads), so its cost is that of the GEMM's SRAM traffic: meant for the SCALE-Sim-sized runs
it is compared with, not for a design-space search. Stalls: a demand row waits until the prefetch
that brings its words has arrived; the array stalls for the slower input (SCALE-Sim v2's accounting,
without v3.0.0's doubling of a stall that it adds twice).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .errors import ArchError


def _streamed_positions(blocks: int, t_rows: int, width: int, spatial: int) -> np.ndarray:
    """Rank in prefetch order of element (block, t, lane) of a streamed operand, -1 for padding.

    The prefetch matrix stacks the blocks (``t_rows`` x ``width``, lanes past ``spatial`` padded) and is
    read along anti-diagonals (row + lane), each from its bottom row up."""
    rows = blocks * t_rows
    r, j = np.meshgrid(np.arange(rows), np.arange(width), indexing="ij")
    valid = (r // t_rows) * width + j < spatial
    order = np.lexsort((-r.ravel(), (r + j).ravel()))
    rank = np.full(rows * width, -1, np.int64)
    kept = order[valid.ravel()[order]]
    rank[kept] = np.arange(kept.size)
    return rank


def _stationary_positions(blocks: int, k_rows: int, width: int, spatial: int) -> np.ndarray:
    """Rank in prefetch order of element (block, k, lane) of a stationary operand (row-major blocks)."""
    r, j = np.meshgrid(np.arange(blocks * k_rows), np.arange(width), indexing="ij")
    valid = ((r // k_rows) * width + j < spatial).ravel()
    rank = np.full(valid.size, -1, np.int64)
    rank[valid] = np.arange(valid.sum())
    return rank


class _Operand:
    """One input's layout: kind (0 streamed, 1 stationary), block sizes and ranks in prefetch order."""

    def __init__(self, streamed, blocks, rows, width, spatial, by_row_fold, prefix, sram, bw):
        self.kind = 0 if streamed else 1
        self.rank = (_streamed_positions if streamed else _stationary_positions)(blocks, rows, width, spatial)
        self.rows, self.width, self.spatial, self.by_row_fold, self.prefix = rows, width, spatial, by_row_fold, prefix
        words = int((self.rank >= 0).sum())
        g = math.ceil(sram / 100)
        active = math.ceil(sram * 0.5)
        self.ring = words // g + 1
        self.set_words = g
        self.a = min(math.ceil(active / g), self.ring)
        self.p = min(math.ceil((sram - active) / g), self.ring - self.a)
        lines = math.ceil((sram - active) / bw)
        self.prefetch_words = lines * bw
        self.prefetch_cycles = lines + 1
        self.first_words = min(math.ceil(active / bw), math.ceil(blocks * rows * width / bw)) * bw

    def args(self):
        return (self.kind, self.rank, self.rows, self.width, self.spatial, self.by_row_fold, self.prefix,
                self.set_words, self.ring, self.a, self.p, self.prefetch_cycles)


@nb.njit(cache=True)
def _row_words(kind, rank, rows, width, spatial, block, fr, r, prefix, R, out):
    """Ranks of the words one operand demands in fold-row r (in lane order); returns how many."""
    n = 0
    if kind == 0:                                   # streamed, skewed: lane j reads row r - prefix - j
        for j in range(width):
            t = r - prefix - j
            if 0 <= t < rows and block * width + j < spatial:
                out[n] = rank[(block * rows + t) * width + j]
                n += 1
    elif r < R:                                     # stationary: tile rows loaded last row first
        k = fr * R + (R - 1 - r)
        if k < rows:
            for j in range(width):
                if block * width + j < spatial:
                    out[n] = rank[(block * rows + k) * width + j]
                    n += 1
    return n


@nb.njit(cache=True)
def _serve(words, n, g, ring, a, p, start, jumps, last, cycles, now):
    """Serve one row's words through the window; returns (start, jumps, last, stall)."""
    offset = 1.0
    for i in range(n):
        s = words[i] // g
        while (s - start) % ring >= a:
            start = (start + p) % ring
            jumps += 1
            last += cycles
            wait = last - (now + offset)
            if wait > 0:
                offset += wait
    return start, jumps, last, offset - 1.0


@nb.njit(cache=True)
def _walk(row_folds, col_folds, fold_rows, R, A, B):
    """Both inputs through their windows, fold by fold (column folds outermost). A and B are the
    ``_Operand.args()`` tuples; returns (jumps of A, jumps of B, stall cycles)."""
    kind_a, rank_a, rows_a, w_a, sp_a, byr_a, pre_a, g_a, ring_a, a_a, p_a, cyc_a = A
    kind_b, rank_b, rows_b, w_b, sp_b, byr_b, pre_b, g_b, ring_b, a_b, p_b, cyc_b = B
    buf_a = np.empty(max(w_a, 1), np.int64)
    buf_b = np.empty(max(w_b, 1), np.int64)
    start_a = start_b = 0
    jumps_a = jumps_b = 0
    last_a = last_b = 0.0
    stall = 0.0
    row = 0
    for fc in range(col_folds):
        for fr in range(row_folds):
            blk_a = fr if byr_a else fc
            blk_b = fr if byr_b else fc
            for r in range(fold_rows):
                now = row + stall
                n = _row_words(kind_a, rank_a, rows_a, w_a, sp_a, blk_a, fr, r, pre_a, R, buf_a)
                start_a, jumps_a, last_a, s_a = _serve(buf_a, n, g_a, ring_a, a_a, p_a, start_a, jumps_a,
                                                       last_a, cyc_a, now)
                n = _row_words(kind_b, rank_b, rows_b, w_b, sp_b, blk_b, fr, r, pre_b, R, buf_b)
                start_b, jumps_b, last_b, s_b = _serve(buf_b, n, g_b, ring_b, a_b, p_b, start_b, jumps_b,
                                                       last_b, cyc_b, now)
                stall += max(s_a, s_b, 0.0)
                row += 1
    return jumps_a, jumps_b, stall


def scalesim_reads(M: int, N: int, K: int, rows: int, cols: int, dataflow: str, sram_ifmap_words: float,
                   sram_filter_words: float, bandwidth_words: float) -> dict:
    """DRAM reads of both inputs and the input stall cycles of one GEMM through SCALE-Sim's read buffer.

    Returns ``dram_ifmap_reads``, ``dram_filter_reads`` (words), ``stall_cycles`` and ``prefetch_cycles``
    (the first active half loaded before compute). Sizes in words; ``bandwidth_words`` per cycle per input.
    """
    M, N, K, R, C = (int(x) for x in (M, N, K, rows, cols))
    bw = int(bandwidth_words)
    if min(M, N, K, R, C, bw) < 1 or dataflow not in ("os", "ws", "is"):
        raise ArchError("GEMM sizes, array sizes and bandwidth must be >= 1 and the dataflow os, ws or is")
    s_if, s_fi = int(sram_ifmap_words), int(sram_filter_words)
    if dataflow == "os":        # S_R = M, S_C = N, T = K; both streamed
        rf, cf, fold = math.ceil(M / R), math.ceil(N / C), R + C + K - 2
        a = _Operand(True, rf, K, R, M, True, 0, s_if, bw)
        b = _Operand(True, cf, K, C, N, False, 0, s_fi, bw)
    elif dataflow == "ws":      # S_R = K, S_C = N, T = M; ifmap streamed, filter stationary
        rf, cf, fold = math.ceil(K / R), math.ceil(N / C), 2 * R + C + M - 2
        a = _Operand(True, rf, M, R, K, True, R, s_if, bw)
        b = _Operand(False, cf, K, C, N, False, 0, s_fi, bw)
    else:                       # S_R = K, S_C = M, T = N; ifmap stationary, filter streamed
        rf, cf, fold = math.ceil(K / R), math.ceil(M / C), 2 * R + C + N - 2
        a = _Operand(False, cf, K, C, M, False, 0, s_if, bw)
        b = _Operand(True, rf, N, R, K, True, R, s_fi, bw)
    jumps_a, jumps_b, stall = _walk(rf, cf, fold, R, a.args(), b.args())
    return {"dram_ifmap_reads": float(a.first_words + jumps_a * a.prefetch_words),
            "dram_filter_reads": float(b.first_words + jumps_b * b.prefetch_words),
            "stall_cycles": float(stall),
            "prefetch_cycles": float(max(a.first_words, b.first_words) / bw)}
