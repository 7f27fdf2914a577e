"""Per-chiplet view of one design: units held, memory held against HBM, busy time, traffic in and out.

Busy time is the evaluator's own (dse.model.perf_model.base_pass on the intact design): each unit copy on
chiplet i takes its operators' kernel times per layer instance (dse.model.copy_cost.copy_roofline), shards add
their ring all-reduce, and a stage's time on the chiplet (``W.ct``) is repeated for identical layers and weighted by
the stage's probability. ``busy_share`` is busy time / the design's step latency: 1.0 is the chiplet on
the critical path of every stage; the rest of the step it waits for other chiplets, the network or DDR.
"""
from __future__ import annotations

from itertools import chain

import numpy as np
import pandas as pd

from ..study.space import SPLIT_MAPPINGS, Design
from .contract import DecodedDesigns
from .evaluator import Evaluator, design_arrays
from .perf_model import base_pass
from .routes import shape_index
from .traffic import chiplet_traffic

GIB = 2**30


def design_state(design: Design, prepared):
    """Run the evaluator's intact-design pass on one design; returns (workspace, its `DecodedDesigns`)."""
    prepared = prepared.for_design(design)
    ev = prepared.package_evaluator
    d = design_arrays([design], prepared.tables, prepared.space.max_slots, ev.max_copies)
    n = design.rows * design.cols
    W = ev.workspace(d.slots.shape[2])
    sh = shape_index(design.rows, design.cols, ev.row_range, ev.col_range)
    base_pass(ev.kernel, ev.routes, sh, n, d.kind[0], d.stacks[0], d.ddr[0], d.slots[0], d.ncopy[0],
              design.mapping in SPLIT_MAPPINGS, W)
    return W, d


def stage_chiplet_s(X: np.ndarray, prepared) -> tuple[list[np.ndarray], "DecodedDesigns"]:
    """Each design's time per layer instance of every stage on every chiplet (``W.ct[:, :n]``, ``[S, n]``)
    from the evaluator's intact pass, for the gene vectors ``X``; and their decoded arrays. A study of
    one package model decodes the population at once; with package variants or a system, design by design."""
    X = np.asarray(X, np.int64).reshape(len(X), -1)
    if prepared.study.system is not None or not isinstance(prepared.package_evaluator, Evaluator):
        states = [design_state(design, prepared) for design in prepared.evaluator.designs(X)]
        d = DecodedDesigns(*(np.concatenate([s[1][i] for s in states]) for i in range(len(DecodedDesigns._fields))))
        return [W.ct[:, : int(n)].copy() for (W, _), n in zip(states, d.chiplets)], d
    ev = prepared.package_evaluator
    d = ev.decode(X)
    W = ev.workspace(d.slots.shape[2])
    out = []
    for p in range(len(X)):
        n = int(d.rows[p] * d.cols[p])
        sh = shape_index(int(d.rows[p]), int(d.cols[p]), ev.row_range, ev.col_range)
        base_pass(ev.kernel, ev.routes, sh, n, d.kind[p], d.stacks[p], d.ddr[p], d.slots[p], d.ncopy[p],
                  ev.space.split, W)
        out.append(W.ct[:, :n].copy())
    return out, d


