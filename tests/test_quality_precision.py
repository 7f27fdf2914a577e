"""Precision as a decision (issue 51, "In studies"): ``search.precision`` gives units precisions of their
own, each assignment a variant whose tables take each unit's rows from the study at its precision; the
``quality`` objective (higher is better) trades against latency and energy on the front."""
import numpy as np
import pytest
import yaml

import dse
import workloads
from dse import quality
from dse.errors import StudyError
from dse.model.objectives import objective_matrix
from dse.model.study_quality import active_shares, study_quality
from dse.model.tables import UNIT_KINDS, build_tables
from dse.study.space import Design


def _tiny(**search) -> dse.Study:
    data = yaml.safe_load(open("tests/data/tiny.yaml"))
    data["search"].update(search)
    return dse.Study.from_dict(data)


@pytest.fixture(scope="module")
def ffn_study():
    return _tiny(objectives=["latency", "energy", "quality"], precision={"ffn": ["bf16", "int4"]})


@pytest.fixture(scope="module")
def ffn_prepared(ffn_study):
    return dse.prepare(ffn_study)


def _design(units):
    return Design(rows=2, cols=2, chiplets=["big"] * 4, hbm_stacks=[1] * 4, ddr_channels=1, link="ucie-advanced",
                  mapping="many-to-many", placement={u: [i % 4] for i, u in enumerate(units)})


def test_int4_ffn_takes_the_int4_studys_rows_and_moves_memory_latency_quality(ffn_study, ffn_prepared):
    """The int4 variant's FFN rows are those of the whole study at int4, the rest those at bf16: a quarter
    of the FFN's weight bytes, the same attention; the design reads fewer bytes, so decode is faster; its
    quality is 1 - (the FFN's share of active parameters) x (the int4 loss at GPT-2's size)."""
    labels = [label for label, _ in ffn_study.variants()]
    assert labels == ["mesh ucie-advanced hbm3 ddr5 ffn=bf16", "mesh ucie-advanced hbm3 ddr5 ffn=int4"]
    bf16, int4 = ffn_prepared.variants
    base = dse.load_study("tests/data/tiny.yaml")
    all4 = build_tables(dse.changed_study(base, {"workload.precision": "int4"}))
    all16 = build_tables(base)
    ffn = np.array(int4.tables.unit_precision) == "int4"
    assert ffn.any() and not ffn.all()
    np.testing.assert_array_equal(ffn, int4.tables.unit_kind == UNIT_KINDS.index("ffn"))
    for name in ("unit_capacity_bytes", "unit_weight_read", "unit_time_s", "unit_energy_j"):
        mixed = getattr(int4.tables, name)
        np.testing.assert_array_equal(mixed[ffn], getattr(all4, name)[ffn])
        np.testing.assert_array_equal(mixed[~ffn], getattr(all16, name)[~ffn])
    cap4, cap16 = int4.tables.unit_capacity_bytes, bf16.tables.unit_capacity_bytes
    np.testing.assert_allclose(cap4[ffn], cap16[ffn] / 4, rtol=0.02)        # 4-bit weights: a quarter the bytes
    design = _design(int4.tables.unit_names)
    rows = ffn_prepared.evaluator.evaluate_designs([Design(**{**design.__dict__, "precision": p})
                                                    for p in ("ffn=bf16", "ffn=int4")])
    assert rows["latency_s"][1] < rows["latency_s"][0]          # decode reads the weights: fewer bytes, faster
    assert rows["energy_j_per_token"][1] < rows["energy_j_per_token"][0]
    share = float(active_shares(bf16.tables)[ffn].sum())
    loss = quality.weight_law().loss_pct("int4", quality.model_params(workloads.load_model("gpt2"))) / 100
    assert 0.3 < share < 1.0
    assert rows["quality_frac"][0] == 1.0
    assert rows["quality_frac"][1] == pytest.approx(1.0 - share * loss)
    assert study_quality(ffn_study, int4.tables).quality_frac == pytest.approx(1.0 - share * loss)


def test_quality_objective_is_negated_for_pymoo_and_reported_as_is(ffn_prepared):
    X = ffn_prepared.space.seeds[:2]
    metrics = ffn_prepared.evaluator(X)
    F = objective_matrix(metrics, ["latency", "quality"])
    np.testing.assert_array_equal(F[:, 1], -metrics["quality_frac"].to_numpy())
    assert (metrics["quality_frac"] <= 1.0).all()


def test_search_returns_a_front_that_trades_quality_for_latency(ffn_study, tmp_path):
    study = dse.changed_study(ffn_study, {"search.population": 12, "search.generations": 3})
    result = dse.run_study(study)
    front = result.pareto
    assert {"quality_frac", "precision"} <= set(front.columns)
    assert set(front["precision"]) == {"ffn=bf16", "ffn=int4"}      # both ends of the trade are on the front
    full = front[front["precision"] == "ffn=bf16"]
    cut = front[front["precision"] == "ffn=int4"]
    assert (cut["quality_frac"] < full["quality_frac"].min()).all()
    for _, row in cut.iterrows():        # each int4 design buys latency or energy with the quality it gives up
        faster, frugal = row["latency_s"] < full["latency_s"], row["energy_j_per_token"] < full["energy_j_per_token"]
        assert (faster | frugal).all()
    dse.write_results(result, tmp_path / "out")
    assert (tmp_path / "out" / "plots" / "front_latency_quality.png").exists()
    assert (tmp_path / "out" / "plots" / "front_energy_quality.png").exists()


