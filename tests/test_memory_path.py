"""A chiplet holding units needs a memory path (its HBM, or the package's DDR): without one the design is
infeasible with a named reason (issue 34, item 1), and `dse evaluate` gives that verdict as `dse run`
judges it (item 8)."""
import json

import numpy as np
import pytest
import yaml

import dse
from dse.model.objectives import constraint_matrix, constraint_names

#: issue 34's hand design: slot 3 has no HBM stack and the study no DDR; it holds attention and the LM head
HAND = {"rows": 2, "cols": 2, "chiplets": ["a100-like", "sa-big", "a100-like", "sa-big"],
        "hbm_stacks": [1, 1, 1, 0], "ddr_channels": 0, "link": "ucie-advanced", "mapping": "many-to-many",
        "placement": {"embed": [1], "L0-31.attn": [3, 1], "L0-31.ffn": [2, 0], "lm_head": [3]},
        "system": {"pipeline": 1, "experts": 1, "replicas": 64}}


def _write(tmp_path, data, name="design.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def training():
    return dse.prepare(dse.load_study("studies/train_llama2_7b.yaml"))


def _violation(prepared, design: dict, name: str) -> float:
    metrics = prepared.evaluator.evaluate_designs([dse.Design(**design)])
    return float(constraint_matrix(metrics, prepared.study)[0, constraint_names(prepared.study).index(name)])


def test_training_design_with_a_memoryless_chiplet_is_infeasible(training):
    """The search's constraint (what `dse run` marks feasible): the copies of attention and the LM head on
    slot 3 have no memory; with a stack there the same design has a path for every copy."""
    assert _violation(training, HAND, "units_without_memory") == 2
    assert training.for_design(dse.Design(**HAND)).evaluator.memory_path_report(dse.Design(**HAND)) == {3: 2}
    assert _violation(training, dict(HAND, hbm_stacks=[1, 1, 1, 1]), "units_without_memory") == 0
    # the forward pass's shortfall is kept: slot 3's 4.2 GiB have nowhere to go
    assert _violation(training, HAND, "capacity_short_gib") > 4.0


def test_evaluate_gives_the_verdict_and_names_the_memory_path(dse_cli, tmp_path):
    code, out, err = dse_cli("evaluate", "studies/train_llama2_7b.yaml", "--design", _write(tmp_path, HAND), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["feasible"] is False
    assert any("without a memory path" in r and "slot 3" in r for r in result["reasons"]), result["reasons"]
    assert any(r.startswith("capacity short by") for r in result["reasons"])
    assert result["metrics"]["units_without_memory"] == 2
    code, out, err = dse_cli("evaluate", "studies/train_llama2_7b.yaml", "--design", _write(tmp_path, HAND))
    assert code == 0, err
    assert "feasible: no" in out and "without a memory path" in out


def test_ddr_is_a_memory_path(tmp_path, dse_cli):
    """A chiplet without HBM streams from the package's DDR: a valid path (slow, not impossible); without
    DDR the same placement has none."""
    prepared = dse.prepare(dse.load_study("studies/quickstart.yaml"))
    units = prepared.tables.unit_names
    design = {"rows": 2, "cols": 2, "chiplets": [prepared.tables.kind_names[0]] * 4, "hbm_stacks": [2, 2, 2, 0],
              "ddr_channels": 2, "link": prepared.study.hardware.package.link, "mapping": "many-to-many",
              "placement": {u: [i % 4] for i, u in enumerate(units)}}
    assert _violation(prepared, design, "units_without_memory") == 0
    no_ddr = dict(design, ddr_channels=0)
    on_slot_3 = sum(1 for i in range(len(units)) if i % 4 == 3)
    assert _violation(prepared, no_ddr, "units_without_memory") == on_slot_3 > 0
    code, out, err = dse_cli("evaluate", "studies/quickstart.yaml", "--design", _write(tmp_path, no_ddr), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["feasible"] is False
    assert any(f"{on_slot_3} on slot 3" in r for r in result["reasons"]), result["reasons"]


def test_serving_design_with_a_memoryless_chiplet_is_infeasible():
    """The serving evaluator keeps the package's constraint column (dse.serving reuses the system's)."""
    prepared = dse.prepare(dse.load_study("studies/serve_llama2_7b.yaml"))
    units = prepared.tables.unit_names
    kind = prepared.tables.kind_names[0]
    design = {"rows": 1, "cols": 2, "chiplets": [kind, kind], "hbm_stacks": [2, 0], "ddr_channels": 0,
              "link": prepared.study.hardware.package.link, "mapping": "many-to-many",
              "placement": {u: [i % 2] for i, u in enumerate(units)}}
    assert _violation(prepared, design, "units_without_memory") > 0
    assert _violation(prepared, dict(design, hbm_stacks=[1, 1]), "units_without_memory") == 0


def test_a_feasible_design_has_no_reasons(dse_cli, tmp_path):
    """A design meeting every constraint: feasible true, no reasons, in the table and the JSON."""
    design = {"rows": 1, "cols": 2, "chiplets": ["big", "small"], "hbm_stacks": [1, 1], "ddr_channels": 1,
              "link": "ucie-advanced", "mapping": "many-to-many"}
    prepared = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    design["placement"] = {u: [i % 2] for i, u in enumerate(prepared.tables.unit_names)}
    G = constraint_matrix(prepared.evaluator.evaluate_designs([dse.Design(**design)]), prepared.study)
    assert (G <= 0).all()
    code, out, err = dse_cli("evaluate", "tests/data/tiny.yaml", "--design", _write(tmp_path, design), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["feasible"] is True and result["reasons"] == []
    code, out, err = dse_cli("evaluate", "tests/data/tiny.yaml", "--design", _write(tmp_path, design))
    assert "feasible: yes" in out


def test_units_without_memory_needs_bytes():
    """A unit that neither stores nor moves DRAM bytes needs no memory (dse.model.memory_path)."""
    from dse.model.memory_path import copies_without_memory
    kind = np.zeros((1, 2), np.int64)
    stacks = np.array([[1, 0]])
    slots = np.array([[[1, -1], [1, -1], [0, 1]]])
    ncopy = np.array([[1, 1, 2]])
    needs = np.array([[True], [False], [True]])
    out = copies_without_memory(kind, stacks, np.array([0]), True, slots, ncopy, needs)
    np.testing.assert_array_equal(out, [[0, 2]])            # unit 0 and unit 2's second copy on slot 1
    out = copies_without_memory(kind, stacks, np.array([1]), True, slots, ncopy, needs)
    np.testing.assert_array_equal(out, [[0, 0]])            # the package's DDR is a path
    out = copies_without_memory(kind, stacks, np.array([1]), False, slots, ncopy, needs)
    np.testing.assert_array_equal(out, [[0, 2]])            # DDR channels of a study without DDR are none


def old_copies_without_memory(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident=None):
    """The count on [P, U, copies] arrays, as it was."""
    P, S = kind.shape
    copies = np.arange(slots.shape[2])[None, None, :] < ncopy[:, :, None]
    slot = np.where(copies, slots, 0)
    p = np.arange(P)[:, None, None]
    no_path = stacks[p, slot] <= 0
    if resident is not None:
        no_path &= ~np.asarray(resident)[kind[p, slot]]
    need = needs[np.arange(needs.shape[0])[None, :, None], kind[p, slot]]
    bad = copies & no_path & need & ~((np.asarray(ddr) > 0) & has_ddr)[:, None, None]
    out = np.zeros((P, S), np.int64)
    np.add.at(out, (np.broadcast_to(p, slot.shape)[bad], slot[bad]), 1)
    return out


@pytest.mark.parametrize("has_ddr", [False, True])
def test_memory_path_count_in_one_pass_is_the_array_count(has_ddr):
    from dse.model.memory_path import copies_without_memory, count_without_memory  # noqa: F401  (one pass)
    rng = np.random.default_rng(2)
    P, S, U, C, K = 30, 6, 9, 3, 3
    kind = rng.integers(0, K, (P, S))
    stacks = rng.integers(0, 2, (P, S))
    ddr = rng.integers(0, 2, P)
    ncopy = rng.integers(1, C + 1, (P, U))
    slots = np.where(np.arange(C)[None, None, :] < ncopy[:, :, None], rng.integers(0, S, (P, U, C)), -1)
    needs = rng.random((U, K)) < 0.7
    for resident in (None, np.array([False, True, False])):
        assert np.array_equal(copies_without_memory(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident),
                              old_copies_without_memory(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident))
