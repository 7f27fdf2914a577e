"""A GEMM (M x K) @ (K x N) on an R x C systolic array: cycles, SRAM and DRAM traffic, stalls.

Mapping (SCALE-Sim, Samajdar et al., arXiv:1811.02883, Table II): the dataflow decides which GEMM
dimension is spread over the array rows (S_R), which over the columns (S_C), and which streams in
time (T). With ``k`` MACs per PE per cycle (narrow operands packed into a PE-wide word) the reduction
dimension shrinks to ``ceil(K / k)`` words.

=========  =====  =====  =====  ========================  =========================
dataflow    S_R    S_C     T     cycles per fold           stationary operand
=========  =====  =====  =====  ========================  =========================
os           M      N      K     R + C + T - 2             outputs (in the PEs)
ws           K      N      M     2R + C + T - 2            weights (filter)
is           K      M      N     2R + C + T - 2            inputs (ifmap)
=========  =====  =====  =====  ========================  =========================

Folds: ``ceil(S_R / R) x ceil(S_C / C)``, column folds outermost (SCALE-Sim's loop order); stall-free
cycles = folds x cycles per fold. These are SCALE-Sim v3's demand-matrix lengths (fill, stream,
drain of each fold); SCALE-Sim prints the index of the last cycle counted from 0, one less than our
count. (Its paper quotes 2R + C + T - 2 for OS too; its v3 code, which we compare against, uses
R + C + T - 2.) Mapping efficiency = S_R S_C / (folds R C); utilisation = MACs / (R C cycles).

SRAM accesses (words), exactly as SCALE-Sim counts them:

* os: ifmap reads ``col_folds M K``, filter reads ``row_folds K N``, ofmap writes ``M N``;
* ws: ifmap reads ``col_folds M K``, filter reads ``K N``, ofmap writes ``row_folds M N`` (partial sums);
* is: ifmap reads ``M K``, filter reads ``col_folds K N``, ofmap writes ``row_folds M N``.

SCALE-Sim's OS writes are larger by ``R + C`` per fold: it adds the padded tile's height plus width
for each fold (``ofmap_writes += rows + cols`` in systolic_compute_os.py) on top of the real outputs.

DRAM traffic (words). Each operand has its own SRAM, double-buffered: half (``A = S / 2``) is read
by the array while the other half is filled. An operand is fetched once when it fits in ``A``;
otherwise it is re-streamed once per pass the loop order makes over it (os: ifmap once per column
fold, filter tile once per row fold unless a K x C tile fits in A; ws: ifmap once per column fold,
weights once; is: inputs once, filter once per column fold). Outputs: with ``accumulate`` the partial
sums of a column fold stay in the output SRAM when its panel (T x C words) fits, so only final outputs
are written; otherwise each K fold's partial sums are written and read back. Without ``accumulate``
every partial sum goes to DRAM and none comes back, which is SCALE-Sim's accounting.

Stalls, with ``bw`` DRAM words per cycle per operand port (SCALE-Sim's separate ifmap, filter and
ofmap interfaces):

* inputs: the first active half is loaded before compute (``prefetch_cycles``); the rest streams in
  chunks of ``P = S - A`` words while computing; the last chunk arrives ``(W - A) / bw`` cycles in and
  is needed once ``(W - P) / W`` of the compute is done: stall ``max(0, (W - A)/bw - cycles (W - P)/W)``;
* outputs: the output SRAM absorbs ``S`` words and is drained ``D = S / 2`` words at a time, the first
  drain starting when ``D`` words are waiting; every drain after that takes ``D / bw`` cycles, and
  word ``S + (k - 1) D`` must wait for the start of drain ``k = floor((W - S) / D) + 1``: stall =
  that start minus the word's stall-free write time. Outputs arrive evenly within two phases (the
  full column folds, then the narrower last one). A drain starts on a write, so when the buffer
  fills at the end of a fold's output burst the next drain waits out the fold's idle cycles (T - 1
  for os, 2R - 1 for ws/is); that happens for a fraction gcd(D, words per fold) / words per fold of
  the drains when that gcd divides S. What is still buffered at the end drains after compute
  (``drain_cycles``).

The array stalls for the worst operand (stalls of different ports overlap). Source of the buffer
behaviour: SCALE-Sim's double_buffered_scratchpad, read_buffer and write_buffer; see docs/arch.md and
tests/test_arch_scalesim.py for where we agree with it and where (and why) we do not.

``simulate(..., read_buffer="scalesim")`` swaps the tile-aware input buffers for SCALE-Sim's own
bandwidth-limited read buffer (arch/read_window.py: a window that jumps a half-buffer at a time
along a fixed prefetch order and laps the whole operand to reach a word it has passed), for comparing
with SCALE-Sim's USER-mode runs whose inputs overflow their SRAM; outputs are modelled as above.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .errors import ArchError
from .read_window import scalesim_reads

DATAFLOW_CODE = {"os": 0, "ws": 1, "is": 2}

#: fields of the per-(GEMM, array) result vector, in order
FIELDS = ("cycles", "stall_cycles", "prefetch_cycles", "drain_cycles", "folds", "mapping_efficiency",
          "utilisation", "sram_ifmap_reads", "sram_filter_reads", "sram_ofmap_writes", "sram_ofmap_reads",
          "dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes", "dram_ofmap_reads")
F = {name: i for i, name in enumerate(FIELDS)}
(CYCLES, STALL, PREFETCH, DRAIN, FOLDS, MAP_EFF, UTIL, SRAM_IF, SRAM_FI, SRAM_OFW, SRAM_OFR,
 DRAM_IF, DRAM_FI, DRAM_OFW, DRAM_OFR) = range(len(FIELDS))
N_FIELDS = len(FIELDS)


@nb.njit(cache=True, inline="always")
def _map_dims(M, N, K, dataflow):
    """(S_R, S_C, T) of a GEMM under a dataflow code."""
    if dataflow == 0:
        return M, N, K
    if dataflow == 1:
        return K, N, M
    return K, M, N


@nb.njit(cache=True)
def gemm_cycles(M, N, K, rows, cols, dataflow):
    """Stall-free cycles of one GEMM on an R x C array (see module docstring)."""
    s_r, s_c, t = _map_dims(M, N, K, dataflow)
    folds = math.ceil(s_r / rows) * math.ceil(s_c / cols)
    per_fold = (rows + cols + t - 2.0) if dataflow == 0 else (2.0 * rows + cols + t - 2.0)
    return folds * per_fold


def double_buffered_cycles(M, N, K, rows, cols, dataflow, pack=1.0):
    """Stall-free cycles when the stationary operand (weights under ws, inputs under is) is double-buffered
    in the PEs, as in TPU v1's weight FIFO and shadow registers (Jouppi et al., ISCA 2017, section 2):
    the next fold's R-cycle tile load runs behind the current fold's T streaming cycles, so after the
    first load and one pipeline fill and drain (R + C - 2) folds follow each other every max(T, R)
    cycles: ``2R + C - 2 + folds T + (folds - 1) max(0, R - T)``. One fold is SCALE-Sim's
    ``2R + C + T - 2``; under os (nothing stationary to load) the cycles are SCALE-Sim's. Arrays of GEMMs."""
    M, N, K = (np.asarray(x, dtype=float) for x in (M, N, K))
    k_words = np.ceil(K / pack)
    if dataflow == 0:
        return np.ceil(M / rows) * np.ceil(N / cols) * (rows + cols + k_words - 2.0)
    s_r, s_c, t = (k_words, N, M) if dataflow == 1 else (k_words, M, N)
    folds = np.ceil(s_r / rows) * np.ceil(s_c / cols)
    return 2.0 * rows + cols - 2.0 + folds * t + (folds - 1.0) * np.maximum(0.0, rows - t)


