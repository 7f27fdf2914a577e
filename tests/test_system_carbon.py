"""Carbon (dse.system.carbon) against ACT's published example figures and the carbon objective.

ACT (Gupta et al., ISCA 2022) ships two worked examples, the Dell PowerEdge R740 server and the
Fairphone 3, whose results its own test suite pins (facebookresearch/ACT, act/tests/integration_tests.py:
"the original ACT model results"): R740 CPUs 23.143405714285716 kg, R740 DRAM 330.4285714285714 kg,
Fairphone 3 application processor 0.8992937142857143 kg, Fairphone 3 other ICs 5.691643885714286 kg.
Both examples take 28 nm logic made on coal power (820 g/kWh) with 95 % gas abatement, ACT's 0.875 yield,
DDR3 at 50 nm for DRAM and 150 g of packaging per IC (exps/dellr740/dellr740.py, exps/fairphone3).
"""
import numpy as np
import pytest

import dse
from dse.errors import StudyError
from dse.study.schema.carbon import CarbonSpec
from dse.system.carbon import (
    BYTES_PER_GB,
    CarbonFactors,
    die_g,
    dram_g_per_byte,
    grid_g_per_kwh,
    logic_g_per_cm2,
    operational_g,
    packaging_g,
)

COAL = grid_g_per_kwh("coal")
ACT_YIELD = 0.875
FAIRPHONE3_IC_MM2 = [0.85, 1.2, 1.2, 35, 0.89, 0.08, 0.25, 18, 11.6, 1.44, 12.96, 1.61, 6.3, 26.88, 0.77, 11.36,
                     7, 8.69, 11, 9.6]       # ACT exps/fairphone3: the 20 ICs besides CPU, DRAM and flash


def test_dell_r740_cpus_reproduce_act():
    # two 6.98 cm2 CPUs; ACT's example charges each CPU the packaging of cpu_nr = 2 packages
    per_cpu = die_g(698.0, "28nm", ACT_YIELD, COAL, 95) + packaging_g(2)
    assert 2 * per_cpu / 1000 == pytest.approx(23.143405714285716, rel=1e-12)


def test_dell_r740_dram_reproduces_act():
    # 12 modules of 36 GB DDR3 (50 nm), 19 packaged ICs each
    per_module = 36 * BYTES_PER_GB * dram_g_per_byte("ddr3_50nm") + packaging_g(19)
    assert 12 * per_module / 1000 == pytest.approx(330.4285714285714, rel=1e-12)


def test_fairphone3_reproduces_act():
    cpu = die_g(46.4, "28nm", ACT_YIELD, COAL, 95) + packaging_g(1)
    assert cpu / 1000 == pytest.approx(0.8992937142857143, rel=1e-12)
    ics = die_g(sum(FAIRPHONE3_IC_MM2), "28nm", ACT_YIELD, COAL, 95) + packaging_g(len(FAIRPHONE3_IC_MM2))
    assert ics / 1000 == pytest.approx(5.691643885714286, rel=1e-12)


def test_act_logic_unit_check_and_operational_carbon():
    """ACT act/tests/model_unit_tests.py: a 145 mm2 10 nm die at 0.943543 yield in Taiwan (583 g/kWh) with
    95 % abatement is (1.475 x 583 + 240 + 500) g/cm2 x area / yield; 273 mW at 72.3 % duty for 3.5 years
    in Australia (597 g/kWh) is 597 g/kWh x energy."""
    area_mm2, y = 145.0, 0.943543
    expected = (1.475 * 583 + 240 + 500) * area_mm2 / 100 / y
    assert die_g(area_mm2, "10nm", y, grid_g_per_kwh("taiwan"), 95) == pytest.approx(expected, rel=1e-12)
    energy_j = 0.273 * 0.723 * 3.5 * 365.25 * 24 * 3600
    assert operational_g(energy_j, grid_g_per_kwh("australia")) == pytest.approx(597 * energy_j / 3.6e6)
    # ACT's default "97" abatement is the mean of its 95 and 99 % gas tables
    assert logic_g_per_cm2("7nm", 583, 97) == pytest.approx(583 * 2.15 + (350 + 200) / 2 + 500)


def test_carbon_per_token_adds_operational_and_amortised_embodied():
    f = CarbonFactors.from_spec(CarbonSpec(grid=400, lifetime_years=4, utilisation=0.5))
    op, emb = f.per_token(np.array([3.6e6]), np.array([1e6]), np.array([100.0]))
    assert op[0] == pytest.approx(400.0)                     # 1 kWh per token at 400 g/kWh
    assert emb[0] == pytest.approx(1e6 / (100.0 * 4 * 365.25 * 86400 * 0.5))


def test_unknown_grid_is_a_study_error():
    with pytest.raises(StudyError) as err:
        CarbonFactors.from_spec(CarbonSpec(grid="mars"))
    assert err.value.key == "carbon.grid"


def test_embodied_carbon_of_a_package_counts_dies_memory_and_packaging(tiny_path):
    """The tiny study's package's embodied carbon, by hand from ACT's figures: each die at its own
    negative-binomial yield, each HBM3 stack's 16 GiB of DRAM and every packaged IC."""
    import arch
    p = dse.prepare(dse.load_study(tiny_path))
    X = np.random.default_rng(3).integers(p.space.lower, p.space.upper + 1, size=(4, p.space.n_var))
    got = p.evaluator(X)["embodied_kg"].to_numpy()
    t = p.tables
    for x, design, kg in zip(X, p.evaluator.designs(X), got):
        grams = 0.0
        for name, stacks in zip(design.chiplets, design.hbm_stacks):
            k = t.kind_names.index(name)
            area = t.kind_area_mm2[k] + stacks * t.hbm.phy_area_mm2
            y = arch.die_yield(area, t.kind_defect_density_per_cm2[k])
            grams += logic_g_per_cm2(t.kind_nodes[k], 583, 97) * area / 100 / y + 150
            grams += stacks * (16 * 2**30 / 1e9 * 65 / 0.875 + 150)
        channel = t.ddr.capacity_bytes
        grams += design.ddr_channels * (channel / 1e9 * 65 / 0.875 + 150 * channel / 2e9)
        grams += 0.13 * 12 * 1e3 * 16830e-6            # an OAM board of 12 layers, ACT's PCB model
        assert kg == pytest.approx(grams / 1000, rel=1e-9)


@pytest.mark.parametrize("grid", [float("inf"), float("nan"), -1, 5000, [1], True])
def test_bad_grid_values_are_one_line_errors_naming_the_key(grid, tiny_dict, tmp_path, dse_cli):
    import yaml
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**tiny_dict, "carbon": {"grid": grid}}))
    code, out, err = dse_cli("validate", path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "carbon.grid" in err, err


def test_board_carbon_is_acts_pcb_model():
    """ACT models/materials/pcb.yaml: 0.91 kg per m2 at 8 layers, 0.13 kg per m2 per layer elsewhere."""
    from dse.system.carbon import pcb_g
    assert pcb_g(0.1e6, 8) == pytest.approx(91.0)
    assert pcb_g(0.1e6, 12) == pytest.approx(0.13 * 12 * 100)
    f = CarbonFactors.from_spec(CarbonSpec(board_mm2=102 * 165, board_layers=4))
    assert f.board_g == pytest.approx(0.43e3 * 102 * 165 * 1e-6)
