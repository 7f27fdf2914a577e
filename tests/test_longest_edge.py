"""The failure pass's longest hand-off into a changed (stage, instance) row (dse.model.hand_offs.longest_edge) as
one maximum over the latencies' bits read as int64 (thirteenth round; four float compare chains before it): the same
bits as the one-chain loop over the stage's hand-offs (kept here), on random latencies (NaNs of either sign,
infinities, -0.0, subnormals, ties, rows of every length modulo four, empty stages) and on the study tables' edge
phases; edge phases are 0, 1 or 2 (the test ``phase != skip`` relies on it)."""
import numba as nb
import numpy as np

import dse
from dse.model.hand_offs import in_instance, longest_edge
from dse.model.scenarios import FIRST, REST

nowrap = nb.uintp


@nb.njit(error_model="numpy")
def reference_longest(edge_start, edge_phase, edge_lat, s, instance):
    """longest_edge as it was (issue 52, eleventh round): one running maximum, a branch per hand-off."""
    longest = 0.0
    for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
        if in_instance(edge_phase[nowrap(e)], instance):
            longest = max(longest, edge_lat[nowrap(e)])
    return longest


@nb.njit(error_model="numpy")
def both(edge_start, edge_phase, edge_lat, out):
    for s in range(edge_start.shape[0] - 1):
        for instance in (FIRST, REST):
            out[s, instance, 0] = longest_edge(edge_start, edge_phase, edge_lat, s, instance)
            out[s, instance, 1] = reference_longest(edge_start, edge_phase, edge_lat, s, instance)


def check(edge_start, edge_phase, edge_lat):
    out = np.empty((len(edge_start) - 1, 2, 2))
    both(edge_start, edge_phase, edge_lat, out)
    assert np.array_equal(out[..., 0].view(np.int64), out[..., 1].view(np.int64))
    return out


def test_bits_give_the_one_chain_bits_on_random_rows():
    rng = np.random.default_rng(11)
    for trial in range(200):
        counts = rng.integers(0, 40, rng.integers(1, 30))
        edge_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        E = int(edge_start[-1])
        lat = rng.choice([0.0, -0.0, 1e-9, 2e-9, 3.5e-9], E) if trial % 3 == 0 else rng.exponential(1e-8, E)
        special = rng.random(E) < 0.05
        lat[special] = rng.choice([np.nan, -np.abs(np.float64(np.nan)), np.inf, -np.inf, -0.0, -1e-9, 5e-324],
                                  int(special.sum()))
        phase = rng.choice([0, 1, 2], E, p=[0.6, 0.2, 0.2] if trial % 2 else [0.1, 0.45, 0.45]).astype(np.int64)
        check(edge_start, phase, lat)


def test_bits_on_the_studies_tables():
    for path in ("tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml"):
        prepared = dse.prepare(dse.load_study(path))
        T = prepared.package_evaluator.kernel
        assert set(np.unique(T.edge_phase)) <= {0, 1, 2}
        lat = np.random.default_rng(2).exponential(1e-8, len(T.edge_phase))
        check(T.edge_start, T.edge_phase, lat)