@nb.njit(cache=True, inline="always")
def _reads(footprint, passes, active):
    """DRAM words of an operand read ``passes`` times: once if it fits the active half."""
    return footprint if footprint <= active else passes * footprint


@nb.njit(cache=True, inline="always")
def _input_stall(words, sram, bw, cycles):
    active = 0.5 * sram
    if words <= active:
        return 0.0
    chunk = sram - active
    return max(0.0, (words - active) / bw - cycles * (words - chunk) / words)


@nb.njit(cache=True, inline="always")
def _gcd(a, b):
    """Greatest common divisor of two whole numbers held as floats."""
    while b > 0.0:
        a, b = b, a % b
    return a


@nb.njit(cache=True, inline="always")
def _arrival(n, w, w_full, t_full, cycles):
    """Stall-free cycle at which the n-th of w output words is written (uniform within each phase)."""
    if n <= w_full:
        return t_full * n / w_full
    return t_full + (cycles - t_full) * (n - w_full) / (w - w_full)


@nb.njit(cache=True)
def systolic_gemm(M, N, K, rows, cols, dataflow, pack, sram_if, sram_fi, sram_of, bw, accumulate, out):
    """Fill ``out[:N_FIELDS]`` for one GEMM on one array (words, cycles; see module docstring)."""
    k_words = math.ceil(K / pack)
    s_r, s_c, t = _map_dims(M, N, k_words, dataflow)
    row_folds = math.ceil(s_r / rows)
    col_folds = math.ceil(s_c / cols)
    folds = row_folds * col_folds
    per_fold = (rows + cols + t - 2.0) if dataflow == 0 else (2.0 * rows + cols + t - 2.0)
    cycles = folds * per_fold
    out[CYCLES] = cycles
    out[FOLDS] = folds
    out[MAP_EFF] = s_r * s_c / (folds * rows * cols)
    out[UTIL] = M * N * K / pack / (rows * cols * cycles)

    a_words = M * k_words           # ifmap M x K
    b_words = k_words * N           # filter K x N
    c_words = M * N                 # ofmap M x N
    if dataflow == 0:
        out[SRAM_IF] = col_folds * a_words
        out[SRAM_FI] = row_folds * b_words
        out[SRAM_OFW] = c_words
        dram_if = _reads(a_words, col_folds, 0.5 * sram_if)
        tile_fits = k_words * cols <= 0.5 * sram_fi
        dram_fi = b_words if (b_words <= 0.5 * sram_fi or tile_fits) else row_folds * b_words
        k_folds = 1.0
        panel = 0.0
    elif dataflow == 1:
        out[SRAM_IF] = col_folds * a_words
        out[SRAM_FI] = b_words
        out[SRAM_OFW] = row_folds * c_words
        dram_if = _reads(a_words, col_folds, 0.5 * sram_if)
        dram_fi = b_words
        k_folds = row_folds
        panel = t * cols
    else:
        out[SRAM_IF] = a_words
        out[SRAM_FI] = col_folds * b_words
        out[SRAM_OFW] = row_folds * c_words
        dram_if = a_words
        dram_fi = _reads(b_words, col_folds, 0.5 * sram_fi)
        k_folds = row_folds
        panel = t * cols
    if k_folds > 1.0 and accumulate:
        out[SRAM_OFR] = (k_folds - 1.0) * c_words          # partial sums read back to accumulate
        if panel <= sram_of:
            dram_ofw, dram_ofr = c_words, 0.0
        else:
            dram_ofw, dram_ofr = k_folds * c_words, (k_folds - 1.0) * c_words
    else:
        out[SRAM_OFR] = 0.0
        dram_ofw, dram_ofr = out[SRAM_OFW], 0.0
    out[DRAM_IF] = dram_if
    out[DRAM_FI] = dram_fi
    out[DRAM_OFW] = dram_ofw
    out[DRAM_OFR] = dram_ofr

    # stalls and the load / drain around the compute
    stall = max(_input_stall(dram_if, sram_if, bw, cycles), _input_stall(dram_fi, sram_fi, bw, cycles))
    out[PREFETCH] = max(min(dram_if, 0.5 * sram_if), min(dram_fi, 0.5 * sram_fi)) / bw
    w = dram_ofw + dram_ofr
    half = 0.5 * sram_of
    # outputs arrive fold by fold; the last column fold may be narrower (fewer words per fold)
    t_full = (col_folds - 1.0) * row_folds * per_fold
    w_full = w * (col_folds - 1.0) * cols / s_c
    remaining = w
    if w > sram_of:
        drains = math.floor((w - sram_of) / half) + 1.0
        last = sram_of + (drains - 1.0) * half            # the write that waits for the last drain
        first = _arrival(half, w, w_full, t_full, cycles)
        spacing = half / bw
        if not accumulate or k_folds == 1.0:
            # a drain starts on a write: when the buffer fills exactly at the end of a fold's output
            # burst, the next drain waits for the next fold's first output (the fold's idle cycles).
            # Drain i fills it at word S + i D: that is a fold end for a fraction gcd(D, w_f) / w_f of
            # the drains when gcd(D, w_f) divides S (w_f words per fold), else never.
            w_f = w / folds if col_folds == 1.0 else w_full / ((col_folds - 1.0) * row_folds)
            if w_f == math.floor(w_f) and half == math.floor(half) and sram_of == math.floor(sram_of):
                g = _gcd(half, w_f)
                if sram_of % g == 0.0:
                    spacing += ((t - 1.0) if dataflow == 0 else (2.0 * rows - 1.0)) * g / w_f
        stall = max(stall, first + (drains - 1.0) * spacing - _arrival(last, w, w_full, t_full, cycles))
    if w > half:
        first = _arrival(half, w, w_full, t_full, cycles)
        started = math.floor((cycles + stall - first) * bw / half) + 1.0
        remaining = w - min(started, math.floor((w - 1.0) / half)) * half
    out[STALL] = stall
    out[DRAIN] = remaining / bw


