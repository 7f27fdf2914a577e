"""The sparse affinity clustering (dse.model.heuristics) places exactly as the dense original did, in
time linear in the workload graph (issue 16: DeepSeek-V3 per layer, 15k units, used to take minutes)."""
import numpy as np
import pytest

import dse
from dse.model.heuristics import _unit_work, affinity_clustering


def dense_affinity(t, rows, cols, kinds):
    """The original O(U^3) algorithm, kept here as the reference."""
    n = rows * cols
    U = t.n_units
    traffic = np.zeros((U, U))
    np.add.at(traffic, (t.edge_src, t.edge_dst), t.edge_bytes * t.edge_repeat)
    traffic = traffic + traffic.T
    work = _unit_work(t, kinds)
    r, c = np.divmod(np.arange(n), cols)
    hops = np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])
    load = np.zeros((int(t.unit_stage.max()) + 1, n))
    slot = np.full(U, -1)
    first = int(np.argmax(traffic.sum(axis=1)))
    centre = int(np.argmin(hops.sum(axis=1)))
    slot[first] = centre
    load[t.unit_stage[first], centre] += work[first]
    while (slot < 0).any():
        placed = slot >= 0
        pull = traffic[:, placed].sum(axis=1)
        pull[placed] = -1.0
        u = int(np.argmax(pull))
        partners = np.where(placed)[0]
        anchor = slot[partners[np.argmax(traffic[u, partners])]] if pull[u] > 0 else centre
        i = int(np.argmin(load[t.unit_stage[u]] + hops[anchor] * work[u]))
        slot[u] = i
        load[t.unit_stage[u], i] += work[u]
    return {t.unit_names[u]: [int(slot[u])] for u in range(U)}


@pytest.mark.parametrize("study", ["tests/data/tiny.yaml", "tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml",
                                   "studies/quickstart.yaml", "benchmarks/evaluate_mixtral.yaml"])
def test_sparse_affinity_equals_the_dense_original(study):
    t = dse.prepare(dse.load_study(study)).tables
    for rows, cols in ((1, 2), (2, 2), (3, 4)):
        kinds = [0] * (rows * cols)
        assert affinity_clustering(t, rows, cols, kinds) == dense_affinity(t, rows, cols, kinds)


def python_greedy(t, n, kinds, stacks, copies=1):
    """greedy_by_load as it was written in Python, unit by unit, kept here as the reference."""
    from dse.model.heuristics import EXPERT, _stored
    work = _unit_work(t, kinds)
    capacity = np.array(stacks, float) * (t.hbm.capacity_bytes if t.hbm else 0.0)
    used = np.zeros(n)
    placement = {}
    hot = set()
    if copies > 1:
        experts = np.where(t.unit_kind == EXPERT)[0]
        hot = set(experts[np.argsort(-t.unit_selection[experts])][: max(1, len(experts) // 4)].tolist())
    stored = _stored(t)
    for stage in np.unique(t.unit_stage):
        load = np.zeros(n)
        units = np.where(t.unit_stage == stage)[0]
        for u in units[np.argsort(-work[units], kind="stable")].tolist():
            wanted = min(2 if u in hot else 1, n)
            chosen = []
            for _ in range(wanted):
                room = capacity - used >= stored[u]
                key = np.where(room, 0.0, 1.0) * 1e30 + load
                if chosen:
                    key[chosen] = np.inf
                chosen.append(int(key.argmin()))
            for i in chosen:
                load[i] += work[u] / len(chosen)
                used[i] += stored[u]
            placement[t.unit_names[u]] = chosen
    return placement


@pytest.mark.parametrize("study", ["tests/data/tiny.yaml", "tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml",
                                   "studies/quickstart.yaml", "benchmarks/evaluate_mixtral.yaml"])
def test_compiled_greedy_by_load_places_as_the_python_original(study):
    """Issue 52: the LPT loop compiled (dse.model.heuristics._lpt), the same placements in the same order."""
    from dse.model.heuristics import greedy_by_load
    t = dse.prepare(dse.load_study(study)).tables
    for n, stacks, copies in ((1, [1], 1), (4, [1, 0, 2, 1], 2), (12, [0] * 12, 2), (12, [1] * 12, 1)):
        kinds = [k % len(t.kind_names) for k in range(n)]
        got, want = greedy_by_load(t, n, kinds, stacks, copies), python_greedy(t, n, kinds, stacks, copies)
        assert got == want and list(got) == list(want)
