"""The bound that settles a failure without re-routing it (dse.model.failure_bound) and the rows it reads
(dse.model.kernel_tables.hand_off_rows)."""
import numpy as np
import pytest

import dse
from dse.model.failure_bound import MARGIN, positive_without_hand_offs, settled_by_bound
from dse.model.hand_offs import in_instance
from dse.model.scenarios import scenario_latency


def test_hand_off_rows_hold_each_rows_bytes_and_longest_sync():
    """Per (stage, instance) row, the bytes and the longest sync of the hand-offs into it, edge by edge as the
    passes read them (dse.model.hand_offs.in_instance)."""
    T = dse.prepare(dse.load_study("tests/data/moe_small.yaml")).package_evaluator.kernel
    S = len(T.stage_repeat)
    rows, sync = np.zeros(2 * S), np.zeros(2 * S)
    for s in range(S):
        for e in range(T.edge_start[s], T.edge_start[s + 1]):
            for instance in range(2 if T.stage_repeat[s] > 1 else 1):
                if in_instance(T.edge_phase[e], instance):
                    rows[2 * s + instance] += T.edge_bytes[e]
                    sync[2 * s + instance] = max(sync[2 * s + instance], T.edge_sync[e])
    assert rows.sum() > 0
    np.testing.assert_allclose(T.row_bytes, rows, rtol=1e-12)
    assert np.array_equal(T.row_sync, sync)


def chain(stage_t, comm):
    """A chain of stages run once each, one scenario, two chiplets: the arrays scenario_latency reads."""
    S = len(stage_t)
    return dict(scen_ptr=np.array([0, S]), scen_stages=np.arange(S), scen_prob=np.array([1.0]),
                after_ptr=np.array([0] + list(range(S))), after_ids=np.arange(S - 1), chain=True,
                stage_t=np.asarray(stage_t, float), comm=np.asarray(comm, float), ct=np.zeros((S, 2)), hosts=False,
                ht=np.zeros((S, 2)), n=2, finish=np.zeros(S), cps=np.zeros(1), in_scen=np.zeros(S, np.bool_),
                busy=np.zeros(2), host_busy=np.zeros(2), order=np.zeros(1, np.int64))


def settle(s, latency, row_bytes, byte_s, edge_stages=(1,)):
    edges = np.asarray(edge_stages, np.int64)
    S = len(s["stage_t"])
    row_slot = np.full(2 * S, -1, np.int64)
    out = settled_by_bound(np.arange(len(edges)), len(edges), edges, np.zeros(len(edges), np.int64),
                           np.ones(S), np.asarray(row_bytes, float), np.full(2 * S, 1e-6), 2e-6, byte_s,
                           s["comm"], row_slot, np.zeros(2 * S, np.int64), np.zeros(2 * S), latency, 0.0,
                           s["scen_ptr"], s["scen_stages"], s["scen_prob"], s["after_ptr"], s["after_ids"],
                           s["chain"], s["stage_t"], s["ct"], s["hosts"], s["ht"], s["n"], s["finish"], s["cps"],
                           s["in_scen"], s["busy"], s["host_busy"], s["order"])
    return out, row_slot


def test_a_failure_within_the_intact_latency_is_settled_by_a_bound_above_it():
    """Stage 1's hand-offs change: its row may take at most its intact time + the longest route and sync (2 + 1
    us) + its bytes at the slowest link's rate (1 MB x 1 ns/B = 1 ms), x (1 + MARGIN); the chain's latency is then
    at most 10 + (4 + 3 + 1000) + 30 us + the other rows' hand-offs (1 + 1 us), a bound the exact latency stays
    below whatever the re-routing gives. Within the intact latency (2 ms): settled, with that bound; within 1 ms:
    not."""
    s = chain([10e-6, 4e-6, 30e-6], [[1e-6, 0.0], [0.5e-6, 0.0], [1e-6, 0.0]])
    before = s["comm"].copy()
    row_bytes = np.zeros(6)
    row_bytes[2] = 1e6
    (settled, high, p99), row_slot = settle(s, 2e-3, row_bytes, 1e-9)
    bumped = (0.5e-6 + (2e-6 + 1e-6) + 1e6 * 1e-9) * (1.0 + MARGIN)
    assert settled and high == pytest.approx(10e-6 + 4e-6 + 30e-6 + 1e-6 + bumped + 1e-6, rel=1e-12)
    assert p99 == high
    assert np.array_equal(s["comm"], before) and (row_slot == -1).all()       # as they were
    (settled, _, _), _ = settle(s, 1e-3, row_bytes, 1e-9)
    assert not settled


