"""The preparation's tables built on arrays (issue 52, seventh round) equal, bit for bit, the per-unit and
per-row Python they replace, kept here as the reference: the workload graph's unit and edge columns
(dse.model.graph_columns), each operator row's unit (dse.model.tables.unit_codes, workloads.workload.per_row),
the heuristic seeds (dse.model.heuristics: arrays instead of placement dicts, `unique_rows` instead of
``np.unique(axis=0)``) and the attribute table's best chiplets (dse.model.characterize)."""
import numpy as np
import pandas as pd
import pytest

import dse
import workloads
from dse.model.characterize import characterize
from dse.model.graph_columns import edge_columns, unit_columns
from dse.model.heuristics import affinity_clustering, encode, greedy_by_load, seed_vectors, unique_rows
from dse.model.placement import spread_stacks
from dse.model.tables import UNIT_KINDS, build_workload, unit_codes
from workloads.workload import per_row

SHARDED = "tests/data/tiny_moe.yaml"


def _sharded_study():
    """tests/data/tiny_moe.yaml with its experts and layers sharded two ways (edges between shards: every
    kind of collective), and 1.5 sequences a step (fractional figures)."""
    study = dse.load_study(SHARDED)
    data = study.model_dump(exclude_none=True)
    data["workload"].update(tp=2, expert_tp=True)
    return dse.Study.from_dict(data)


def _ensemble_study():
    chiplet = {"name": "c", "kind": "systolic", "array": [64, 64], "dataflow": "ws", "sram_mb": 8,
               "freq_ghz": 1.0, "node": "7nm"}
    ensemble = {"morphology": "graph", "nodes": [{"name": "p1", "model": "gpt2"}, {"name": "p2", "model": "gpt2"},
                                                 {"name": "agg", "model": "gpt2"}],
                "edges": [["p1", "agg"], ["p2", "agg"]]}
    return dse.Study.from_dict({
        "name": "eoe", "workload": {"ensemble": ensemble, "phase": "decode", "batch": 2, "context": 64},
        "hardware": {"chiplets": [chiplet], "memory": [{"kind": "hbm3", "stacks": [0, 3]},
                                                       {"kind": "ddr5", "channels": [1, 1]}],
                     "package": {"mesh": {"rows": 1, "cols": 2}}},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})


def _per_unit_reading(wl):
    """dse.model.tables.build_tables's per-unit and per-edge reading as it was (main 30a81bf)."""
    units = wl.units
    index = {u: i for i, u in enumerate(units)}
    nodes = dict(wl.graph.nodes(data=True))
    out_bytes = np.zeros(len(units))
    for a, _, d in wl.graph.edges(data=True):
        out_bytes[index[a]] = max(out_bytes[index[a]], d["bytes"])

    def sync(src, dst):
        t = int(src.get("shards", 1))
        if t > 1 and int(dst.get("shards", 1)) > 1:
            return 2.0 * (t - 1)
        return float(t - 1) if t > 1 else 1.0

    def route(node, default):
        q = node.get("selection_prob", 1.0)
        if "tokens" in node and q > 0:
            return float(node["tokens"]) / min(q, 1.0)
        return float(default)

    edges = [(index[a], index[b], d["bytes"], d["repeat"], sync(nodes[a], nodes[b]))
             for a, b, d in wl.graph.edges(data=True)]
    e = np.array(edges, dtype=float).reshape(-1, 5)
    return dict(
        unit_kind=np.array([UNIT_KINDS.index(nodes[u]["kind"]) for u in units]),
        unit_stage=np.array([nodes[u]["stage"] for u in units]),
        unit_capacity_bytes=np.array([nodes[u]["weight_bytes"] for u in units], dtype=float),
        unit_kv_bytes=np.array([nodes[u]["kv_bytes_per_token"] * wl.batch * wl.context for u in units]),
        unit_prob=np.array([nodes[u]["prob"] for u in units], dtype=float),
        unit_selection=np.array([nodes[u]["selection_prob"] for u in units], dtype=float),
        unit_route_tokens=np.array([route(nodes[u], wl.tokens_per_step) for u in units], dtype=float),
        unit_out_bytes=out_bytes,
        edge_src=e[:, 0].astype(np.int64), edge_dst=e[:, 1].astype(np.int64), edge_bytes=e[:, 2].copy(),
        edge_repeat=e[:, 3].copy(), edge_sync_steps=e[:, 4].copy())


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("make", [_sharded_study, _ensemble_study, lambda: dse.load_study("studies/quickstart.yaml")])
def test_graph_columns_equal_the_per_unit_reading(make):
    wl = build_workload(make())
    units = wl.units
    index = {u: i for i, u in enumerate(units)}
    got = unit_columns(wl.graph, units, wl.batch, wl.context, wl.tokens_per_step, UNIT_KINDS)
    got.update(edge_columns(wl.graph, index, got.pop("shards"), len(units)))
    want = _per_unit_reading(wl)
    assert got.keys() == want.keys()
    for key in want:
        assert _same_bits(got[key], want[key]), key
    assert (got["edge_sync_steps"] > 1).any() or make is not _sharded_study     # collectives were covered
    # each operator row's unit, one lookup per distinct unit, as pandas' map gave it
    assert _same_bits(unit_codes(wl.ops["unit"], index), wl.ops["unit"].map(index).to_numpy())


