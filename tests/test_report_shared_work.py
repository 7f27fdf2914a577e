"""Issue 52: the report's work done once and on arrays, with the same content. The experts' section reads its
rows by position (the same lines as a lookup per expert in a (unit, kind)-indexed table), the units'
attribute table is computed once for the roofline and that section (dse.results.breakdowns), and ``dse run``
keeps the objects alive after its imports and preparation out of the garbage collector's full passes while
it runs, and gives them back after."""
from __future__ import annotations

import gc
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import dse
import dse.cli.run_cmd as run_cmd
import dse.results.breakdowns as breakdowns_module
from dse.model.characterize import characterize
from dse.model.tables import UNIT_KINDS
from dse.results.breakdowns import Breakdowns
from dse.results.expert_kinds import _held_per_weight_byte, _slot_bandwidth, expert_kind_lines, section_lines
from dse.study.space import Design

STUDY = "studies/moe_heterogeneous_accelerators.yaml"


def _lookup_per_expert(result, prepared, design_id: str, why: str) -> list[str]:
    """The section's rows gathered as they were before (a `.loc` per expert in a (unit, kind)-indexed table),
    written by the same `section_lines`."""
    design = result.designs[design_id]
    p = prepared.for_design(design)
    kinds = [c.name for c in p.study.hardware.library()]
    units = list(p.tables.unit_names)
    expert = UNIT_KINDS.index("expert")
    experts = [u for u, k in zip(units, p.tables.unit_kind) if k == expert]
    table = characterize(p).set_index(["unit", "chiplet"])
    held, held_note = _held_per_weight_byte(p.study)
    rows = []
    for unit in experts:
        on = list(dict.fromkeys(design.chiplets[i] for i in design.placement.get(unit, [])))
        if not on:
            continue
        here = table.loc[(unit, on[0])]
        rows.append({"expert": unit, "on": ", ".join(on), "visit": float(here["visit_prob"]),
                     "MB": float(here["weight_bytes"] * held + here["kv_bytes"]) / 1e6,
                     "FLOP/B": float(here["flops"] / here["dram_bytes"]) if here["dram_bytes"] > 0 else np.inf,
                     "bound": here["bound"], "fastest alone": here["best_by_latency"]})
    ex = table.loc[[(u, k) for u in experts for k in kinds]]
    bandwidth = _slot_bandwidth(p, design)
    figures = []
    for k in kinds:
        of_k = ex.xs(k, level="chiplet")
        figures.append((k, float(of_k["peak_flops"].iloc[0]), bandwidth.get(k, float(of_k["bandwidth_Bps"].median()))))
    return section_lines(design_id, why, held_note, pd.DataFrame(rows), figures)


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study(STUDY))


def _random_design(prepared, seed: int) -> Design:
    """2 x 2 of the study's kinds, every unit on one or two random slots (copies on two kinds too)."""
    rng = np.random.default_rng(seed)
    units = list(prepared.tables.unit_names)
    placement = {u: sorted(set(rng.integers(0, 4, size=int(rng.integers(1, 3))).tolist())) for u in units}
    return Design(rows=2, cols=2, chiplets=["h100-like", "groq-lpu-like", "tpu-v6e-like", "groq-lpu-like"],
                  hbm_stacks=[4, 0, 4, 0], ddr_channels=2, link="ucie-advanced", mapping="many-to-many",
                  placement=placement)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_experts_section_reads_its_rows_on_arrays_with_the_same_lines(prepared, seed):
    result = SimpleNamespace(designs={"d0": _random_design(prepared, seed)})
    expected = _lookup_per_expert(result, prepared, "d0", "hand-made")
    assert expert_kind_lines(result, prepared, "d0", "hand-made") == expected
    assert expert_kind_lines(result, prepared, "d0", "hand-made", breakdowns=Breakdowns(prepared)) == expected


def test_the_attribute_table_is_computed_once_for_the_report(prepared, monkeypatch):
    calls = []

    def counted(p):
        calls.append(p)
        return characterize(p)
    monkeypatch.setattr(breakdowns_module, "characterize", counted)
    shared = Breakdowns(prepared)
    result = SimpleNamespace(designs={"d0": _random_design(prepared, 0)})
    table = shared.attributes(prepared)                          # the roofline's
    assert expert_kind_lines(result, prepared, "d0", "hand-made", breakdowns=shared)
    assert shared.attributes(prepared) is table and len(calls) == 1


