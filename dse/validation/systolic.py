"""The systolic array model against SCALE-Sim v3 on a generated grid of GEMMs (data/scalesim_v3_grid.csv).

SCALE-Sim 3.0.0's runs (tools/scalesim_v3_grid.py; a copy of tests/data's file): every dataflow, 4 x 4 and
8 x 4 arrays, SRAM of 1 KB to unlimited per buffer, 1-64 DRAM words per cycle and unlimited, GEMMs whose
operands fit half a buffer and that do not. The model is arch.systolic as ``dse gemm --read-buffer scalesim
--no-accumulate`` runs it: SCALE-Sim's read window (arch/read_window.py) and its output accounting. Nothing
is fitted (every row is a check).

- ``total cycles``: SCALE-Sim's Total Cycles (the last cycle's index from 0: our cycles + stalls - 1);
- ``DRAM reads``: ifmap and filter words read from DRAM.

``dse fidelity --suite systolic`` prints its cases (`cases`).
"""
from __future__ import annotations

import math

import pandas as pd

from .common import DATA, Case

TITLE = "the systolic array against SCALE-Sim v3 on a generated grid"
SOURCE = "scalesim 3.0.0"
GRID = DATA / "scalesim_v3_grid.csv"


def _ours(r) -> tuple[float, float]:
    from arch import systolic as S

    words = r.sram_kb * 1024.0
    o = S.simulate(r.M, r.N, r.K, r.rows, r.cols, r.dataflow, sram_ifmap_words=words, sram_filter_words=words,
                   sram_ofmap_words=words, bandwidth_words=r.bandwidth, accumulate=False,
                   read_buffer="scalesim")[0, 0]
    return o[S.CYCLES] + o[S.STALL] - 1.0, o[S.DRAM_IF] + o[S.DRAM_FI]


def cases() -> list[Case]:
    out = []
    for r in pd.read_csv(GRID, comment="#").itertuples():
        kb = "inf" if math.isinf(r.sram_kb) else f"{r.sram_kb:g}"
        bw = "inf" if math.isinf(r.bandwidth) else f"{r.bandwidth:g}"
        key = f"{r.rows}x{r.cols}-{r.dataflow}-{kb}k-{bw}w-{r.M}"
        cycles, reads = _ours(r)
        out.append(Case(key, "total cycles", "cycles", float(r.scalesim_total_cycles), float(cycles), "validation",
                        SOURCE))
        out.append(Case(key, "DRAM reads", "words", float(r.scalesim_dram_ifmap_reads + r.scalesim_dram_filter_reads),
                        float(reads), "validation", SOURCE))
    return out