@nb.njit(cache=True)
def systolic_batch(M, N, K, rows, cols, dataflow, pack, sram_if, sram_fi, sram_of, bw, accumulate, out):
    """Every GEMM i on every array configuration j: ``out[i, j, :N_FIELDS]``.

    GEMM arrays M, N, K have one length; configuration arrays (rows ... accumulate) another.
    """
    for i in range(M.shape[0]):
        for j in range(rows.shape[0]):
            systolic_gemm(M[i], N[i], K[i], rows[j], cols[j], dataflow[j], pack[j], sram_if[j], sram_fi[j],
                          sram_of[j], bw[j], accumulate[j], out[i, j])
    return out


def _cfg(values, n, dtype=float):
    arr = np.asarray(values, dtype=dtype)
    return np.broadcast_to(arr, (n,)).copy() if arr.ndim == 0 else arr


def simulate(M, N, K, rows, cols, dataflow, *, pack=1, sram_ifmap_words=np.inf, sram_filter_words=np.inf,
             sram_ofmap_words=np.inf, bandwidth_words=np.inf, accumulate=True, read_buffer="tile") -> np.ndarray:
    """Results of every (GEMM, array) pair, shape (n_gemms, n_arrays, N_FIELDS); see FIELDS.

    ``dataflow`` is a code (DATAFLOW_CODE) or name per array; every configuration argument may be a
    scalar (the same for all arrays) or an array with one entry per array configuration.
    ``read_buffer``: "tile" (the tile-aware double buffer) or "scalesim" (SCALE-Sim's read window, for
    finite bandwidth and SRAM; one GEMM at a time at the cost of its SRAM reads: module docstring).
    """
    if read_buffer not in ("tile", "scalesim"):
        raise ArchError(f"read_buffer must be 'tile' or 'scalesim', got {read_buffer!r}")
    M, N, K = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (M, N, K))
    rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
    n = rows.shape[0]
    flows = np.atleast_1d(np.asarray(dataflow))
    if flows.dtype.kind in "US":
        flows = np.array([DATAFLOW_CODE[str(f)] for f in flows])
    cfg = (rows, _cfg(cols, n, np.int64), _cfg(flows, n, np.int64), _cfg(pack, n), _cfg(sram_ifmap_words, n),
           _cfg(sram_filter_words, n), _cfg(sram_ofmap_words, n), _cfg(bandwidth_words, n),
           _cfg(accumulate, n, np.bool_))
    out = systolic_batch(M, N, K, *cfg, np.empty((M.shape[0], n, N_FIELDS)))
    if read_buffer == "scalesim":
        _scalesim_inputs(M, N, K, cfg, out)
    return out