def test_dse_run_keeps_its_long_lived_objects_out_of_full_collections_and_gives_them_back(tmp_path, monkeypatch,
                                                                                          tiny_path, dse_cli):
    before = gc.get_freeze_count()
    seen = []
    inner = run_cmd.write_results

    def write(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        return inner(*args, **kwargs)
    monkeypatch.setattr(run_cmd, "write_results", write)
    code, _, err = dse_cli("run", tiny_path, "--out", tmp_path / "r", "--quiet")
    assert code == 0, err
    assert seen and seen[0] > before          # the prepared study's objects among them
    assert gc.get_freeze_count() == before


def test_the_reference_points_sample_gets_the_failure_pass_for_its_feasible_designs_only(tiny_dict):
    """A plain study with a fault objective: the sample's infeasible designs (told apart by the intact pass)
    skip the failure pass, and the reference point is the one of the whole sample evaluated with it."""
    from dse.model.objectives import constraint_matrix, non_dominated
    from dse.model.contract import FaultsWithin
    from dse.search import hypervolume as hv
    tiny_dict["search"]["objectives"] = ["latency", "energy", "area", "fault_tolerance"]
    tiny_dict["constraints"] = {"area_mm2": 60.0}
    study = dse.Study.from_dict(tiny_dict)
    evaluator = dse.prepare(study).evaluator
    space = evaluator.space
    X = np.random.default_rng(hv.ANCHOR_SEED).integers(space.lower, np.asarray(space.upper) + 1,
                                                       size=(hv.ANCHOR_SIZE, space.n_var))
    whole = evaluator(X, with_faults=True)
    feasible = (constraint_matrix(whole, study) <= 0).all(axis=1)
    assert 0 < feasible.sum() < len(X)
    pool = hv.costs(whole, study.search.objectives)[feasible]
    pool = pool[np.isfinite(pool).all(axis=1)]
    worst_front, worst = pool[non_dominated(pool)].max(axis=0), pool.max(axis=0)
    want = {}
    for j, o in enumerate(study.search.objectives):
        cost = hv.MARGIN * (worst_front[j] if worst_front[j] > 0 else worst[j])
        want[o] = float(hv.from_cost(o, cost if cost > 0 else 1.0))
    rows = []

    class Counting:
        space = evaluator.space

        def __call__(self, X, with_faults=True):
            rows.append((len(X), with_faults))
            return evaluator(X, with_faults=with_faults)
    assert hv.reference_point(study, Counting()) == want
    # one call: the intact pass for all, the failure pass skipped where the intact metrics already break a
    # constraint (dse.model.contract.FaultsWithin); the feasible designs' rows are those of the whole pass
    assert len(rows) == 1 and rows[0][0] == len(X) and isinstance(rows[0][1], FaultsWithin)
    assert np.isfinite(rows[0][1].limits).any()


def test_first_rows_of_pairs_coded_on_arrays_equal_a_dict_of_first_rows():
    """`_FirstRows` (the experts' section's (unit, chiplet) -> first row, coded on arrays) gives the row a
    dict filled row by row with ``setdefault`` gave (the section's reading before, issue 52 eighth round),
    for Arrow and object string columns, and a KeyError for a pair the table lacks."""
    from dse.results.expert_kinds import _FirstRows
    rng = np.random.default_rng(5)
    units = [f"L{i // 9}.e{i % 9}" for i in rng.integers(0, 60, 400)]
    kinds = [["a", "b", "c"][i] for i in rng.integers(0, 3, 400)]
    for dtype in (object, "string[pyarrow]"):
        table = pd.DataFrame({"unit": pd.array(units, dtype=dtype), "chiplet": pd.array(kinds, dtype=dtype)})
        want = {}
        for i, key in enumerate(zip(table["unit"], table["chiplet"])):
            want.setdefault(key, i)
        at = _FirstRows(table)
        assert at(list(want)) == list(want.values())
        with pytest.raises(KeyError):
            at([(units[0], "d")])
        with pytest.raises(KeyError):
            at([("nope", "a")])
