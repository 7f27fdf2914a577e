"""The copy costs of the study alone (dse.model.copy_table): the intact pass that looks them up gives the bits
of the pass that costs every copy (dse.model.perf_model.base_passes without the tables), with and without
failures, for designs of the space and for designs whose stack and channel counts lie outside the tables."""
import numpy as np
import pytest

import dse
from dse.model.copy_table import COST_FIELDS, table_entry
from dse.model.perf_model import PASS_FIELDS, base_passes


def _untabled(T):
    K = T.kind_mem_eff.shape[0]
    return T._replace(copy_table=np.zeros((0, 0, K, 0, COST_FIELDS)), copy_fixed=np.zeros((0, 0, K, 2)),
                      copy_stacks=0)


@pytest.mark.parametrize("path", ["tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml", "studies/quickstart.yaml"])
def test_looked_up_copy_costs_have_the_bits_of_costing_each_copy(path):
    prepared = dse.prepare(dse.load_study(path))
    ev, space = prepared.package_evaluator, prepared.space
    ev.threads = 1
    T = ev.kernel
    assert T.copy_table.shape[0] == T.unit_capacity.shape[0] and T.copy_fixed.shape[0] == T.unit_capacity.shape[0]
    X = np.random.default_rng(5).integers(space.lower, space.upper + 1, size=(40, space.n_var))
    tabled = {faults: ev.metrics_array(X, with_faults=faults) for faults in (False, True)}
    ev.kernel = _untabled(T)
    try:
        for faults in (False, True):
            assert np.array_equal(tabled[faults], ev.metrics_array(X, with_faults=faults), equal_nan=True)
    finally:
        ev.kernel = T
    # stacks and channels past the tables' ranges are costed in the pass: still the same bits
    d = ev.decode(X)
    shapes, sizes = ev._shapes(d.rows, d.cols), d.rows * d.cols
    stacks, ddr = d.stacks + T.copy_stacks, d.ddr + T.copy_table.shape[3]
    out = []
    for tables in (T, _untabled(T)):
        res = np.zeros((len(X), len(PASS_FIELDS)))
        base_passes(tables, ev.routes, shapes, sizes, d.kind, stacks, ddr, d.slots, d.ncopy, space.split,
                    ev.workspace(ev.max_copies), res, False, 0, len(X))
        out.append(res)
    assert np.array_equal(out[0], out[1], equal_nan=True)


def test_table_entry_covers_the_study_alone_cases_only():
    table = np.zeros((1, 2, 1, 3 + 4, COST_FIELDS))           # 0..2 stacks, 0..3 channels
    assert table_entry(table, 3, 1, 0, 2, 1e12, 0.0, 1, 0.0) == 2        # all in HBM: by stacks
    assert table_entry(table, 3, 2, 0, 2, 1e12, 0.0, 1, 1.0) == 3 + 1    # all in DDR: by channels
    assert table_entry(table, 3, 1, 0, 0, 1e12, 0.0, 3, 0.0) == 3 + 3    # no local tier: from DDR
    assert table_entry(table, 3, 1, 0, 0, 1e12, 5e12, 2, 0.0) == 0       # an SRAM-resident kind's SRAM
    assert table_entry(table, 3, 1, 0, 2, 1e12, 0.0, 1, 0.25) == -1      # split between tiers
    assert table_entry(table, 3, 3, 0, 2, 1e12, 0.0, 1, 0.0) == -1       # more copies than the table
    assert table_entry(table, 3, 1, 0, 3, 1e12, 0.0, 1, 0.0) == -1       # more stacks
    assert table_entry(table, 3, 1, 0, 2, 1e12, 0.0, 4, 1.0) == -1       # more channels
    assert table_entry(table[:0], 3, 1, 0, 2, 1e12, 0.0, 1, 0.0) == -1   # no table
