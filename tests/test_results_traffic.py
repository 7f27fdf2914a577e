"""dse.model.traffic and dse.model.breakdown: chiplet traffic, link loads and per-chiplet busy time of a design."""
import numpy as np
import pytest

import dse
from dse.model.breakdown import chiplet_table
from dse.model.prepare import prepare
from dse.study.space import Design
from dse.model.traffic import chiplet_traffic, link_loads, link_utilisation, unit_flows
from noc.mesh import xy_hops


@pytest.fixture(scope="module")
def tiny():
    return prepare(dse.load_study("tests/data/tiny.yaml"))


def design(rows, cols, chiplets, placement, mapping="many-to-many", hbm=None):
    n = rows * cols
    return Design(rows=rows, cols=cols, chiplets=chiplets, hbm_stacks=hbm or [1] * n, ddr_channels=1,
                  link="ucie-advanced", mapping=mapping, placement=placement)


def edge(tables, a, b):
    g = tables.workload.graph
    return g.edges[a, b]["bytes"], g.edges[a, b]["repeat"]


def test_hand_off_bytes_follow_the_graph(tiny):
    """Embedding on chiplet 0, everything else on chiplet 1: only embed -> attention crosses."""
    t = tiny.tables
    embed, attn, ffn, head = t.unit_names
    d = design(1, 2, ["big", "small"], {embed: [0], attn: [1], ffn: [1], head: [1]})
    traffic = chiplet_traffic(d, t)
    nbytes, repeat = edge(t, embed, attn)
    assert traffic[0, 1] == pytest.approx(nbytes * repeat)
    assert traffic[1, 0] == 0 and traffic[0, 0] == 0
    loads = link_loads(d, traffic, tiny.study.hardware.package).set_index(["src_slot", "dst_slot"])["bytes_per_step"]
    assert loads[(0, 1)] == pytest.approx(nbytes) and loads[(1, 0)] == 0


def test_replicas_split_what_they_send(tiny):
    """Two copies of the FFN on chiplets 1 and 2 each receive half of every attention -> FFN hand-off."""
    t = tiny.tables
    embed, attn, ffn, head = t.unit_names
    d = design(1, 3, ["big", "big", "big"], {embed: [0], attn: [0], ffn: [1, 2], head: [0]})
    traffic = chiplet_traffic(d, t)
    nbytes, repeat = edge(t, attn, ffn)
    assert traffic[0, 1] == pytest.approx(traffic[0, 2]) == pytest.approx(nbytes * repeat / 2)
    flows = unit_flows(d, t)
    assert set(flows["kind"]) == {"hand-off"}


def test_xy_route_loads_links_in_order(tiny):
    """A single flow 0 -> 3 on a 2 x 2 mesh goes east along row 0, then south (dimension order)."""
    d = design(2, 2, ["a"] * 4, {})
    traffic = np.zeros((4, 4))
    traffic[0, 3] = 100.0
    table = link_loads(d, traffic, tiny.study.hardware.package)
    loads = table.set_index(["src_slot", "dst_slot"])["bytes_per_step"]
    assert loads[(0, 1)] == 100 and loads[(1, 3)] == 100
    assert loads.drop([(0, 1), (1, 3)]).sum() == 0
    assert len(table) == 8                              # 4 neighbour pairs, both directions
    table["bandwidth_Bps"] = 1e3
    assert link_utilisation(table, step_s=0.5).max() == pytest.approx(0.2)


def test_byte_hops_match_the_evaluator(tiny):
    """Traffic x XY hops summed over chiplet pairs equals the evaluator's net_byte_hops metric."""
    rng = np.random.default_rng(0)
    X = rng.integers(tiny.space.lower, tiny.space.upper + 1, size=(12, tiny.space.n_var))
    designs = tiny.evaluator.designs(X)
    metrics = tiny.evaluator.evaluate_designs(designs, with_faults=False)
    for d, expected in zip(designs, metrics["net_byte_hops"]):
        n = d.rows * d.cols
        traffic = chiplet_traffic(d, tiny.tables)
        byte_hops = sum(traffic[i, j] * xy_hops(i, j, d.cols) for i in range(n) for j in range(n))
        assert byte_hops == pytest.approx(expected, rel=1e-9)


def test_one_chiplet_is_busy_the_whole_step(tiny):
    """With every unit on one chiplet and nothing in DDR, its busy time is the step latency."""
    t = tiny.tables
    d = design(1, 1, ["big"], {u: [0] for u in t.unit_names}, hbm=[2])
    latency = tiny.evaluator.evaluate_designs([d], with_faults=False)["latency_s"].iloc[0]
    chips = chiplet_table(d, tiny, latency)
    assert chips["busy_s"].iloc[0] == pytest.approx(latency, rel=1e-9)
    assert chips["spill_GiB"].iloc[0] == 0 and chips["n_units"].iloc[0] == 4