def chiplet_dram_bytes(ev: Evaluator, d: DecodedDesigns, p: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(HBM bytes, DDR bytes) each chiplet of design ``p`` of the kernel arrays ``d`` reads per step, as the
    evaluator's intact pass (package evaluator ``ev``, dse.model.perf_model.base_pass) charges them: each
    copy's DRAM bytes per layer instance (dse.model.copy_cost.copy_bytes), the share its chiplet's HBM holds
    (1 - ``W.f``: the placement's spill to DDR; all DDR without HBM, as copy_roofline), weighted by its
    stage's repeat x probability (as step_totals): their sum is the step's ``dram_bytes`` figure."""
    n = int(d.rows[p] * d.cols[p])
    W = ev.workspace(d.slots.shape[2])
    sh = shape_index(int(d.rows[p]), int(d.cols[p]), ev.row_range, ev.col_range)
    slots, ncopy, kind, stacks = d.slots[p], d.ncopy[p], d.kind[p], d.stacks[p]
    base_pass(ev.kernel, ev.routes, sh, n, kind, stacks, d.ddr[p], slots, ncopy, ev.space.split, W)
    T = ev.kernel
    units = np.arange(slots.shape[0])
    valid = np.arange(slots.shape[1])[None, :] < ncopy[:, None]
    chip = np.where(valid, slots, 0)
    c = np.maximum(ncopy, 1)
    per_copy = T.unit_w_copy[units, c][:, None] + T.unit_other_dram[units[:, None], kind[chip]] / c[:, None]
    per_copy = per_copy * (T.stage_repeat * T.stage_prob)[T.unit_stage][:, None]
    local = (stacks[chip] * T.hbm_bw > 0.0) | (T.kind_sram_bw[kind[chip]] > 0.0)   # HBM, or a resident kind's SRAM
    f = np.where(local, W.f[: slots.shape[0], : slots.shape[1]], 1.0)
    hbm = np.bincount(chip[valid], weights=(per_copy * (1.0 - f))[valid], minlength=n)
    ddr = np.bincount(chip[valid], weights=(per_copy * f)[valid], minlength=n)
    return hbm[:n], ddr[:n]


def chiplet_busy_s(design: Design, prepared) -> tuple[np.ndarray, np.ndarray]:
    """(compute time, busy time) per chiplet per step: compute alone, and each copy's kernel times (compute
    and memory overlapped, dse.model.copy_cost.copy_roofline) plus all-reduces, as the evaluator charges them."""
    prepared = prepared.for_design(design)
    return _busy(design_state(design, prepared), prepared, design.rows * design.cols)


def _busy(state, prepared, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`chiplet_busy_s` from a design's `design_state` (``prepared``: the design's package). Each copy's
    compute share is added per chiplet in (unit, copy) order (``np.add.at`` adds in index order), so the sums
    have the bits of a loop over the units."""
    W, d = state
    T = prepared.package_evaluator.kernel
    tables = prepared.tables
    kind, ncopy = d.kind[0], d.ncopy[0]
    weight = T.stage_repeat * T.stage_prob
    busy = weight @ W.ct[:, :n]
    unit = np.repeat(np.arange(len(tables.unit_names)), ncopy)
    copy = np.arange(len(unit)) - np.repeat(np.cumsum(ncopy) - ncopy, ncopy)
    chip = d.slots[0, unit, copy]
    compute = np.zeros(n)
    np.add.at(compute, chip, weight[np.asarray(tables.unit_stage)[unit]] * T.unit_time[unit, kind[chip]] / ncopy[unit])
    return compute, busy


def held_units(design: Design, unit_names: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The units each of the design's ``n`` chiplets holds, once each and in the units' order: (unit indices
    grouped by chiplet, bounds: chiplet i's are ``[bounds[i], bounds[i + 1])``). Found on arrays (a (unit,
    chiplet) code per slot, `np.unique`, a stable sort by chiplet): DeepSeek-V3 per layer places 15,000 units.
    A slot outside ``0 .. n - 1`` is read by the unit-by-unit loop (`_held_lists`) as before."""
    lists = [design.placement[u] for u in unit_names]
    count = np.fromiter(map(len, lists), np.int64, len(lists))
    flat = np.fromiter(chain.from_iterable(lists), np.int64, int(count.sum()))
    if len(flat) and (flat.min() < 0 or flat.max() >= n):
        held = _held_lists(design, unit_names, n)
        index = {u: i for i, u in enumerate(unit_names)}
        units = np.array([index[u] for h in held for u in h], np.int64)
        return units, np.concatenate([[0], np.cumsum([len(h) for h in held])]).astype(np.int64)
    pair = np.unique(np.repeat(np.arange(len(lists), dtype=np.int64), count) * n + flat)   # by unit, then chiplet
    chip = pair % n
    order = np.argsort(chip, kind="stable")
    return (pair // n)[order], np.concatenate([[0], np.cumsum(np.bincount(chip, minlength=n))]).astype(np.int64)


def _held_lists(design: Design, unit_names: list[str], n: int) -> list[list[str]]:
    """Each chiplet's units, one pass over the units in their order (`held_units`' reference)."""
    held: list[list[str]] = [[] for _ in range(n)]
    for u in unit_names:
        for i in dict.fromkeys(design.placement[u]):
            held[i].append(u)
    return held


def chiplet_table(design: Design, prepared, latency_s: float, traffic: np.ndarray | None = None,
                  held: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """One row per chiplet: slot, (row, col), kind, HBM, units held, GiB stored, busy share, traffic
    (``traffic``: the design's dse.model.traffic.chiplet_traffic, ``held``: its `held_units`, when the
    caller has them). The evaluator's intact pass runs once (`design_state`) for the GiB stored and the busy
    times."""
    prepared = prepared.for_design(design)
    tables = prepared.tables
    T = prepared.package_evaluator.kernel
    n = design.rows * design.cols
    state = design_state(design, prepared)
    stored = state[0].stored[:n].copy()
    compute, busy = _busy(state, prepared, n)
    traffic = chiplet_traffic(design, tables) if traffic is None else traffic
    units, bounds = held_units(design, tables.unit_names, n) if held is None else held
    names = np.array(tables.unit_names, dtype=object)[units].tolist()
    held_names = [names[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    stacks = np.asarray(design.hbm_stacks[:n])      # the local tier: HBM, or a resident kind's SRAM without it
    kinds = np.array([tables.kind_names.index(c) for c in design.chiplets[:n]], dtype=np.int64)
    local_GiB = np.where(stacks > 0, stacks * T.hbm_cap + T.kind_sram_cap[kinds], T.kind_sram_cap[kinds]) / GIB
    return pd.DataFrame({
        "slot": np.arange(n), "row": np.arange(n) // design.cols, "col": np.arange(n) % design.cols,
        "kind": design.chiplets, "hbm_stacks": design.hbm_stacks[:n],
        "units": [" ".join(h) for h in held_names], "n_units": [len(h) for h in held_names],
        "stored_GiB": stored / GIB, "hbm_GiB": local_GiB,
        "spill_GiB": np.maximum(stored / GIB - local_GiB, 0.0),
        "compute_s": compute, "busy_s": busy, "busy_share": busy / latency_s,
        "sent_MB": traffic.sum(axis=1) / 1e6, "received_MB": traffic.sum(axis=0) / 1e6})
