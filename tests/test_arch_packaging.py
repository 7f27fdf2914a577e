"""Package assembly cost (arch.packaging): Chiplet Actuary's model (Feng & Ma, DAC'22) and issue 34's
64-chiplet package."""
import math

import pytest

import arch
import dse
import memory
import noc

# Chiplet Actuary's parameter.ini (OS and SI sections), as arch/data/packaging.yaml has them
SUBSTRATE_USD, SUBSTRATE_SCALE, C4, UBUMP, ATTACH = 0.005, 4.0, 0.005, 0.01, 0.99
SI_WAFER, SI_D0, SI_CRITICAL, SI_SCALE = 1937.0, 0.06, 6.0, 1.1


def _wafer_count(area):
    """Chiplet Actuary's dies per 300 mm wafer (scribe 0.2 mm, edge loss 5 mm)."""
    a = (math.sqrt(area) + 0.2) ** 2
    return math.pi * 145.0**2 / a - math.pi * 290.0 / math.sqrt(2 * a)


def test_the_800_mm2_soc_of_chiplet_actuary_on_an_organic_substrate():
    # Chiplet Actuary's 7 nm 800 mm² SoC: known-good die $318.60 (its figure, tests/test_arch_cost.py),
    # one die on a 3,200 mm² substrate (layer factor 1), C4 bumps, bonding yield 0.99 (OS):
    # 318.60 + 16.00 + 4.00 = 338.60 as made, / 0.99 = $342.02 with the failed assemblies
    kgd = arch.known_good_die_cost_usd(800, "7nm")
    assert kgd == pytest.approx(318.60, abs=0.01)
    cost = arch.package_cost(kgd, 800, 1, "organic-substrate", 0.99)
    assert cost["cost_substrate_usd"] == pytest.approx(800 * 4 * 0.005)
    assert cost["cost_bonding_usd"] == pytest.approx(800 * 0.005)
    assert cost["cost_usd"] == pytest.approx(342.02, abs=0.01)
    assert cost["cost_yield_loss_usd"] == pytest.approx(338.60 * (1 / 0.99 - 1), abs=0.01)


def test_two_400_mm2_chiplets_on_a_silicon_interposer_by_chiplet_actuarys_equations():
    # the same SoC split into two 7 nm chiplets on a passive interposer (Chiplet Actuary's SI package,
    # chip-last), every step of its equations written out: interposer 880 mm² of a $1,937 55 nm wafer,
    # yield (1 + 8.8 x 0.06 / 6)^-6, substrate 4 x 880 mm², micro-bumps on 800 mm², C4 on 880 mm²
    kgd = 2 * arch.known_good_die_cost_usd(400, "7nm")
    a_int = SI_SCALE * 800
    interposer = SI_WAFER / _wafer_count(a_int)
    y_int = (1 + a_int / 100 * SI_D0 / SI_CRITICAL) ** -SI_CRITICAL
    y_bond = 0.99**2
    substrate = SUBSTRATE_SCALE * a_int * SUBSTRATE_USD
    ubump, c4 = 800 * UBUMP, a_int * C4
    loss = (interposer + c4) * (1 / (y_int * y_bond * ATTACH) - 1) + substrate * (1 / ATTACH - 1) \
        + (kgd + ubump) * (1 / (y_bond * ATTACH) - 1)
    expected = kgd + interposer + substrate + ubump + c4 + loss
    cost = arch.package_cost(kgd, 800, 2, "silicon-interposer", 0.99)
    assert cost["cost_usd"] == pytest.approx(expected, rel=1e-12)
    assert cost["cost_substrate_usd"] == pytest.approx(interposer + substrate, rel=1e-12)
    assert (y_int, interposer) == (pytest.approx(0.6029, abs=1e-4), pytest.approx(36.91, abs=0.01))
    # $307.72 against $342.02 for the monolithic die: splitting a large 7 nm die pays for the interposer,
    # Chiplet Actuary's own conclusion for dies this size
    assert cost["cost_usd"] == pytest.approx(307.72, abs=0.01)
    assert sum(v for k, v in cost.items() if k != "cost_usd") == pytest.approx(cost["cost_usd"])


def test_perfect_bonding_loses_nothing_and_an_interposer_no_wafer_holds_is_infinitely_dear():
    cost = arch.package_cost(100.0, 200.0, 2, "organic-substrate", 1.0, stacks_usd=50.0, stacks_mm2=100.0,
                             n_stacks=1, off_package_usd=7.0)
    assert cost["cost_yield_loss_usd"] == 0.0 and cost["cost_memory_usd"] == 57.0
    assert cost["cost_substrate_usd"] == pytest.approx(300 * 4 * 0.005 * 2.0)       # 1,200 mm² > 900: 2 x
    assert math.isinf(arch.package_cost(1.0, 60_000.0, 2, "silicon-interposer", 0.99)["cost_usd"])
    with pytest.raises(arch.ArchError, match="packaging"):
        arch.package_cost(1.0, 1.0, 1, "glass", 0.99)


def test_the_64_chiplet_package_with_64_hbm_stacks_costs_a_sane_figure():
    # issue 34: deepseek_v3_per_layer's 8 x 8 package of sa-256 chiplets, one HBM3E stack each, cost
    # $15.5M because every part was divided by 0.95^(64 + 64) = 0.0014. Now the bonds yield 0.99 each
    # (0.99^128 = 0.28) and the cost is Chiplet Actuary's: $1.82M, of which the dies are $1.9k, the
    # stacks $18.4k and nearly all the rest the 14,874 mm² passive interposer, which yields 0.4 %
    # at its 0.06 defects/cm² (a package that size is a wafer-scale part, not a CoWoS interposer)
    study = dse.load_study("studies/deepseek_v3_per_layer.yaml")
    chip = study.hardware.library()[0]
    hbm = memory.memory_preset("hbm3e")
    link = noc.link_tech("ucie-advanced")
    die = arch.chiplet_area_mm2(chip, "fp8") + hbm.phy_area_mm2
    cost = arch.package_cost(64 * arch.known_good_die_cost_usd(die, chip.node), 64 * die, 64, link.packaging,
                             link.bond_yield, stacks_usd=64 * hbm.capacity_bytes * hbm.cost_usd_per_byte,
                             stacks_mm2=64 * hbm.footprint_mm2, n_stacks=64)
    assert (link.packaging, link.bond_yield) == ("silicon-interposer", 0.99)
    assert 1.5e6 < cost["cost_usd"] < 2.2e6, cost
    assert cost["cost_dies_usd"] < 3e3 and cost["cost_memory_usd"] == pytest.approx(64 * 288.0)
    assert cost["cost_yield_loss_usd"] > 0.9 * cost["cost_usd"]
    old = (cost["cost_dies_usd"] + cost["cost_memory_usd"]) / 0.95 ** 128
    assert old > 5 * cost["cost_usd"]