def test_design_file_names_its_precisions_and_evaluates_as_written(ffn_prepared, tmp_path):
    from dse.results.design_file import read_design
    from dse.results.design_yaml import design_text
    design = Design(**{**_design(ffn_prepared.tables.unit_names).__dict__, "precision": "ffn=int4",
                       "hbm_stacks": [1, 1, 0, 0]})
    path = tmp_path / "d.yaml"
    path.write_text(design_text(design))
    back = read_design(path)
    assert back.precision == "ffn=int4"
    ffn_prepared.check_design(back)
    row = ffn_prepared.evaluator.evaluate_designs([back]).iloc[0]
    assert row["quality_frac"] < 1.0       # the int4 variant's, as the file names it
    with pytest.raises(StudyError, match="precision"):
        ffn_prepared.check_design(Design(**{**back.__dict__, "precision": "ffn=int8"}))


def test_mixed_weight_term_adds_each_parts_loss():
    params = 7e9
    kept, low, high = quality.mixed_weight_term({"int4": 0.25, "int8": 0.25, "bf16": 0.5}, params)
    law = quality.weight_law()
    assert kept == pytest.approx(1 - (0.25 * law.loss_pct("int4", params) + 0.25 * law.loss_pct("int8", params)) / 100)
    assert low < kept < high
    assert quality.mixed_weight_term({"int4": 1.0}, params) == pytest.approx(quality.weight_term("int4", params))


@pytest.mark.parametrize("precision, key, words", [
    ({"ffn": ["bf16", "int3"]}, "search.precision.ffn", "unknown precision 'int3'"),
    (["fp16"], "search.precision", "allowed: bf16, fp8, int8, int4"),
    ({"ffn": []}, "search.precision.ffn", "at least one"),
])
def test_bad_precision_names_the_key(precision, key, words):
    with pytest.raises(StudyError) as info:
        _tiny(precision=precision)
    assert info.value.key == key and words in str(info.value)


def test_unknown_role_names_the_key():
    with pytest.raises(StudyError) as info:
        dse.prepare(_tiny(precision={"experts_hot": ["int4"]}))
    assert info.value.key == "search.precision.experts_hot" and "hot_experts" in str(info.value)


def test_cli_bad_precision_is_one_line_exit_2(dse_cli, tmp_path):
    data = yaml.safe_load(open("tests/data/tiny.yaml"))
    data["search"]["precision"] = {"attention": ["int3"]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = dse_cli("validate", str(path))
    assert code == 2 and "search.precision.attention" in err and len(err.strip().splitlines()) == 1


def test_hot_and_cold_experts_split_each_layer_by_selection():
    from dse.model.unit_precision import expert_heat
    study = dse.Study.from_dict({
        "name": "heat", "workload": {"model": "mixtral-8x7b", "phase": "decode", "batch": 4, "context": 256,
                                     "routing": {"distribution": "zipf", "s": 1.0}},
        "hardware": {"chiplets": [{"name": "c", "kind": "systolic", "array": [64, 64], "dataflow": "ws",
                                   "sram_mb": 8, "freq_ghz": 1.0, "node": "7nm"}],
                     "memory": [{"kind": "hbm3", "stacks": [1, 4]}],
                     "package": {"mesh": {"rows": 2, "cols": 2}}},
        "search": {"objectives": ["latency", "quality"], "population": 4, "generations": 1}})
    t = build_tables(study)
    heat = expert_heat(t)
    q = {u: t.unit_selection[u] for u in heat}
    hot = [q[u] for u, h in heat.items() if h == "hot_experts"]
    cold = [q[u] for u, h in heat.items() if h == "cold_experts"]
    assert len(hot) == len(cold) == 4 and min(hot) >= max(cold)


def test_quality_refused_where_it_is_not_modelled():
    data = yaml.safe_load(open("tests/data/tiny.yaml"))
    data["workload"] = {"ensemble": {"morphology": "chain", "nodes": [{"name": "p1", "model": "gpt2"},
                                                                       {"name": "p2", "model": "gpt2"}]},
                        "phase": "decode", "batch": 1, "context": 64}
    data["search"]["objectives"] = ["latency", "quality"]
    with pytest.raises(StudyError, match="one model") as info:
        dse.Study.from_dict(data)
    assert info.value.key == "search.objectives"
    data["search"]["precision"] = ["int4"]
    with pytest.raises(StudyError, match="one model") as info:
        dse.Study.from_dict(data)
    assert info.value.key == "search.precision"


def test_characterize_has_a_row_per_unit_and_precision(ffn_prepared):
    """The attribute table of a study with search.precision: every unit at each precision it may take,
    the FFN at bf16 and int4 (a quarter of the weight bytes, the int4 loss), the rest at bf16 only."""
    from dse.model.characterize import characterize
    table = characterize(ffn_prepared)
    kinds = len(ffn_prepared.tables.kind_names)
    ffn = table[table["unit_kind"] == "ffn"]
    assert set(ffn["precision"]) == {"bf16", "int4"}
    assert set(table[table["unit_kind"] != "ffn"]["precision"]) == {"bf16"}
    assert len(table) == kinds * (len(ffn_prepared.tables.unit_names) + ffn["unit"].nunique())
    at = {p: part.drop_duplicates("unit").set_index("unit") for p, part in ffn.groupby("precision")}
    assert (at["int4"]["weight_bytes"] < at["bf16"]["weight_bytes"] / 3.5).all()
    assert (at["int4"]["quality_frac"] < 1.0).all() and (at["bf16"]["quality_frac"] == 1.0).all()
