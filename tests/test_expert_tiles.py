"""Issue 38: dse.model.expert_tiles costs each distinct expert GEMM row once and copies the result to
every row like it; each row must still get its own expected cost, checked here against a direct
computation of single rows (the module's definition: the mean over POINTS binomial mid-quantiles, each
costed by arch.op_costs) and the count points against SciPy's binomial quantiles one pair at a time."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

import arch
import workloads
from dse.model.expert_tiles import POINTS, count_points, count_points_many, expected_costs, expert_matrix_rows

FIELDS = ("time_s", "energy_j", "dram_bytes", "sram_bytes", "utilisation", "overlap_steps")


def _direct(wl, r: int, route: float, q: float, chiplets, precision: str) -> dict:
    """Expected cost of operator row ``r`` alone: its POINTS token counts, each costed by arch.op_costs."""
    counts = count_points(route, q)
    one = wl.ops.iloc[[r] * POINTS].reset_index(drop=True)
    scale = counts / float(wl.ops["M"].iloc[r])
    one["M"] = counts
    for col in ("flops", "act_in_bytes", "act_out_bytes", "tokens"):
        one[col] = one[col].to_numpy(float) * scale
    costs = arch.op_costs(one, chiplets, precision)
    return {f: getattr(costs, f).mean(axis=0) for f in FIELDS}


def test_count_points_many_match_scipy_pair_by_pair():
    """Textbook quantiles (scipy.stats.binom.ppf) of n ~ Binomial(T, q) given n >= 1, one pair at a time."""
    tokens = np.array([2048.0, 64.0, 4096.0, 0.3, 512.0, 100.0])
    q = np.array([8 / 256, 2 / 8, 4 / 60, 0.5, 1.0, 0.01])
    many = count_points_many(tokens, q)
    assert many.shape == (len(q), POINTS)
    for i, (t, p) in enumerate(zip(tokens, q)):
        T = max(int(round(t)), 1)
        if p >= 1.0:
            assert np.all(many[i] == T)
            continue
        p0 = (1.0 - p) ** T
        u = p0 + (1.0 - p0) * (np.arange(POINTS) + 0.5) / POINTS
        assert np.array_equal(many[i], np.maximum(binom.ppf(u, T, p), 1.0))


@pytest.mark.parametrize("model", ["mixtral-8x7b", "qwen3-30b-a3b"])
def test_each_expert_row_gets_its_own_expected_cost(model):
    """Per-layer Zipf routing gives each layer its own expert order, so rows of one expert position in
    different layers have different token counts: a row mapped to another's cost fails here."""
    wl = workloads.extract(model, phase="decode", batch=64, context=4096, precision="fp8", per_layer=True,
                           routing={"distribution": "zipf", "s": 0.5, "seed": 0})
    chiplets = [arch.preset("h200-like")]
    got = expected_costs(wl, chiplets, "fp8", arch.op_costs(wl.ops, chiplets, "fp8"))
    rows, route, q = expert_matrix_rows(wl)
    picks = np.unique(np.r_[np.argmin(q), np.argmax(q), np.random.default_rng(1).integers(0, len(rows), 10)])
    seen = []
    for i in picks:
        want = _direct(wl, rows[i], route[i], q[i], chiplets, "fp8")
        for f in FIELDS:
            np.testing.assert_allclose(getattr(got, f)[rows[i]], want[f], rtol=1e-12, err_msg=f)
        seen.append(tuple(want[f][0] for f in FIELDS))
    assert len(set(seen)) > 2                         # the picked rows differ: the check can fail
