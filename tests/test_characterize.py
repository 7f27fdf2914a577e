"""The expert execution attribute table (dse characterize, issue 20) against the evaluator's own model."""
import numpy as np
import pandas as pd
import pytest

import dse
from dse.model.breakdown import chiplet_busy_s
from dse.model.characterize import characterize
from dse.study.space import Design


@pytest.mark.parametrize("kind", ["big", "small"])
def test_rows_equal_the_step_model_of_each_unit_alone(kind):
    # tiny study: 4 units; a design with each unit alone on its own chiplet of one kind, one HBM stack each:
    # each chiplet's busy time in the evaluator equals the unit's row
    prepared = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    table = characterize(prepared)
    units = prepared.tables.unit_names
    design = Design(rows=2, cols=2, chiplets=[kind] * 4, hbm_stacks=[1] * 4, ddr_channels=1, link="ucie-advanced",
                    mapping="many-to-many", placement={u: [i] for i, u in enumerate(units)})
    _, busy = chiplet_busy_s(design, prepared)
    rows = table[table["chiplet"] == kind].set_index("unit")
    for i, u in enumerate(units):
        assert rows.loc[u, "hbm_stacks"] == 1
        assert rows.loc[u, "time_s"] * rows.loc[u, "visit_prob"] == pytest.approx(busy[i], rel=1e-9)


def test_roofline_points_lie_under_both_ceilings():
    table = dse.load_study("studies/quickstart.yaml").characterize()
    rows = table[(table["flops"] > 0) & (table["dram_bytes"] > 0)]
    attained = rows["flops"] / rows["time_s"]
    intensity = rows["flops"] / rows["dram_bytes"]
    assert (attained <= rows["peak_flops"] * (1 + 1e-9)).all()
    assert (attained <= rows["bandwidth_Bps"] * intensity * (1 + 1e-9)).all()
    assert set(rows["bound"]) <= {"compute", "memory", "overhead"}
    best = table.groupby("unit").apply(lambda g: g.loc[g["time_s"].idxmin(), "chiplet"])
    assert (table["best_by_latency"] == table["unit"].map(best)).all()


def test_an_ensemble_table_holds_both_members():
    # a chain: a dense GPT-2 hands its hidden states (via a projection) to an OLMoE expert model
    study = dse.Study.from_dict({
        "name": "eoe", "workload": {"ensemble": {"morphology": "chain", "nodes": [
            {"name": "p1", "model": "gpt2"}, {"name": "p2", "model": "olmoe-1b-7b"}]},
            "phase": "decode", "batch": 2, "context": 64},
        "hardware": {"chiplets": [{"name": "c", "kind": "systolic", "array": [64, 64], "dataflow": "ws",
                                   "sram_mb": 8, "freq_ghz": 1.0, "node": "7nm"}],
                     "memory": [{"kind": "hbm3", "stacks": [0, 3]}, {"kind": "ddr5", "channels": [1, 1]}],
                     "package": {"mesh": {"rows": 1, "cols": 3}}},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})
    table = study.characterize()
    assert {"p1", "p2"} <= set(table["model"])
    assert (table[table["model"] == "p2"]["unit_kind"] == "expert").any()      # OLMoE's routed experts


def test_cli_writes_the_table_and_the_plot(tmp_path, dse_cli):
    out, png = tmp_path / "attrs.csv", tmp_path / "roofline.png"
    code, _, err = dse_cli("characterize", "tests/data/tiny.yaml", "--out", str(out), "--plot", str(png),
                           "--format", "csv")
    assert code == 0, err
    assert len(pd.read_csv(out, comment="#")) == 8 and png.stat().st_size > 1000
    for args, flag in ((["--out", str(tmp_path / "a.txt")], "--out"), (["--format", "xml"], "--format"),
                       (["--out", str(tmp_path / "missing" / "a.csv")], "--out")):
        code, _, err = dse_cli("characterize", "tests/data/tiny.yaml", *args)
        assert code == 2 and flag in err and len(err.strip().splitlines()) == 1


def test_the_bound_is_the_largest_roofline_term_and_agrees_with_the_utilisations():
    # issue 34: quickstart's decode attention on sa-big was labelled compute-bound at compute utilisation
    # 0.059 against memory 0.304 (the engine's own time compared with the memory time), and the embedding,
    # 0 FLOPs, compute-bound too. The bound is now the largest of FLOPs at peak, bytes at bandwidth and
    # the rest of the time (overheads: fill and drain, launch, dispatch).
    table = dse.load_study("studies/quickstart.yaml").characterize()
    terms = table[["compute_s", "memory_s", "overhead_s"]].to_numpy()
    assert (table["bound"].to_numpy() == np.array(["compute", "memory", "overhead"])[terms.argmax(axis=1)]).all()
    assert table["compute_s"].to_numpy() == pytest.approx((table["flops"] / table["peak_flops"]).to_numpy(), rel=1e-9)
    assert table["compute_utilisation"].to_numpy() == pytest.approx((table["compute_s"] / table["time_s"]).to_numpy(),
                                                                    rel=1e-9)
    assert table["memory_utilisation"].to_numpy() == pytest.approx((table["memory_s"] / table["time_s"]).to_numpy(),
                                                                   rel=1e-9)
    assert (np.maximum(terms[:, 0], terms[:, 1]) + terms[:, 2] >= table["time_s"].to_numpy() * (1 - 1e-9)).all()
    # a compute-bound row has the highest compute utilisation of the row's terms; no FLOPs, never compute
    compute_bound = table[table["bound"] == "compute"]
    assert (compute_bound["compute_utilisation"] >= compute_bound["memory_utilisation"]).all()
    assert (table.loc[table["flops"] == 0, "bound"] != "compute").all()
    attn = table[(table["unit"] == "L0-31.attn") & (table["chiplet"] == "sa-big")].iloc[0]
    assert attn["compute_utilisation"] < attn["memory_utilisation"] and attn["bound"] != "compute"
    assert table["mean_power_w"].to_numpy() == pytest.approx((table["energy_j"] / table["time_s"]).to_numpy(), rel=1e-9)
