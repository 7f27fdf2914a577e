"""Issue 52, ninth round: a report's per-design breakdowns on arrays, with the same content. The units each
chiplet holds (dse.model.breakdown.held_units) equal the unit-by-unit loop; the chiplet-to-chiplet traffic
(dse.model.traffic.chiplet_traffic) read without the flows' table has the bits of the sum over that table;
the kinds a chiplet holds are counted once per design (dse.results.breakdowns.Breakdowns.kind_counts) as a
`Counter` of the workload graph's kinds counts them; and `Breakdowns` keeps a design's figures by its
value (an equal copy gets them without computing them again)."""
from __future__ import annotations

import copy
from collections import Counter

import numpy as np
import pytest

import dse
import dse.results.breakdowns as breakdowns_module
from dse.model.breakdown import _held_lists, chiplet_table, held_units
from dse.model.traffic import chiplet_traffic, unit_flows
from dse.results.breakdowns import Breakdowns
from dse.study.space import Design

STUDY = "studies/moe_heterogeneous_accelerators.yaml"


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study(STUDY))


def _design(prepared, seed: int, mapping: str = "many-to-many", rows: int = 2, cols: int = 3) -> Design:
    """``rows`` x ``cols`` of the study's kinds, every unit on one to three random slots (repeats included),
    a few units on none."""
    rng = np.random.default_rng(seed)
    n = rows * cols
    kinds = ["h100-like", "groq-lpu-like", "tpu-v6e-like"]
    placement = {u: rng.integers(0, n, size=int(rng.integers(0 if i % 17 == 5 else 1, 4))).tolist()
                 for i, u in enumerate(prepared.tables.unit_names)}
    if mapping == "one-to-many":            # shards: every unit placed, distinct slots
        placement = {u: list(dict.fromkeys(s)) or [0] for u, s in placement.items()}
    return Design(rows=rows, cols=cols, chiplets=[kinds[i % 3] for i in range(n)],
                  hbm_stacks=[4 if i % 3 != 1 else 0 for i in range(n)], ddr_channels=2, link="ucie-advanced",
                  mapping=mapping, placement=placement)


def _traffic_from_flows(design, tables) -> np.ndarray:
    """chiplet_traffic as it was: the flows' table built, its off-chip rows summed with np.add.at."""
    n = design.rows * design.cols
    traffic = np.zeros((n, n))
    flows = unit_flows(design, tables)
    off_chip = flows[flows["src_slot"] != flows["dst_slot"]]
    np.add.at(traffic, (off_chip["src_slot"].to_numpy(int), off_chip["dst_slot"].to_numpy(int)),
              off_chip["bytes_per_step"].to_numpy(float))
    return traffic


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_held_units_equal_the_unit_by_unit_loop(prepared, seed):
    design = _design(prepared, seed)
    names = list(prepared.tables.unit_names)
    n = design.rows * design.cols
    units, bounds = held_units(design, names, n)
    assert [[names[u] for u in units[a:b]] for a, b in zip(bounds[:-1], bounds[1:])] == \
        _held_lists(design, names, n)
    bad = copy.deepcopy(design)                 # a slot past the package: the loop's own error
    bad.placement[names[3]] = [n]
    with pytest.raises(IndexError):
        held_units(bad, names, n)


@pytest.mark.parametrize("mapping", ["many-to-many", "one-to-many"])
def test_traffic_on_arrays_has_the_bits_of_the_flows_table(prepared, mapping):
    for seed in range(3):
        design = _design(prepared, seed, mapping)
        got, expected = chiplet_traffic(design, prepared.tables), _traffic_from_flows(design, prepared.tables)
        assert got.tobytes() == expected.tobytes()


def test_kind_counts_equal_a_counter_of_the_graphs_kinds(prepared):
    graph = prepared.tables.workload.graph
    for seed in range(3):
        design = _design(prepared, seed)
        table = chiplet_table(design, prepared, 1e-3)
        counts = Breakdowns(prepared).kind_counts(design)
        assert counts == [list(Counter(graph.nodes[u]["kind"] for u in units.split()).items())
                          for units in table["units"]]


def test_an_equal_design_gets_the_kept_breakdowns(prepared, monkeypatch):
    calls = []

    def counted(*args):
        calls.append(args[0])
        return chiplet_table(*args)
    monkeypatch.setattr(breakdowns_module, "chiplet_table", counted)
    kept = Breakdowns(prepared)
    design = _design(prepared, 4)
    first = kept.chiplets(design, 1e-3)
    same = kept.chiplets(copy.deepcopy(design), 2e-3)
    assert len(calls) == 1 and same["units"].tolist() == first["units"].tolist()
    assert kept.traffic(copy.deepcopy(design)) is kept.traffic(design)
    kept.chiplets(_design(prepared, 5), 1e-3)
    assert len(calls) == 2


def test_first_met_is_the_order_dict_fromkeys_gives(prepared):
    """The roofline's kinds and unit kinds (dse.results.plots.first_met) in the attribute table's first-met order."""
    from dse.results.plots import first_met
    table = Breakdowns(prepared).attributes(prepared)
    for name in ("chiplet", "unit_kind", "unit"):
        assert first_met(table[name]) == list(dict.fromkeys(table[name]))
        assert first_met(table[name][::-1]) == list(dict.fromkeys(table[name][::-1]))