def test_per_row_equals_pandas_map():
    ops = workloads.extract_transformer(workloads.load_model("tests/data/tiny-moe/config.json"), per_layer=True,
                                        batch=4, context=64).ops
    experts = {u: i % 7 for i, u in enumerate(pd.unique(ops["unit"]))}
    share = {u: 0.1 * i for i, u in enumerate(pd.unique(ops["unit"]))}
    assert _same_bits(per_row(ops["unit"], experts, int), ops["unit"].map(experts).astype(int).to_numpy())
    assert _same_bits(per_row(ops["unit"], share), ops["unit"].map(share).to_numpy())


def test_unique_rows_orders_as_numpy_unique():
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, size=(9, 40))
    x[4] = x[1]
    x[7] = x[2]
    x[8, :39] = x[0, :39]          # rows that differ only in their last gene
    assert _same_bits(unique_rows(x), np.unique(x, axis=0))


def test_seed_vectors_equal_the_placement_dicts():
    """The seeds encoded straight from the heuristics' arrays equal those encoded from their placement dicts
    and deduplicated by np.unique, as `seed_vectors` did on main."""
    study = dse.load_study(SHARDED)
    p = dse.prepare(study)
    t, space = p.tables, p.space
    mesh = study.hardware.package.mesh
    shapes = {(mesh.rows[1], mesh.cols[1]), ((mesh.rows[0] + mesh.rows[1]) // 2, (mesh.cols[0] + mesh.cols[1]) // 2)}
    hbm, ddr = int(space.upper[space.slices["hbm"]][0]), int(space.upper[space.slices["ddr"]][0])
    copies = int(space.upper[space.slices["copies"]].max())
    seeds = []
    for rows, cols in sorted(shapes):
        for k in range(len(t.kind_names)):
            kinds = [k] * (rows * cols)
            stacks = spread_stacks(hbm, kinds, t.kind_hbm_phy)
            for placement in (greedy_by_load(t, rows * cols, kinds, stacks, copies),
                              affinity_clustering(t, rows, cols, kinds)):
                seeds.append(encode(space, rows, cols, kinds, hbm, ddr, placement, t.unit_names))
    assert _same_bits(seed_vectors(study, t, space), np.unique(np.array(seeds), axis=0))
    assert _same_bits(p.space.seeds, np.unique(np.array(seeds), axis=0))


def test_characterize_best_chiplets_equal_the_per_row_lookup():
    df = characterize(dse.prepare(dse.load_study(SHARDED)))
    for column, by in (("best_by_latency", "time_s"), ("best_by_energy", "energy_j")):
        best = df.loc[df.groupby(["unit", "precision"], sort=False)[by].idxmin(), ["unit", "precision", "chiplet"]]
        chosen = dict(zip(zip(best["unit"], best["precision"]), best["chiplet"]))
        assert df[column].tolist() == [chosen[key] for key in zip(df["unit"], df["precision"])]
    assert df["best_by_latency"].dtype == df["unit"].dtype
