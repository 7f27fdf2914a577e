"""Embodied and operational carbon (arch.carbon, dse.model.carbon) against ACT's model by hand."""
import numpy as np
import pytest

import arch
import dse
from arch.area_cost import negative_binomial_yield
from dse.study.space import Design


def test_carbon_per_area_is_acts():
    # ACT (Gupta et al. ISCA 2022; facebookresearch/ACT logic/*.json): CPA = CI_fab x EPA + GPA + MPA;
    # 7 nm in Taiwan: 583 g/kWh x 2.15 kWh/cm2 + 350 + 500 = 2103.45 g/cm2; 5 nm: 583 x 2.75 + 430 + 500
    assert arch.carbon.carbon_per_cm2_g("7nm") == pytest.approx(2103.45)
    assert arch.carbon.carbon_per_cm2_g("5nm") == pytest.approx(2533.25)
    # a fab on a cleaner grid: only the energy term changes
    assert arch.carbon.carbon_per_cm2_g("7nm", 82) == pytest.approx(82 * 2.15 + 850)
    # a 1 cm2 die at 87.5 % yield (ACT's default fab yield): 2103.45 / 0.875 = 2403.9 g
    assert arch.carbon.die_carbon_g(100.0, "7nm", 0.875) == pytest.approx(2403.94, rel=1e-5)


def test_a_designs_carbon_by_hand():
    prepared = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    t = prepared.tables
    units = t.unit_names
    design = Design(rows=1, cols=2, chiplets=["big", "small"], hbm_stacks=[1, 1], ddr_channels=1,
                    link="ucie-advanced", mapping="many-to-many", placement={u: [i % 2] for i, u in enumerate(units)})
    m = prepared.evaluator.evaluate_designs([design], with_faults=False).iloc[0]
    alpha = arch.technology.yield_alpha_logic()
    expected = 0.0
    for k in (0, 1):
        die = t.kind_area_mm2[k] + t.hbm.phy_area_mm2
        good = negative_binomial_yield(die, t.kind_defect_density_per_cm2[k], alpha)
        expected += arch.carbon.die_carbon_g(die, t.kind_nodes[k], good)
    gb = (2 * t.hbm.capacity_bytes + t.ddr.capacity_bytes) / 1e9
    expected += gb * 65 + (2 + 2) * 150
    assert m["embodied_carbon_kg"] * 1e3 == pytest.approx(expected)
    c = prepared.study.carbon
    tokens = m["throughput_tok_s"] * c.lifetime_years * 365.25 * 86400 * c.utilisation
    per_token = m["energy_j_per_token"] / 3.6e6 * c.grid_intensity_g_per_kwh + expected / tokens
    assert m["carbon_g_per_token"] == pytest.approx(per_token)


def test_carbon_is_an_objective(tiny_dict, tmp_path, dse_cli):
    tiny_dict["search"]["objectives"] = ["latency", "carbon"]
    tiny_dict["carbon"] = {"grid_intensity_g_per_kwh": 28, "lifetime_years": 3}    # Iceland's grid (ACT)
    result = dse.Study.from_dict(tiny_dict).run()
    assert "carbon_g_per_token" in result.pareto.columns
    assert np.isfinite(result.pareto["carbon_g_per_token"]).all() and (result.pareto["carbon_g_per_token"] > 0).all()
    dse.write_results(result, tmp_path / "out")                   # plots and report label the objective
    assert (tmp_path / "out" / "plots" / "front_latency_carbon.png").exists()
    with pytest.raises(dse.StudyError, match="carbon"):
        dse.Study.from_dict({**tiny_dict, "carbon": {"lifetime_years": -1}})