def test_a_bound_that_is_not_finite_settles_nothing():
    """A link of no bandwidth (infinite inverse bandwidth) bounds nothing; nor does a step that takes no time."""
    s = chain([10e-6, 4e-6, 30e-6], [[1e-6, 0.0], [0.5e-6, 0.0], [1e-6, 0.0]])
    (settled, _, _), _ = settle(s, 1.0, np.full(6, 1e6), np.inf)
    assert not settled
    idle = chain([0.0, 0.0], [[0.0, 0.0], [0.0, 0.0]])
    (settled, _, _), _ = settle(idle, 1.0, np.zeros(4), 1e-9)
    assert not settled                 # the lower bound is 0: the exact latency could be 0, which keeps nothing


def test_the_bound_is_above_the_exact_latency_of_any_rerouting():
    """Monotone in each row: for rows anywhere between 0 and their bumped value, scenario_latency stays at most the
    bound (random rows of a chain with a host, the rows of stage 1 changed)."""
    rng = np.random.default_rng(5)
    s = chain(rng.uniform(1e-6, 1e-5, 6), rng.uniform(0, 1e-6, (6, 2)))
    (settled, high, _), _ = settle(s, 1.0, np.full(12, 2e3), 1e-9, edge_stages=(1, 3))
    assert settled
    for _ in range(20):
        comm = s["comm"].copy()
        comm[[1, 3], 0] = rng.uniform(0, 1, 2) * (comm[[1, 3], 0] + 3e-6 + 2e3 * 1e-9)
        exact, _ = scenario_latency(s["scen_ptr"], s["scen_stages"], s["scen_prob"], s["after_ptr"], s["after_ids"],
                                    np.ones(6), True, s["stage_t"], comm, s["ct"], False, s["ht"], 2, s["finish"],
                                    s["cps"], s["in_scen"], s["busy"], s["host_busy"], s["order"])
        assert exact <= high


def test_a_step_shown_positive_without_hand_offs_has_a_positive_latency_with_none():
    """`positive_without_hand_offs` (which spares the lower bound's scenario_latency call) says yes only where
    scenario_latency with every hand-off at 0 is above 0: random DAGs of scenarios, some stages of no compute time,
    some scenarios of probability 0, tiny and zero times included; and it says yes for a plain chain."""
    rng = np.random.default_rng(19)
    said_yes = said_no = 0
    for _ in range(300):
        S, n_scen = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        stage_t = rng.choice([0.0, 1e-300, 1e-6, 3e-3], S)
        repeat = rng.choice([1.0, 2.0, 4.0], S)
        prob = rng.choice([0.0, 1e-12, 0.5, 1.0], n_scen)
        members = [np.flatnonzero(rng.random(S) < 0.5) for _ in range(n_scen)]
        scen_ptr = np.concatenate([[0], np.cumsum([len(m) for m in members])]).astype(np.int64)
        scen_stages = np.concatenate(members + [np.zeros(0, np.int64)]).astype(np.int64)
        after = [[a for a in range(s) if rng.random() < 0.4] for s in range(S)]
        after_ptr = np.concatenate([[0], np.cumsum([len(a) for a in after])]).astype(np.int64)
        after_ids = np.array([a for lst in after for a in lst], np.int64)
        ct = rng.uniform(0, 1e-3, (S, 2)) * (stage_t > 0)[:, None]
        low, _ = scenario_latency(scen_ptr, scen_stages, prob, after_ptr, after_ids, repeat, False, stage_t,
                                  np.zeros((S, 2)), ct, False, np.zeros((S, 2)), 2, np.zeros(S), np.zeros(n_scen),
                                  np.zeros(S, np.bool_), np.zeros(2), np.zeros(2), np.zeros(n_scen, np.int64))
        if positive_without_hand_offs(scen_ptr, prob, scen_stages, repeat, stage_t):
            said_yes += 1
            assert low > 0.0
        else:
            said_no += 1
    assert said_yes > 50 and said_no > 50            # both answers were exercised
    s = chain([10e-6, 4e-6], [[0.0, 0.0], [0.0, 0.0]])
    assert positive_without_hand_offs(s["scen_ptr"], s["scen_prob"], s["scen_stages"], np.ones(2), s["stage_t"])
