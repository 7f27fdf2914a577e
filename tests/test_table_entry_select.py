"""Issue 52, eleventh round: dse.model.copy_table.table_entry picks its entry with selects, not branches; it
gives the entry the branching version gave (kept here as the reference) for every input, and the intact pass
that looks copies up with it gives the bits of the pass that costs every copy (tests/test_copy_table.py)."""
import numba as nb
import numpy as np

from dse.model.copy_table import table_entry


@nb.njit(cache=False)
def branching_entry(table, n_stacks, c, k, stacks_i, hbm_bw, sram_bw_k, ddr, f):
    """table_entry as it was (issue 52, eighth round): a branch on the tier the copy reads from."""
    if table.shape[0] == 0 or c > table.shape[1] or stacks_i < 0 or ddr < 0:
        return -1
    local = stacks_i * hbm_bw if stacks_i > 0 else sram_bw_k
    if local <= 0.0 or f == 1.0:
        return n_stacks + ddr if ddr < table.shape[3] - n_stacks else -1
    if f == 0.0 and stacks_i < n_stacks:
        return stacks_i
    return -1


@nb.njit(cache=False)
def new_entries(table, n_stacks, c, k, stacks, hbm_bw, sram_bw, ddr, f, out):
    for x in range(out.shape[0]):
        out[x] = table_entry(table, n_stacks, c[x], k[x], stacks[x], hbm_bw[x], sram_bw[x], ddr[x], f[x])


@nb.njit(cache=False)
def old_entries(table, n_stacks, c, k, stacks, hbm_bw, sram_bw, ddr, f, out):
    for x in range(out.shape[0]):
        out[x] = branching_entry(table, n_stacks, c[x], k[x], stacks[x], hbm_bw[x], sram_bw[x], ddr[x], f[x])


def test_selected_entry_is_the_branching_one_on_random_inputs():
    rng = np.random.default_rng(11)
    N = 20000
    seen = set()
    for n_stacks, n_ddr, copies in ((3, 4, 2), (1, 1, 1), (5, 9, 3), (3, 4, 0)):
        table = np.zeros((2 if copies else 0, copies, 2, n_stacks + n_ddr, 4))
        c = rng.integers(1, copies + 2, N)
        k = rng.integers(0, 2, N)
        stacks = rng.integers(-1, n_stacks + 2, N)
        hbm_bw = rng.choice([0.0, 1e12, np.nan], N, p=[0.2, 0.7, 0.1])
        sram_bw = rng.choice([0.0, 5e12], N)
        ddr = rng.integers(-1, n_ddr + 2, N)
        f = rng.choice([0.0, 1.0, 0.25, -0.0, np.nan, 1.0 - 1e-16], N)
        new, old = np.empty(N, np.int64), np.empty(N, np.int64)
        new_entries(table, n_stacks, c, k, stacks, hbm_bw, sram_bw, ddr, f, new)
        old_entries(table, n_stacks, c, k, stacks, hbm_bw, sram_bw, ddr, f, old)
        np.testing.assert_array_equal(new, old)
        seen.update(("ddr" if v >= n_stacks else "local" if v >= 0 else "costed") for v in old)
    assert seen == {"ddr", "local", "costed"}       # every outcome drawn, so a wrong one would show
