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
