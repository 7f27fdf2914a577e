"""Systolic cycle formula, yield and cost against their published forms."""
import math

import pytest

import arch


@pytest.mark.parametrize("dataflow,sr,sc,t", [("os", 100, 60, 30), ("ws", 30, 60, 100), ("is", 30, 100, 60)])
def test_gemm_cycles_follow_scalesim_analytical_model(dataflow, sr, sc, t):
    # SCALE-Sim (Samajdar et al. 2018): (2R + C + T - 2) * ceil(S_R/R) * ceil(S_C/C), M=100, N=60, K=30
    R, C = 16, 8
    expected = (2 * R + C + t - 2) * math.ceil(sr / R) * math.ceil(sc / C)
    assert arch.gemm_cycles(100.0, 60.0, 30.0, R, C, {"os": 0, "ws": 1, "is": 2}[dataflow]) == expected


def test_yield_matches_reference_check_values():
    # Chiplet Actuary parameters, 7 nm, D0 = 0.09/cm², alpha = 10 (shared/reference/hardware.md)
    assert arch.die_yield(100, 0.09) == pytest.approx(0.914, abs=1e-3)
    assert arch.die_yield(800, 0.09) == pytest.approx(0.499, abs=1e-3)


def test_dies_per_wafer_standard_formula():
    # floor(pi r^2 / A - 2 pi r / sqrt(2A)), 300 mm wafer, 100 mm² -> 640
    assert arch.dies_per_wafer(100) == 640


def test_chiplet_validation():
    with pytest.raises(arch.ArchError, match="unknown dataflow 'xx'"):
        arch.Chiplet("c", "systolic", 8, 8, "xx", 1e6, 1e9, "7nm")
    with pytest.raises(arch.ArchError, match="unknown technology node '1nm'"):
        arch.Chiplet("c", "systolic", 8, 8, "ws", 1e6, 1e9, "1nm")
