"""Per-chiplet view of one design: units held, memory held against HBM, busy time, traffic in and out.

Busy time follows the step model of dse.perf_model.step (with every chiplet alive): each unit copy on
chiplet i takes ``max(compute, memory)`` per layer instance, with memory time = HBM bytes / local HBM
bandwidth + DDR bytes / package DDR bandwidth, where the DDR fraction is the share of what the chiplet
stores that does not fit its HBM; a stage's time on the chiplet is summed over its copies, repeated
for identical layers and weighted by the stage's probability. Shards add their ring all-reduce.
``busy_share`` is busy time / the design's step latency: 1.0 is the chiplet on the critical path of
every stage; the rest of the step it waits for other chiplets, the network or DDR.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from noc.mesh import xy_hops

from .evaluator import design_arrays
from .perf_model import chip_storage
from .space import SPLIT_MAPPINGS, Design
from .traffic import chiplet_traffic

GIB = 2**30


def chiplet_busy_s(design: Design, prepared) -> tuple[np.ndarray, np.ndarray]:
    """(compute-bound time, memory-bound time) per chiplet per step; their max per copy sums to busy."""
    T = prepared.evaluator.kernel
    tables = prepared.tables
    n = design.rows * design.cols
    split = design.mapping in SPLIT_MAPPINGS
    _, _, kind, stacks, ddr, slots, ncopy = design_arrays([design], tables, prepared.space.max_slots,
                                                         prepared.evaluator.max_copies)
    kind, stacks, slots, ncopy, ddr = kind[0], stacks[0], slots[0], ncopy[0], int(ddr[0])
    stored = chip_storage(T, n, slots, ncopy, split, np.ones(n, np.bool_))
    cap = stacks[:n] * T.hbm_cap
    with np.errstate(divide="ignore", invalid="ignore"):
        ddr_frac = np.where(stored > cap, (stored - cap) / stored, 0.0)
    hbm_bw = stacks[:n] * T.hbm_bw
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    compute = np.zeros(n)
    busy = np.zeros(n)
    for s in range(len(T.stage_repeat)):
        weight = T.stage_repeat[s] * T.stage_prob[s]
        for u in range(T.stage_start[s], T.stage_start[s + 1]):
            c = ncopy[u]
            share = 1.0 / c
            q = T.unit_sel[u]
            if split:
                w = T.unit_weight_if_run[u] * (1.0 - (1.0 - q) ** T.tokens) * share
            else:
                w = T.unit_weight_if_run[u] * (1.0 - (1.0 - q) ** (T.tokens * share))
            for r in range(c):
                i = slots[u, r]
                comp = T.unit_time[u, kind[i]] * share
                b = w + T.unit_other_dram[u, kind[i]] * share
                f = ddr_frac[i]
                t_mem = b * f / ddr_bw + (b * (1.0 - f) / hbm_bw[i] if f < 1.0 else 0.0)
                compute[i] += weight * comp
                busy[i] += weight * max(comp, t_mem)
            if split and c > 1:
                hops = max(xy_hops(slots[u, r], slots[u, (r + 1) % c], design.cols) for r in range(c))
                t_ar = 2.0 * (c - 1) * (hops * T.hop_lat + T.unit_out_bytes[u] / (c * T.link_bw))
                for r in range(c):
                    busy[slots[u, r]] += weight * t_ar
    return compute, busy


def chiplet_table(design: Design, prepared, latency_s: float) -> pd.DataFrame:
    """One row per chiplet: slot, (row, col), kind, HBM, units held, GiB stored, busy share, traffic."""
    tables = prepared.tables
    T = prepared.evaluator.kernel
    n = design.rows * design.cols
    split = design.mapping in SPLIT_MAPPINGS
    _, _, kind, stacks, _, slots, ncopy = design_arrays([design], tables, prepared.space.max_slots,
                                                       prepared.evaluator.max_copies)
    stored = chip_storage(T, n, slots[0], ncopy[0], split, np.ones(n, np.bool_))
    compute, busy = chiplet_busy_s(design, prepared)
    traffic = chiplet_traffic(design, tables)
    held = [[u for u in tables.unit_names if i in design.placement[u]] for i in range(n)]
    return pd.DataFrame({
        "slot": np.arange(n), "row": np.arange(n) // design.cols, "col": np.arange(n) % design.cols,
        "kind": design.chiplets, "hbm_stacks": design.hbm_stacks[:n],
        "units": [" ".join(h) for h in held], "n_units": [len(h) for h in held],
        "stored_GiB": stored / GIB, "hbm_GiB": np.asarray(design.hbm_stacks[:n]) * T.hbm_cap / GIB,
        "spill_GiB": np.maximum(stored - np.asarray(design.hbm_stacks[:n]) * T.hbm_cap, 0.0) / GIB,
        "compute_s": compute, "busy_s": busy, "busy_share": busy / latency_s,
        "sent_MB": traffic.sum(axis=1) / 1e6, "received_MB": traffic.sum(axis=0) / 1e6})