def _scalesim_inputs(M, N, K, cfg, out):
    """Replace the input reads and stalls of ``out`` by SCALE-Sim's read window where SRAM and bandwidth
    are finite; the output stalls are the tile model's with the inputs' stalls left out."""
    rows, cols, flows, pack, s_if, s_fi, s_of, bw, acc = cfg
    names = {v: k for k, v in DATAFLOW_CODE.items()}
    outputs_only = systolic_batch(M, N, K, rows, cols, flows, pack, np.full_like(s_if, np.inf),
                                  np.full_like(s_fi, np.inf), s_of, bw, acc, np.empty_like(out))
    for j in range(rows.shape[0]):
        if not (np.isfinite(s_if[j]) and np.isfinite(s_fi[j]) and np.isfinite(bw[j])):
            continue
        for i in range(M.shape[0]):
            k_words = math.ceil(K[i] / pack[j])
            w = scalesim_reads(M[i], N[i], k_words, rows[j], cols[j], names[int(flows[j])], s_if[j], s_fi[j], bw[j])
            out[i, j, DRAM_IF] = w["dram_ifmap_reads"]
            out[i, j, DRAM_FI] = w["dram_filter_reads"]
            out[i, j, STALL] = max(w["stall_cycles"], outputs_only[i, j, STALL])
            out[i, j, PREFETCH] = w["prefetch_cycles"]
            out[i, j, DRAIN] = outputs_only[i, j, DRAIN]


@nb.njit(cache=True)
def _cycles_batch(M, N, K, rows, cols, dataflow, out):
    for i in range(M.shape[0]):
        for j in range(rows.shape[0]):
            out[i, j] = gemm_cycles(M[i], N[i], K[i], rows[j], cols[j], dataflow[j])
    return out


def cycles_table(M, N, K, rows, cols, dataflows) -> np.ndarray:
    """Stall-free cycles of every (GEMM, array) pair: shape (len(M), len(rows))."""
    out = np.empty((len(M), len(rows)))
    return _cycles_batch(np.asarray(M, float), np.asarray(N, float), np.asarray(K, float),
                         np.asarray(rows, np.int64), np.asarray(cols, np.int64), np.asarray(dataflows, np.int64), out)


def mapping_efficiency(M: float, N: float, K: float, rows: int, cols: int, dataflow: str) -> float:
    """Average fraction of PEs that hold useful work across the folds."""
    return float(simulate(M, N, K, rows, cols, dataflow)[0, 0, MAP_EFF])


def utilisation(M: float, N: float, K: float, rows: int, cols: int, dataflow: str) -> float:
    """Useful MACs over PE-cycles spent (stall-free), in [0, 1]."""
    return float(simulate(M, N, K, rows, cols, dataflow)[0, 0, UTIL])
