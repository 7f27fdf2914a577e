"""A failure that cannot slow the design, settled without re-routing its hand-offs (issue 52, seventeenth round).

A design's metrics read a failure's latency through dse.model.metric_rows.retained_frac only: min(intact latency
/ latency after it, 1), so every latency after it that is finite, above 0 and at most the intact latency gives
the same 1.0. About half the single failures of issue 7's Mixtral per layer (51 %) and of the fault-tolerance
study's DeepSeek-V3 (39 %) are of that kind: the failed chiplet's units move off a chiplet that was not the
step's bottleneck. `settled_by_bound` proves it for a failure from an upper and a lower bound on its latency,
computed before the exact re-routing (dse.model.failures), which then need not run: the bits of every metric are
those of the exact pass (tests/test_evaluator_faults.py checks the failure columns against each failure evaluated
exactly over random designs; tests/test_failure_bound.py checks the bound).

The upper bound. The exact pass re-routes the hand-offs of the edges touching a moved unit on copies of their
stages' load rows (a row: one stage, one instance): the intact loads, minus each old copy pair's bytes along its
route, plus each new pair's, in order; then a row's time is its longest hand-off route plus its busiest link's
bytes x inverse bandwidth (dse.model.hand_offs). Floating-point addition rounds monotonically, so leaving out the
subtractions can only raise a computed load, and the additions raise a link's load by at most the row's bytes:
at most ``row_bytes`` (every hand-off of the row, dse.model.kernel_tables.hand_off_rows) for copies that share
an edge's bytes, x the largest copy count for shards, each of which receives the whole input. The busiest link
then takes at most ``byte_s`` (the package's slowest link's inverse bandwidth) x those bytes more than intact,
and the longest hand-off is at most the intact row's or ``route_s`` (the package's longest route) + the row's
longest software sync. Each bumped row is the intact row's time plus both, x (1 + `MARGIN`): far above the
rounding of any sum of up to a billion terms. The step's latency (dse.model.scenarios.scenario_latency: sums,
products by non-negative weights and maxima) is monotone in every row, so with the bumped rows it bounds the
exact latency from above. The lower bound: the same with those rows' hand-offs taking no time (a row's time is
never negative); it need only be above 0, which `positive_without_hand_offs` shows without computing it where a
scenario of positive probability holds a stage of positive compute time. A bound that is not finite settles nothing.
"""
from __future__ import annotations

import math

import numba as nb

from .hand_offs import in_instance
from .scenarios import scenario_latency

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around

#: relative margin on a bumped row's time: covers the rounding of the exact pass's sums (module docstring)
MARGIN = 1e-6


@nb.njit(cache=True, inline="always", error_model="numpy")
def package_bounds(pair_latency, pb, n, link_inv_bw, lb, L, copies):
    """`settled_by_bound`'s ``route_s`` and ``byte_s`` for a package's route table ``pb`` / ``lb`` (n chiplets, L
    links): the longest route latency of any chiplet pair, and the slowest link's inverse bandwidth x ``copies``
    (the largest copy count of a one-to-many mapping, whose every shard receives an edge's whole bytes; else 1)."""
    route_s = 0.0
    for q in range(n * n):
        route_s = max(route_s, pair_latency[nowrap(pb + q)])
    byte_s = 0.0
    for link in range(L):
        byte_s = max(byte_s, link_inv_bw[nowrap(lb + link)])
    return route_s, byte_s * copies


@nb.njit(cache=True, inline="always", error_model="numpy")
def positive_without_hand_offs(scen_ptr, scen_prob, scen_stages, stage_repeat, stage_t):
    """Whether the step's expected latency is surely above 0 whatever its hand-offs take: some scenario of
    positive probability holds a stage of positive compute time. That scenario's makespan is at least the stage's
    repeat x time (dse.model.scenarios.scenario_latency adds and takes maxima of non-negative terms, and rounding
    is monotone), and the expected latency at least its probability x that."""
    for k in range(scen_prob.shape[nowrap(0)]):
        for x in range(scen_ptr[nowrap(k)], scen_ptr[nowrap(k + 1)]):
            s = scen_stages[nowrap(x)]
            if scen_prob[nowrap(k)] * (stage_repeat[nowrap(s)] * stage_t[nowrap(s)]) > 0.0:
                return True
    return False


@nb.njit(cache=True, error_model="numpy", _nrt=False)
def settled_by_bound(edge_list, n_edges, edge_stage, edge_phase, stage_repeat, row_bytes, row_sync, route_s, byte_s,
                     comm, row_slot, rows, kept, latency, wait, scen_ptr, scen_stages, scen_prob, after_ptr, after_ids,
                     chain, stage_t, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy, order):
    """Whether the failure whose moved units' edges are ``edge_list[:n_edges]`` keeps the step within the intact
    ``latency`` (module docstring), ``comm`` holding the intact design's rows and ``stage_t``, ``ct``, ``ht`` the
    failure's stage times; then also its (expected, p99) latency bounds from above (each + ``wait``, the step's
    sequence wait), which give the same retained fraction as the exact latencies. ``byte_s``: the slowest link's
    inverse bandwidth x the copy factor. ``comm`` and ``row_slot`` (all -1) are as they were on return; ``rows``
    and ``kept`` are scratch; the rest as dse.model.scenarios.scenario_latency reads them.

    Called, not inlined (Numba's inliner refuses it; dse.model.failure_remap's docstring says why a call), though
    the caller still counts references to its 24 arrays around the call (docs/performance.md, "Issue 52,
    nineteenth round"); compiled without reference counting (``_nrt=False``: it neither allocates nor keeps an
    array): with it, 20 reference counts a failure fewer, 868 -> 547 an exact design of issue 7's Mixtral with its
    16 failures (issue 52, nineteenth round)."""
    n_rows = 0
    for k in range(n_edges):
        e = edge_list[nowrap(k)]
        s = edge_stage[nowrap(e)]
        for instance in range(2 if stage_repeat[nowrap(s)] > 1 else 1):
            row = 2 * s + instance
            if in_instance(edge_phase[nowrap(e)], instance) and row_slot[nowrap(row)] < 0:
                row_slot[nowrap(row)] = n_rows
                rows[nowrap(n_rows)] = row
                n_rows += 1
    for k in range(n_rows):
        row = rows[nowrap(k)]
        kept[nowrap(k)] = comm[nowrap(row // 2), nowrap(row % 2)]
        comm[nowrap(row // 2), nowrap(row % 2)] = (kept[nowrap(k)] + (route_s + row_sync[nowrap(row)])
                                                   + row_bytes[nowrap(row)] * byte_s) * (1.0 + MARGIN)
    high, p99 = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, chain, stage_t,
                                 comm, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy, order)
    high, p99 = high + wait, p99 + wait
    settled = math.isfinite(high) and high <= latency
    if settled and not positive_without_hand_offs(scen_ptr, scen_prob, scen_stages, stage_repeat, stage_t):
        for k in range(n_rows):
            row = rows[nowrap(k)]
            comm[nowrap(row // 2), nowrap(row % 2)] = 0.0
        low, _ = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, chain, stage_t,
                                  comm, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy, order)
        settled = low + wait > 0.0
    for k in range(n_rows):
        row = rows[nowrap(k)]
        comm[nowrap(row // 2), nowrap(row % 2)] = kept[nowrap(k)]
        row_slot[nowrap(row)] = -1
    return settled, high, p99
