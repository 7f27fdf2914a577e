"""The intact pass's hand-offs (dse.model.hand_offs.stage_hand_offs) list a chiplet pair first seen without a
branch and keep every pair's sum at 0.0 between stages: the same link loads, latencies, amounts and step
totals, bit for bit, as the pass that tested each pair and set its sum to 0.0 when first seen (kept here)."""
import numba as nb
import numpy as np

import dse
from dse.model.hand_offs import (add_route, busiest_link, edge_amount, handoff_latency, in_instance,
                                 stage_hand_offs)
from dse.model.scenarios import FIRST, REST

nowrap = nb.uintp


@nb.njit(error_model="numpy")
def reference_hand_offs(s, n, split, slots, ncopy, pb, lb, L, LM, repeat, edge_start, edge_phase, edge_src, edge_dst,
                     edge_bytes, edge_sync, pair_ptr, pad_ptr, pad_links, pair_latency, pair_energy, link_inv_bw, comm,
                     loads, edge_lat, edge_amt, pair_amt, pair_seen, pair_list):
    """stage_hand_offs as it was before (issue 52, seventh round): each pair tested, its sum set at first sight."""
    comm[nowrap(s), nowrap(REST)] = 0.0
    hand_off_net = 0.0
    hand_off_e = 0.0
    for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
        edge_lat[nowrap(e)] = 0.0
    for instance in range(2 if repeat > 1 else 1):
        base = (2 * s + instance) * LM
        for link in range(L + 4):
            loads[nowrap(base + link)] = 0.0
        hops = 0.0
        energy = 0.0
        n_pairs = 0
        slowest = 0.0
        for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
            if not in_instance(edge_phase[nowrap(e)], instance):
                continue
            a, b = edge_src[nowrap(e)], edge_dst[nowrap(e)]
            ca = 1 if split else ncopy[nowrap(a)]
            cb = ncopy[nowrap(b)]
            amount = edge_amount(edge_bytes[nowrap(e)], ca, cb, split)
            edge_amt[nowrap(e)] = amount
            longest = 0.0
            for ra in range(ca):
                i = slots[nowrap(a), nowrap(ra)]
                for rb in range(cb):
                    j = slots[nowrap(b), nowrap(rb)]
                    if i != j:
                        q = i * n + j
                        longest = max(longest, pair_latency[nowrap(pb + q)])
                        if not pair_seen[nowrap(q)]:
                            pair_seen[nowrap(q)] = True
                            pair_amt[nowrap(q)] = 0.0
                            pair_list[nowrap(n_pairs)] = q
                            n_pairs += 1
                        pair_amt[nowrap(q)] += amount
            edge_lat[nowrap(e)] = handoff_latency(longest, edge_sync[nowrap(e)])
            slowest = max(slowest, edge_lat[nowrap(e)])
        for x in range(n_pairs):
            q = pair_list[nowrap(x)]
            pair_seen[nowrap(q)] = False
            amount = pair_amt[nowrap(q)]
            p = pb + q
            add_route(loads, base, pad_ptr, pad_links, p, amount)
            hops += amount * (pair_ptr[nowrap(p + 1)] - pair_ptr[nowrap(p)])
            energy += amount * pair_energy[nowrap(p)]
        comm[nowrap(s), nowrap(instance)] = slowest + busiest_link(loads, base, link_inv_bw, lb, L)
        times = 1.0 if instance == FIRST else repeat - 1.0
        hand_off_net += times * hops
        hand_off_e += times * energy
    return hand_off_net, hand_off_e


def test_branch_free_pair_list_gives_the_tested_pairs_bits():
    checked = 0
    for path in ("tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml"):
        prepared = dse.prepare(dse.load_study(path))
        ev, space = prepared.package_evaluator, prepared.space
        T, R = ev.kernel, ev.routes
        X = np.random.default_rng(3).integers(space.lower, space.upper + 1, size=(12, space.n_var))
        d = ev.decode(X)
        shapes = ev._shapes(d.rows, d.cols)
        W = [ev.workspace(ev.max_copies) for _ in range(2)]
        LM = W[0].loads.shape[0] // (2 * T.stage_repeat.shape[0])
        for p in range(len(X)):
            sh, n = shapes[p], int(d.rows[p] * d.cols[p])
            pb, lb, L = R.pair_base[sh], R.link_base[sh], R.n_links[sh]
            for s in range(T.stage_repeat.shape[0]):
                got = []
                for fn, w in ((stage_hand_offs, W[0]), (reference_hand_offs, W[1])):
                    got.append(fn(s, n, space.split, d.slots[p], d.ncopy[p], pb, lb, L, LM, T.stage_repeat[s],
                                  T.edge_start, T.edge_phase, T.edge_src, T.edge_dst, T.edge_bytes, T.edge_sync,
                                  R.pair_ptr, R.pad_ptr, R.pad_links, R.pair_latency, R.pair_energy, R.link_inv_bw,
                                  w.comm, w.loads, w.edge_lat, w.edge_amt, w.pair_amt, w.pair_seen, w.pair_list))
                assert got[0] == got[1]
                checked += T.edge_start[s + 1] > T.edge_start[s]
                assert not W[0].pair_amt.any() and not W[0].pair_seen.any()
            for name in ("loads", "comm", "edge_lat", "edge_amt"):
                assert np.array_equal(getattr(W[0], name), getattr(W[1], name), equal_nan=True), name
    assert checked > 0
