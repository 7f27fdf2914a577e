"""How long a step's stages take together: a workload's scenarios (sets of stages run together, e.g. the
expert models an ensemble's router picks) over the stage DAG (the model is in dse.model.perf_model)."""
from __future__ import annotations

import numba as nb

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around
FIRST, REST = 0, 1     # hand-off instances: before the first instance of a stage, before the others


@nb.njit(cache=True, inline="always", error_model="numpy")
def sort_by_value(values, order, n):
    """``order[:n]`` = indices of ``values[:n]`` in ascending order (insertion sort, stable, no allocation)."""
    for x in range(n):
        v = values[nowrap(x)]
        k = x
        while k > 0 and values[nowrap(order[nowrap(k - 1)])] > v:
            order[nowrap(k)] = order[nowrap(k - 1)]
            k -= 1
        order[nowrap(k)] = x


@nb.njit(cache=True, inline="always", error_model="numpy")
def scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, chain, stage_t, comm, ct,
                     hosts, ht, n, finish, cps, in_scen, busy, host_busy, order):
    """(expected, p99) over scenarios of each scenario's makespan.

    A scenario's makespan is the longest of its critical path through the stage DAG, the busiest
    chiplet's total work in it (the two classic lower bounds of a schedule: stages on parallel branches
    that share a chiplet cannot overlap; for a chain of stages the critical path always binds) and the
    busiest host's time to issue the chiplet's kernels (``ht``: a host that issues ahead runs in parallel
    with its device, so a step takes the longer of the two: max(device, host), the steady state of the
    issue-execute pipeline of a repeated layer; the first issue and the last kernel's tail are left out;
    ``hosts`` False: no host issues ahead, ``ht`` is all 0 and is skipped).
    """
    S = stage_t.shape[nowrap(0)]
    n_scen = scen_prob.shape[nowrap(0)]
    for k in range(n_scen):
        for s in range(S):
            in_scen[nowrap(s)] = False
        for x in range(scen_ptr[nowrap(k)], scen_ptr[nowrap(k + 1)]):
            in_scen[nowrap(scen_stages[nowrap(x)])] = True
        longest = 0.0
        for i in range(n):
            busy[nowrap(i)] = 0.0
            host_busy[nowrap(i)] = 0.0
        for s in range(S):       # stages are numbered in topological order
            start = 0.0
            for x in range(after_ptr[nowrap(s)], after_ptr[nowrap(s + 1)]):
                start = max(start, finish[nowrap(after_ids[nowrap(x)])])
            w = 0.0
            if in_scen[nowrap(s)]:
                r = stage_repeat[nowrap(s)]
                w = r * stage_t[nowrap(s)] + comm[nowrap(s), nowrap(FIRST)] + (r - 1.0) * comm[nowrap(s), nowrap(REST)]
                if hosts:
                    for i in range(n):
                        host_busy[nowrap(i)] += r * ht[nowrap(s), nowrap(i)]
                if not chain:
                    for i in range(n):
                        busy[nowrap(i)] += r * ct[nowrap(s), nowrap(i)]
            finish[nowrap(s)] = start + w
            longest = max(longest, finish[nowrap(s)])
        for i in range(n):
            longest = max(longest, busy[nowrap(i)], host_busy[nowrap(i)])
        cps[nowrap(k)] = longest
    expected = 0.0
    for k in range(n_scen):
        expected += scen_prob[nowrap(k)] * cps[nowrap(k)]
    if n_scen == 1:
        return expected, cps[nowrap(0)]
    sort_by_value(cps, order, n_scen)
    acc = 0.0
    p99 = cps[nowrap(order[nowrap(n_scen - 1)])]
    for x in range(n_scen):
        acc += scen_prob[nowrap(order[nowrap(x)])]
        if acc >= 0.99 - 1e-12:
            p99 = cps[nowrap(order[nowrap(x)])]
            break
    return expected, p99
