"""The assignment EPLB's packed bins are matched to chiplets with (dse.runtime.policies.eplb): the
shortest augmenting path method of Crouse, IEEE TAES 52(4), 2016, as scipy.optimize.linear_sum_assignment
runs it, its tie-breaking included, compiled (one call per layer and rebalance)."""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def assign_into(cost: np.ndarray, n: int, u, v, spc, path, col4row, row4col, sr, sc, remaining) -> None:
    """`assign_max` on ``cost[:n, :n]`` (the gains negated) with scratch of at least ``n``; the columns
    land in ``col4row[:n]``. ``sr`` / ``sc``: the rows and columns a search scanned, listed (integers), so
    a row's dual update touches those alone (each is scanned once a search: the same updates as scipy's
    sweep over flags, in another order, each element's its own)."""
    u[:n], v[:n] = 0.0, 0.0
    path[:n], col4row[:n], row4col[:n] = -1, -1, -1
    for cur in range(n):
        min_val, left = 0.0, n
        for it in range(n):
            remaining[it] = n - it - 1
            spc[it] = np.inf
        n_sr, n_sc = 0, 0
        sink, i = -1, cur
        while sink == -1:
            index, lowest = -1, np.inf
            sr[n_sr] = i
            n_sr += 1
            base = u[i]
            for it in range(left):          # selects, not branches (the same picks)
                j = remaining[it]
                reduced = min_val + cost[i, j] - base - v[j]
                shorter = reduced < spc[j]
                path[j] = i if shorter else path[j]
                sj = reduced if shorter else spc[j]
                spc[j] = sj
                take = (sj < lowest) | ((sj == lowest) & (row4col[j] == -1))
                lowest = sj if take else lowest
                index = it if take else index
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            sc[n_sc] = j
            n_sc += 1
            left -= 1
            remaining[index] = remaining[left]
        u[cur] += min_val
        for t in range(1, n_sr):            # sr[0] is cur
            i = sr[t]
            u[i] += min_val - spc[col4row[i]]
        for t in range(n_sc):
            j = sc[t]
            v[j] -= min_val - spc[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break


@nb.njit(cache=True)
def assign_max(gain: np.ndarray) -> np.ndarray:
    """Column of each row maximising the total ``gain`` (square): the shortest augmenting path method
    (Crouse 2016) as scipy.optimize.linear_sum_assignment runs it, ties broken alike."""
    n = gain.shape[0]
    cost = -gain.astype(np.float64)
    col4row = np.full(n, -1)
    assign_into(cost, n, np.zeros(n), np.zeros(n), np.zeros(n), np.full(n, -1), col4row, np.full(n, -1),
                np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64))
    return col4row