def test_breakdown_accounts_for_every_unit_copy(tiny):
    t = tiny.tables
    embed, attn, ffn, head = t.unit_names
    d = design(2, 2, ["big", "small", "big", "small"], {embed: [0], attn: [1, 3], ffn: [2], head: [0]},
               hbm=[1, 1, 0, 0])
    latency = tiny.evaluator.evaluate_designs([d], with_faults=False)["latency_s"].iloc[0]
    chips = chiplet_table(d, tiny, latency)
    assert list(chips["n_units"]) == [2, 1, 1, 1]
    assert (chips["busy_share"] <= 1 + 1e-9).all() and chips["busy_share"].max() > 0
    # chiplets without HBM keep what they store in DDR
    assert chips.loc[2, "spill_GiB"] == pytest.approx(chips.loc[2, "stored_GiB"])
    assert chips["sent_MB"].sum() == pytest.approx(chips["received_MB"].sum())


def test_shards_send_once_and_all_reduce_in_a_ring(tiny):
    """One-to-many (module docstring of dse.model.traffic, by hand): an unsharded sender sends the whole
    payload to every shard, only a sharded unit's first shard sends on, and its c shards pass
    2 (c - 1) D / c bytes round a ring (Thakur, Rabenseifner & Gropp, IJHPCA 2005)."""
    t = tiny.tables
    embed, attn, ffn, head = t.unit_names
    d = design(1, 4, ["big"] * 4, {embed: [0], attn: [1, 2], ffn: [3], head: [3]}, mapping="one-to-many")
    flows = unit_flows(d, t)
    into = flows[(flows["src_unit"] == embed) & (flows["dst_unit"] == attn)]
    assert sorted(zip(into["src_slot"], into["dst_slot"])) == [(0, 1), (0, 2)]
    assert np.all(into["bytes_per_occurrence"] == edge(t, embed, attn)[0])
    out = flows[(flows["src_unit"] == attn) & (flows["dst_unit"] == ffn)]
    assert list(zip(out["src_slot"], out["dst_slot"])) == [(1, 3)]
    assert out["bytes_per_occurrence"].iloc[0] == edge(t, attn, ffn)[0]
    ring = flows[flows["kind"] == "all-reduce"]
    assert sorted(zip(ring["src_slot"], ring["dst_slot"])) == [(1, 2), (2, 1)]
    u = t.unit_names.index(attn)
    assert ring["bytes_per_occurrence"].to_numpy() == pytest.approx(2.0 * (2 - 1) * t.unit_out_bytes[u] / 2)
    assert np.all(ring["edge"] == -1) and set(ring["src_unit"]) == {attn}


def _compute_unit_by_unit(d, prepared):
    """chiplet_busy_s's compute time as the loop over units and copies it was before (issue 52, sixth round)."""
    from dse.model.breakdown import design_state
    p = prepared.for_design(d)
    T, tables = p.package_evaluator.kernel, p.tables
    _, a = design_state(d, p)
    weight = T.stage_repeat * T.stage_prob
    compute = np.zeros(d.rows * d.cols)
    for u in range(len(tables.unit_names)):
        c = a.ncopy[0, u]
        for r in range(c):
            i = a.slots[0, u, r]
            compute[i] += weight[tables.unit_stage[u]] * T.unit_time[u, a.kind[0, i]] / c
    return compute


def test_busy_time_on_arrays_equals_the_unit_loop_and_the_table_takes_a_given_traffic():
    """The compute time per chiplet summed on arrays (np.add.at, in (unit, copy) order) has the bits of the
    loop over units; chiplet_table runs the intact pass once and takes the report's traffic matrix as is."""
    from dse.model.breakdown import chiplet_busy_s
    p = prepare(dse.load_study("tests/data/moe_small.yaml"))
    space = p.evaluator.space
    X = np.random.default_rng(4).integers(space.lower, space.upper + 1, size=(6, space.n_var))
    for d in p.evaluator.designs(X):
        compute, busy = chiplet_busy_s(d, p)
        assert np.array_equal(compute, _compute_unit_by_unit(d, p))
        traffic = chiplet_traffic(d, p.tables)
        own, given = chiplet_table(d, p, 1e-3), chiplet_table(d, p, 1e-3, traffic)
        assert own.equals(given) and np.array_equal(own["busy_s"].to_numpy(), busy)
