"""The A100's switching energy fitted on a published GEMM at its 400 W limit (dse.validation.a100_power):
H. He, thonking.ai 2024, an 8192^3 16-bit cuBLAS GEMM on one A100: 257 TFLOP/s on random inputs, 295 on
zeros (the same kernel at the full clock), so the random inputs run at 257 / 295 = 0.871 of it."""
from __future__ import annotations

import pytest

import arch
from dse.validation import a100_power


def test_published_figures_as_transcribed():
    assert a100_power.RANDOM_TFLOPS == 257.0 and a100_power.ZEROS_TFLOPS == 295.0
    assert a100_power.MEASURED_CLOCK == pytest.approx(0.871, abs=5e-4)
    assert a100_power.POWER_LIMIT_W == 400.0


def test_fitted_energy_runs_the_gemm_at_the_measured_clock_and_the_limit():
    factor, energy = a100_power.fit_mac_energy()
    clock, tflops, power = a100_power.modelled(factor)
    assert clock == pytest.approx(257.0 / 295.0, rel=2e-3)
    assert power == pytest.approx(400.0, rel=1e-3) and power <= 400.0 * (1 + 1e-6)
    # the figures the module docstring and docs/validation.md quote
    assert factor == pytest.approx(4.01, abs=0.01) and energy["bf16"] == pytest.approx(2.41, abs=0.01)
    # the model's GEMM, at its fitted kernel rate (a100-like's max_efficiency, Vidur), slows by the same share
    assert tflops == pytest.approx(a100_power.modelled(0.0)[1] * clock, rel=0.01)
    # the 7 nm node carries the fitted figure (arch/data/technology.yaml), so the preset runs at the clock
    assert arch.technology.node("7nm").gpu_mac_overhead == pytest.approx(factor, abs=0.005)
    assert a100_power.modelled()[0] == pytest.approx(a100_power.MEASURED_CLOCK, rel=2e-3)


def test_inputs_that_switch_nothing_run_at_the_full_clock():
    """He's zeros: the same GEMM at 295 TFLOP/s, 0.946 of the 312 TFLOP/s peak, is not power-limited; the
    model's GEMM without switching energy (leakage, active power, DRAM) stays under 400 W at the full clock."""
    clock, _, power = a100_power.modelled(0.0)
    assert clock == 1.0 and power < a100_power.POWER_LIMIT_W
    assert a100_power.ZEROS_TFLOPS / 312.0 > 0.94
