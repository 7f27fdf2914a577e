"""Local moves guided by the evaluator's per-chiplet loads: a unit off the busiest chiplet, or a swap
with the idlest.

A step's latency is, stage by stage, the time of its busiest chiplet (dse.model.perf_model; the
per-layer stages of a large MoE run one after another). For a design of the population the evaluator's
own intact pass gives every chiplet's time in every stage (dse.model.breakdown.design_state: ``ct``,
``[stages, chiplets]``). In each stage the guide then repeats, on an additive model of those times with
each unit's expected time (dse.search.baseline.unit_work):

* a = the busiest chiplet of the stage, b = the idlest, gap = their difference;
* *move* the unit of a whose time w is nearest gap / 2 (0 < w < gap) to b, or *swap* a unit of a with
  a unit of b whose times differ by nearest gap / 2 (the multiway-partitioning local search of
  Graham's list scheduling improved by exchanges: Finn & Horowitz 1979);
* stop when neither lowers max(load a, load b), or after ``MAX_ROUNDS`` moves.

Only single-copy units move (copies follow their first slot's stride). The result is a neighbour of
the design; the evaluator, not the additive model, judges it. ``share`` < 1 leaves each stage
unchanged with probability 1 - share, so one design gives several neighbours.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from ..model.breakdown import stage_chiplet_s
from .baseline import unit_work

#: moves per stage and neighbour at most
MAX_ROUNDS = 8


@nb.njit(cache=True)
def balance_stages(L, stage_ptr, stage_units, slot, w, active, rounds):
    """Balance each active stage in place (module docstring): ``L`` ``[S, n]`` the chiplets' times,
    ``stage_units[stage_ptr[s]:stage_ptr[s + 1]]`` stage s's units, ``slot`` each unit's chiplet (-1: not
    movable; updated), ``w`` each unit's time."""
    for s in range(L.shape[0]):
        if not active[s]:
            continue
        row = L[s]
        for _ in range(rounds):
            a, b = np.argmax(row), np.argmin(row)
            gap = row[a] - row[b]
            if gap <= 0.0:
                break
            best, bu, bv, bd = row[a] * (1.0 - 1e-9), -1, -1, 0.0
            for i in range(stage_ptr[s], stage_ptr[s + 1]):
                u = stage_units[i]
                if slot[u] != a:
                    continue
                if 0.0 < w[u] < gap:                        # move u to b
                    peak = max(row[a] - w[u], row[b] + w[u])
                    if peak < best:
                        best, bu, bv, bd = peak, u, -1, w[u]
                for j in range(stage_ptr[s], stage_ptr[s + 1]):
                    v = stage_units[j]
                    if slot[v] != b:
                        continue
                    delta = w[u] - w[v]                     # swap u and v
                    if 0.0 < delta < gap:
                        peak = max(row[a] - delta, row[b] + delta)
                        if peak < best:
                            best, bu, bv, bd = peak, u, v, delta
            if bu < 0:
                break
            slot[bu] = b
            if bv >= 0:
                slot[bv] = a
            row[a] -= bd
            row[b] += bd


class Guide:
    """Guided neighbours of designs given as the space's gene vectors, from a prepared study
    (dse.model.prepare.Prepared: its evaluator's per-chiplet pass and tables)."""

    def __init__(self, prepared):
        self.prepared = prepared
        t = prepared.tables
        self.place = prepared.space.slices["place"].start
        stage = np.asarray(t.unit_stage, np.int64)
        self.stage_units = np.argsort(stage, kind="stable").astype(np.int64)
        self.stage_ptr = np.searchsorted(stage[self.stage_units], np.arange(len(t.stage_repeat) + 1)).astype(np.int64)
        self.work = unit_work(t, list(range(len(t.kind_names))))    # each unit's time, kinds averaged

    def neighbours(self, X: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
        """One guided neighbour of each gene vector of ``X`` (module docstring)."""
        X = np.asarray(X, np.int64).reshape(len(X), -1)
        out = X.copy()
        times, d = stage_chiplet_s(X, self.prepared)
        for p, L in enumerate(times):
            n = L.shape[1]
            w = unit_work(self.prepared.tables, d.kind[p, :n].tolist())
            slot = np.where(d.ncopy[p] == 1, d.slots[p, :, 0], -1)
            new = slot.copy()
            active = np.ones(len(L), np.bool_) if share >= 1 else rng.random(len(L)) < share
            balance_stages(L, self.stage_ptr, self.stage_units, new, w, active, MAX_ROUNDS)
            moved = np.flatnonzero(new != slot)
            out[p, self.place + moved] = new[moved]
        return out
