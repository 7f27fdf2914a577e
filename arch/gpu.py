"""A GEMM (M x K) @ (K x N) on a GPU: tiles of the output over SMs, tile and wave quantization.

Model (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, sections 2.3 and 3):
the output is cut into Mt x Nt thread-block tiles; each SM computes one tile at a time at its
tensor-core rate; tiles run in waves of ``sms``. cuBLAS picks among tile shapes per problem, so we
take the fastest of 256x128, 128x256, 128x128, 128x64, 64x128, 64x64 whose three-stage K pipeline
(64-deep slices of A and B) fits the SM's shared memory. When there are fewer tiles than SMs the
K dimension is split (split-K, at most one slice per 256 of K) and the partial outputs are reduced.
Per tile: ``2 Mt Nt K / (FLOPs per SM per cycle)`` cycles, but never less than the three K slices
that fill its pipeline; the whole is divided by ``max_efficiency``, the fraction of peak a large wave-aligned GEMM sustains
(measured: 85.9 % on A100 SXM, 80.1 % on H100 SXM, "maximum achievable matmul FLOPS", S. Bekman,
ml-engineering, compute/accelerator/README.md).

Each thread block (a tile, or a K slice of one under split-K) also takes ``tile_overhead_s``: its prologue
(the K pipeline's first loads) and epilogue (the output tile's store), which do not overlap its MACs; that
is what makes a GEMM of short K reach less of peak than one of long K (Vidur's H100 kernels: 72 % at
K = 4,096, 86 % at K = 11,008; LLMCompass's A100 sweep: 78 % at K = 2,048, 89 % at K = 12,288).
`dse calibrate` fits it (``tile_overhead_us``) with ``max_efficiency``.

Traffic: a wave computes a near-square block of bm x bn tiles; A is re-read once per block column
and B once per block row, unless the operand fits in half the L2 (then it is read once); split-K
partial sums stay in L2 when they fit half of it. Shared
memory feeds the tensor cores through 64 x 64 warp tiles; the register file holds the mma
fragments (16x8x16: A 256, B 128, C 128 x 2 words per 2,048 MACs).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

TILES = np.array([[256, 128], [128, 256], [128, 128], [128, 64], [64, 128], [64, 64]], dtype=np.float64)
K_SLICE = 64.0
STAGES = 3.0
WARP_TILE = 64.0

GPU_FIELDS = ("cycles", "efficiency", "dram_a_bytes", "dram_b_bytes", "dram_c_bytes", "l2_bytes", "smem_bytes",
              "rf_bytes", "tile_m", "tile_n", "split_k", "waves")
N_GPU_FIELDS = len(GPU_FIELDS)


@nb.njit(cache=True)
def gpu_gemm(M, N, K, batch, sms, flops_per_sm_cycle, max_efficiency, l2_bytes, smem_bytes, elem_bytes, tile_cycles,
             out):
    """Fill ``out[:N_GPU_FIELDS]`` for ``batch`` independent GEMMs run as one batched kernel."""
    best = np.inf
    for t in range(TILES.shape[0]):
        mt, nt = TILES[t, 0], TILES[t, 1]
        if STAGES * (mt + nt) * K_SLICE * elem_bytes > smem_bytes and t < TILES.shape[0] - 1:
            continue
        tiles_m = math.ceil(M / mt)
        tiles_n = math.ceil(N / nt)
        tiles = batch * tiles_m * tiles_n
        split = 1.0
        if tiles < sms:
            split = max(1.0, min(math.floor(sms / tiles), math.floor(K / 256.0)))
        units = tiles * split
        waves = math.ceil(units / sms)
        k_unit = math.ceil(K / split)
        per_unit = 2.0 * mt * nt * max(k_unit, STAGES * K_SLICE) / flops_per_sm_cycle
        cycles = waves * (per_unit / max_efficiency + tile_cycles)
        if cycles < best:
            best = cycles
            out[0] = cycles
            out[8] = mt
            out[9] = nt
            out[10] = split
            out[11] = waves
    mt, nt = out[8], out[9]
    out[1] = 2.0 * batch * M * N * K / (out[0] * sms * flops_per_sm_cycle)
    a = M * K * elem_bytes
    b = K * N * elem_bytes
    tiles_m = math.ceil(M / mt)
    tiles_n = math.ceil(N / nt)
    bm = min(tiles_m, math.ceil(math.sqrt(sms)))
    bn = min(tiles_n, math.ceil(sms / bm))
    out[2] = batch * (a if a <= 0.5 * l2_bytes else a * math.ceil(tiles_n / bn))
    out[3] = batch * (b if b <= 0.5 * l2_bytes else b * math.ceil(tiles_m / bm))
    c = batch * M * N * elem_bytes
    partials = c * 2.0 * (out[10] - 1.0)                          # split-K partials written and read back
    out[4] = c + (partials if partials > 0.5 * l2_bytes else 0.0)
    out[5] = batch * (a * tiles_n + b * tiles_m) + partials       # L2 -> shared memory, every tile's panels
    macs = batch * M * N * K
    out[6] = 2.0 * macs * elem_bytes / WARP_TILE               # shared memory -> registers
    out[7] = macs * ((256.0 + 128.0) * elem_bytes + 2.0 * 128.0 * 4.0) / 2048.0


@nb.njit(cache=True)
def gpu_batch(M, N, K, batch, sms, flops_per_sm_cycle, max_efficiency, l2_bytes, smem_bytes, elem_bytes, tile_cycles,
              out):
    """Every (batched) GEMM i on one GPU: ``out[i, :N_GPU_FIELDS]``."""
    for i in range(M.shape[0]):
        gpu_gemm(M[i], N[i], K[i], batch[i], sms, flops_per_sm_cycle, max_efficiency, l2_bytes, smem_bytes, elem_bytes,
                 tile_cycles, out[i])
    return out


#: a FlashAttention thread block's query rows and KV rows per step (FlashAttention-2 and -3 forward, head
#: dim 128: 128 x 128 on A100 and H100; 64 x 64 where Q and two stages of K and V do not fit shared memory)
ATTENTION_TILES = (128.0, 64.0)
#: the tensor cores' smallest M: a block of fewer query rows (decode) computes 64 (Hopper wgmma m64)
MIN_ROWS = 64.0


@nb.njit(cache=True)
def gpu_attention(mq, nk, d, bh, share, sms, flops_per_sm_cycle, max_efficiency, sfu_per_sm, smem_bytes, elem_bytes,
                  tile_cycles, split_gqa_only=False):
    """(cycles, thread blocks, KV steps of the longest) of one fused attention kernel (`flash_attention`);
    ``split_gqa_only``: split the keys only when a block holds one token of several query heads."""
    br = ATTENTION_TILES[-1]
    for t in ATTENTION_TILES:
        if (t + 4.0 * t) * d * elem_bytes <= smem_bytes:
            br = t
            break
    q_blocks = math.ceil(mq / br)
    kv_blocks = math.ceil(nk / br)
    blocks = bh * q_blocks
    splits = 1.0
    may_split = 1.0 < mq <= br if split_gqa_only else True
    if blocks < sms and may_split:                          # split-KV (flash-decoding) fills the SMs
        splits = max(1.0, min(math.floor(sms / blocks), kv_blocks))
    block_share = 1.0 if share >= 1.0 else min(1.0, share + 0.5 / kv_blocks)
    chain = math.ceil(kv_blocks / splits)                   # the longest block: the last query rows, causal
    visits = blocks * kv_blocks * block_share
    steps = max(chain, visits / sms)                        # longest-first scheduling's makespan
    rows = max(min(mq, br), MIN_ROWS)
    step = 4.0 * rows * br * d / flops_per_sm_cycle / max_efficiency + rows * br / sfu_per_sm
    units = blocks * splits
    return steps * step + math.ceil(units / sms) * tile_cycles, units, steps


def flash_attention(ch, M, N, K, batch, share, precision: str) -> tuple[float, float]:
    """(seconds, pipeline steps) of one fused attention kernel on a GpuChiplet: scores ``batch`` x (M x K)
    @ (K x N) (M query rows per KV head: tokens x the GQA group; N keys; K the head dim), softmax and the
    weighted values, ``share`` of the M x N pairs unmasked (causal: about half).

    FlashAttention (Dao, FlashAttention-2, 2023, sections 3.1-3.2; Shah et al., FlashAttention-3, 2024): one
    thread block per 128 query rows of a head loops over 128-key blocks (`ATTENTION_TILES`); each step
    runs the two GEMMs at the SM's tensor-core rate x ``max_efficiency`` and one exponential per score on
    the SM's special-function units (``sfu_per_sm``, 16 a clock on compute capability 7.0-9.0: CUDA C
    Programming Guide, arithmetic instruction throughput; FlashAttention-3 section 3: the exponentials take
    half the GEMMs' time at head dim 128), in series. Causal blocks skip the fully masked key blocks, so
    the last query rows' block is the longest: with longest-first scheduling (FlashAttention-3's causal
    scheduling) the kernel takes max(that chain, all steps / SMs) steps. Too few blocks to fill the SMs
    (decode) split the keys (flash-decoding, Dao et al. 2023), their partial results combined at the end;
    with ``split_kv: gqa`` only when a block holds one token of several query heads sharing a KV head
    (FlashAttention-2's ``mha_fwd`` splits only under ``seqlenq_ngroups_swapped``, decode with GQA; a
    multi-head decode runs one block per head and sequence, stepping over every key block in turn:
    Dao-AILab/flash-attention issue #1029, 77 us unsplit against 24 us split). Plus ``tile_overhead_s``
    per wave of blocks (its prologue and epilogue) and ``attention_overhead_s``, the kernel's fixed time
    beyond ``kernel_overhead_s`` (the first Q, K and V loads' latency, the output's normalisation and
    store, the split-KV combine), which a batch-1 kernel of any length takes (11-14 us on an H200)."""
    from .technology import precision_bytes
    cycles, _, steps = gpu_attention(float(M), float(N), float(K), float(batch), float(share), float(ch.sms),
                                     ch.sm_flops_per_cycle(precision), ch.efficiency(precision), float(ch.sfu_per_sm),
                                     float(ch.smem_bytes_per_sm), precision_bytes(precision),
                                     ch.tile_overhead_s * ch.freq_hz, ch.split_kv == "gqa")
    return cycles / ch.freq_hz + ch.attention_overhead_s, steps


def simulate_gpu(M, N, K, ch, precision: str, batch=1.0) -> np.ndarray:
    """Results for GEMMs on one GpuChiplet: shape (n, N_GPU_FIELDS); see GPU_FIELDS."""
    from .technology import precision_bytes
    M, N, K = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (M, N, K))
    batch = np.broadcast_to(np.asarray(batch, dtype=float), M.shape).copy()
    out = np.zeros((M.shape[0], N_GPU_FIELDS))
    return gpu_batch(M, N, K, batch, float(ch.sms), ch.sm_flops_per_cycle(precision), ch.efficiency(precision),
                     float(ch.l2_bytes), float(ch.smem_bytes_per_sm), precision_bytes(precision),
                     ch.tile_overhead_s * ch.freq_hz, out)
