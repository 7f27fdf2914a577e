"""The EPLB-style seed: the baseline a search must beat, put in its first population.

DeepSeek's Expert Parallelism Load Balancer (github.com/deepseek-ai/EPLB, as its README describes it)
*replicates* the hottest experts into redundant slots and *packs* the copies onto devices by load;
its hierarchical mode keeps experts that work together on one node. The seed does the same on the
study's largest package (its largest mesh, every slot of the library's first kind, HBM and DDR at their
upper bounds):

* the units other than routed experts go where dse.model.heuristics.greedy_by_load puts them (stage by
  stage, largest first, to the least loaded chiplet with HBM room: affinity alone stacks every layer's
  attention and KV cache on the centre chiplets, whose HBM then spills to DDR);
* every routed expert starts where the heuristics' affinity clustering puts it, next to the unit it
  exchanges the most bytes with (its layer's attention), and with copies allowed the quarter of the
  experts most selected get a second copy (the redundant-expert budget, as greedy_by_load grants it);
* each MoE layer is re-packed by dse.runtime.policies.eplb (the runtime's EPLB-style rebalance, reused
  here): replicate into the budget by load per copy, pack copies heaviest first onto the least loaded
  chiplet, and match the packed bins to chiplets keeping the most experts where affinity put them.
  An expert's load is its expected time per step (`unit_work`), not its share of tokens: in decode an
  expert reads its weights when any token of the batch selects it, so time saturates with popularity.

The decoder places further copies of a unit at its own stride (dse.model.placement), so the genes keep a
unit's first packed slot and its number of copies.
"""
from __future__ import annotations

import numpy as np

from ..model.heuristics import affinity_clustering, encode, greedy_by_load
from ..model.placement import spread_stacks
from ..runtime.mapping import ExpertGroups
from ..runtime.policies.eplb import rebalance


def unit_work(tables, kinds: list[int]) -> np.ndarray:
    """Expected time of each unit per layer instance on the package's average chiplet kind: its compute
    or its HBM stream (weights read when selected, other DRAM bytes), whichever is longer (the roofline
    of dse.model.copy_cost without the overlap term)."""
    compute = tables.unit_time_s[:, kinds].mean(axis=1)
    stream = (tables.unit_weight_read + tables.unit_other_dram[:, kinds].mean(axis=1)) / max(tables.hbm_bw_Bps, 1.0)
    return np.maximum(compute, stream)


def eplb_placement(tables, rows: int, cols: int, kinds: list[int], stacks: list[int],
                   max_copies: int) -> dict[str, list[int]]:
    """Unit -> chiplet slots of the EPLB-style seed on a ``rows x cols`` package (module docstring)."""
    n = rows * cols
    greedy = greedy_by_load(tables, n, kinds, stacks, max_copies)
    affine = affinity_clustering(tables, rows, cols, kinds)
    groups = ExpertGroups.from_tables(tables)
    work = dict(zip(tables.unit_names, unit_work(tables, kinds)))
    groups = ExpertGroups(names=groups.names, q=[np.array([work[u] for u in names]) for names in groups.names],
                          weight_bytes=groups.weight_bytes, units=groups.units)
    placement = dict(greedy)
    for names in groups.names:
        for name in names:          # an expert starts by its partners, with greedy's number of copies
            extra = [s for s in greedy[name] if s not in affine[name]]
            placement[name] = affine[name] + extra[: len(greedy[name]) - 1]
    every_slot = list(range(n))      # one list shared by every expert: rebalance reads it, never changes it
    everywhere = dict.fromkeys((name for names in groups.names for name in names), every_slot)
    return rebalance(placement, groups, groups.identity(), frozenset(), min(max_copies, n), home=everywhere)


def eplb_seed(prepared) -> np.ndarray:
    """The EPLB-style seed of a prepared study (dse.model.prepare.Prepared) as a gene vector of its space."""
    space, tables, study = prepared.space, prepared.tables, prepared.study
    mesh = study.hardware.package.mesh
    rows, cols = mesh.rows[1], mesh.cols[1]
    n = rows * cols
    hbm = int(space.upper[space.slices["hbm"]][0])
    ddr = int(space.upper[space.slices["ddr"]][0])
    copies = int(space.upper[space.slices["copies"]].max())
    kinds = [0] * n
    stacks = spread_stacks(hbm, kinds, tables.kind_hbm_phy)
    placement = eplb_placement(tables, rows, cols, kinds, stacks, copies)
    return encode(space, rows, cols, kinds, hbm, ddr, placement, tables.unit_names)
