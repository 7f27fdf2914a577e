"""Issue 52, eighth round: Python per unit or per edge replaced by arrays, with the same results as the
loops they replace (kept here as the reference): each unit's incident edges of the kernel tables
(dse.model.kernel_tables.incident_edges), the attribute table's units' quality (one `weight_term` per
distinct precision and share) and its operator rows' units (dse.model.tables.unit_codes)."""
import numpy as np

import dse
from dse.model.characterize import characterize, unit_quality
from dse.model.kernel_tables import _csr, incident_edges
from dse.model.study_quality import active_shares
from dse.quality import model_params, weight_term
import workloads

SHARDED = "tests/data/tiny_moe.yaml"


def _incident_by_loop(src, dst, n_units):
    """The kernel tables' incident edges as they were built before (a list per unit, edge by edge)."""
    incident = [[] for _ in range(n_units)]
    for e, (a, b) in enumerate(zip(src, dst)):
        incident[a].append(e)
        if b != a:
            incident[b].append(e)
    return _csr(incident)


def test_incident_edges_equal_the_edge_by_edge_lists():
    rng = np.random.default_rng(2)
    for units, edges in [(1, 0), (5, 1), (40, 300), (3_000, 6_000)]:
        src = rng.integers(0, units, edges)
        dst = np.where(rng.random(edges) < 0.1, src, rng.integers(0, units, edges))      # some loops
        got, want = incident_edges(src, dst, units), _incident_by_loop(src, dst, units)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.int64 and np.array_equal(g, w)
    T = dse.prepare(dse.load_study("studies/quickstart.yaml")).package_evaluator.kernel
    src, dst = T.edge_src, T.edge_dst
    for g, w in zip((T.unit_edge_ptr, T.unit_edges), _incident_by_loop(src, dst, len(T.unit_stage))):
        assert np.array_equal(g, w)


def test_unit_quality_and_operator_units_equal_the_per_unit_reading():
    data = dse.load_study(SHARDED).model_dump(exclude_none=True)
    data["workload"]["precision"] = "int8"                 # quantised: the units' quality differs
    p = dse.prepare(dse.Study.from_dict(data))
    t, spec = p.tables, p.study.workload
    share = active_shares(t)
    params = model_params(workloads.load_model(spec.model))
    precision = t.unit_precision or [spec.precision] * len(share)
    want = np.array([weight_term(q, params, float(f))[0] for q, f in zip(precision, share)])
    assert np.array_equal(unit_quality(p), want) and len(set(want.tolist())) > 1
    df = characterize(p)
    ops = t.workload.ops
    flops = np.zeros(len(t.unit_names))
    np.add.at(flops, ops["unit"].map({u: i for i, u in enumerate(t.unit_names)}).to_numpy(),
              (ops["flops"] * ops["prob"]).to_numpy(float))
    repeat = np.asarray(t.stage_repeat, float)[np.asarray(t.unit_stage)]
    first = df.drop_duplicates("unit")
    assert first["unit"].tolist() == list(t.unit_names)
    assert np.array_equal(first["flops"].to_numpy(float), flops * repeat)


def test_held_text_counts_kinds_as_the_graph_lookup_did():
    """The report's per-chiplet cell (dse.results.report.held_text) reads the kinds from one map of the
    graph instead of a graph lookup per unit: the same text, kinds in the order first met; the counts are
    Breakdowns.kind_counts' (tests/test_breakdown_arrays.py)."""
    from collections import Counter

    import networkx as nx
    from dse.results.report import MAX_UNITS_NAMED, held_text
    g = nx.DiGraph()
    rng = np.random.default_rng(1)
    kinds = ["expert", "attention", "ffn", "lm_head"]
    for i in range(400):
        g.add_node(f"u{i}", kind=kinds[int(rng.integers(0, 4))])

    def by_graph(units):
        names = units.split()
        if not names:
            return "-"
        if len(names) <= MAX_UNITS_NAMED:
            return units
        counts = {}
        for u in names:
            counts[g.nodes[u]["kind"]] = counts.get(g.nodes[u]["kind"], 0) + 1
        return ", ".join(f"{n} {kind}" for kind, n in counts.items())
    kind_of = dict(g.nodes(data="kind"))
    for n in (0, 3, MAX_UNITS_NAMED, MAX_UNITS_NAMED + 1, 250):
        units = " ".join(f"u{i}" for i in rng.choice(400, n, replace=False))
        counts = list(Counter(map(kind_of.__getitem__, units.split())).items())    # as Breakdowns.kind_counts
        assert held_text(units, n, counts) == by_graph(units)


def test_slot_arrays_of_placements_equal_the_unit_by_unit_lists():
    """dse.model.traffic._slot_lists and dse.runtime.mapping.placement_arrays read the placement's lists
    in one pass (`np.fromiter`): the same starts, counts, flat slots and arrays as the per-unit loops; a unit
    without slots is still named."""
    import pytest
    from dse.errors import StudyError
    from dse.model.traffic import _slot_lists
    from dse.runtime.mapping import placement_arrays
    from dse.study.space import Design
    rng = np.random.default_rng(3)
    names = [f"u{i}" for i in range(300)]
    placement = {u: [int(s) for s in rng.integers(0, 16, int(rng.integers(0, 4)))] for u in names}
    design = Design(rows=4, cols=4, chiplets=["a"] * 16, hbm_stacks=[0] * 16, ddr_channels=1, link="l",
                    mapping="many-to-many", placement=placement)
    units = rng.permutation(300)[:200]
    start, count, flat = _slot_lists(design, names, units)
    want_start, want_count, want = np.zeros(300, np.int64), np.zeros(300, np.int64), []
    for u in units.tolist():
        want_start[u], want_count[u] = len(want), len(placement[names[u]])
        want.extend(placement[names[u]])
    assert np.array_equal(start, want_start) and np.array_equal(count, want_count)
    assert flat.dtype == np.int64 and flat.tolist() == want
    p = placement_arrays(placement, names, width=2)
    assert p.ncopy.tolist() == [len(placement[u]) for u in names]
    assert all(p.slots[i, : p.ncopy[i]].tolist() == placement[u] and (p.slots[i, p.ncopy[i]:] == -1).all()
               for i, u in enumerate(names))
    del placement[names[int(units[7])]], placement[names[int(units[9])]]
    with pytest.raises(StudyError, match=f"unit '{names[int(units[7])]}'"):
        _slot_lists(design, names, units)
