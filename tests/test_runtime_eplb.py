"""dse.runtime.policies.eplb on arrays (issue 36's cost per design): the assignment step against scipy's
linear_sum_assignment, and a hand-worked EPLB packing."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from dse.runtime.mapping import ExpertGroups, Placement, placement_arrays
from dse.runtime.policies.eplb import assign_max, rebalance, rebalance_placement


def test_assignment_is_scipys_ties_included():
    """Small integer gains (many ties): the same columns as scipy.optimize.linear_sum_assignment
    (Crouse 2016's method, the solver the Python rebalance called)."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(1, 10))
        gain = rng.integers(0, int(rng.integers(1, 4)), size=(n, n))
        assert (assign_max(gain) == linear_sum_assignment(gain, maximize=True)[1]).all()
    # scipy's documented example (minimising [[4, 1, 3], [2, 0, 5], [3, 2, 2]]: columns 1, 0, 2, cost 5)
    assert assign_max(-np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]])).tolist() == [1, 0, 2]


def test_rebalance_packs_a_layer_by_load():
    """Loads 0.4, 0.3, 0.2, 0.1, six copies (at most two each) on three chiplets. By hand: the 0.4 and
    0.3 experts get a second copy (loads per copy 0.2, 0.15, 0.2, 0.1); packed heaviest first onto the
    least loaded chiplet with room (two each): {e0, e1}, {e0, e1}, {e2, e3}, loads 0.35, 0.35, 0.3."""
    names = [["L0.e0", "L0.e1", "L0.e2", "L0.e3"]]
    groups = ExpertGroups(names=names, q=[np.array([0.4, 0.3, 0.2, 0.1])], weight_bytes=[np.ones(4)],
                          units=[np.arange(4)])
    start = {"L0.e0": [0, 1], "L0.e1": [2], "L0.e2": [0], "L0.e3": [1, 2]}
    out = rebalance(start, groups, groups.identity(), frozenset(), 2)
    loads = np.zeros(3)
    for e, n in enumerate(names[0]):
        loads[out[n]] += groups.q[0][e] / len(out[n])
    assert sorted(len(out[n]) for n in names[0]) == [1, 1, 2, 2]
    assert np.allclose(sorted(loads), [0.3, 0.35, 0.35])
    assert out["L0.e0"][:1] == [0]          # copies in place stay first (no move)
    p = placement_arrays(start, names[0], 2)
    again = rebalance_placement(p, p, groups, groups.identity(), frozenset(), 2)
    assert again is not p and again.to_dict(names[0]) == out
    assert isinstance(again, Placement)
