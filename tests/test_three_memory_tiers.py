"""Issue 55: three memory tiers at once. An SRAM-resident kind with HBM stacks attached (SambaNova SN40L: 520 MB
SRAM, 64 GB HBM, 1.5 TB DDR) holds its units' bytes in its SRAM, then its HBM, then the package's DDR, densest
first (dse.model.hbm_placement), and reads each tier at its own bandwidth: a copy's memory time is the sum over
the tiers of its bytes there over the tier's bandwidth (dse.model.copy_cost.copy_roofline). Before, with HBM
attached, its SRAM held nothing: a design whose bytes fit SRAM + HBM but not HBM alone was short."""
from __future__ import annotations

import numpy as np
import pytest

import arch
from dse.model.copy_cost import ChipletMemory, PowerTerms, copy_roofline

GIB = 2 ** 30


def test_a_copy_reads_each_tier_at_its_own_bandwidth():
    # one memory-bound operator (no compute): its time is bytes x (f / B_ddr + g / B_sram + (1 - f - g) / B_hbm)
    b, f, g = 3.0e9, 0.25, 0.35
    memory = ChipletMemory(1.6e12, 100e9, 4e-12, 15e-12, 62.5e12, 1e-12)
    cost = copy_roofline(0, 0, 1, 1.0, b, f, g, memory, (1.0, 0.0, 0.0), np.array([0, 1]), np.zeros((1, 1)),
                         np.array([b]), np.zeros((1, 1)), np.ones(1), np.zeros((1, 1)),
                         PowerTerms(0.0, 0.7, 0.0, 0.0), np.zeros((1, 1)))
    assert cost.time_s == pytest.approx(b * f / 100e9 + b * g / 62.5e12 + b * (1 - f - g) / 1.6e12, rel=1e-12)
    assert cost.ddr_bytes == pytest.approx(b * f)
    assert cost.dram_j == pytest.approx(b * (f * 15e-12 + g * 1e-12 + (1 - f - g) * 4e-12), rel=1e-12)
    two = copy_roofline(0, 0, 1, 1.0, b, f, 0.0, memory, (1.0, 0.0, 0.0), np.array([0, 1]), np.zeros((1, 1)),
                        np.array([b]), np.zeros((1, 1)), np.ones(1), np.zeros((1, 1)),
                        PowerTerms(0.0, 0.7, 0.0, 0.0), np.zeros((1, 1)))
    assert two.time_s == pytest.approx(b * f / 100e9 + b * (1 - f) / 1.6e12, rel=1e-12)   # g = 0: two tiers


def _prepare(ddr_channels: int, cols: int = 1, objectives: tuple = ("latency", "energy")):
    import dse
    memory = [{"kind": "hbm3", "stacks": [1, 1], "overrides": {"capacity_gib": 1.0, "data_rate_gbps": 3.125}}]
    if ddr_channels:
        memory.append({"kind": "ddr5", "channels": [ddr_channels, ddr_channels]})
    study = dse.Study.from_dict({
        # GPT-2 decoding 64 sequences of 1,024 tokens: 0.25 GB of weights and 2.4 GB of KV cache, more than
        # SN40L's 0.52 GB SRAM + one 1 GiB HBM stack
        "name": "tiers", "workload": {"model": "gpt2", "phase": "decode", "batch": 64, "context": 1024},
        "hardware": {"chiplets": [{"preset": "sn40l-like"}], "memory": memory,
                     "package": {"mesh": {"rows": 1, "cols": cols}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": cols},
        "search": {"objectives": list(objectives), "population": 4, "generations": 1}})
    return study, dse.prepare(study)


def _design(prepared, ddr_channels: int, cols: int = 1):
    from dse.study.space import Design
    units = prepared.tables.unit_names
    return Design(rows=1, cols=cols, chiplets=["sn40l-like"] * cols, hbm_stacks=[1] * cols,
                  ddr_channels=ddr_channels, link="ucie-advanced", mapping="many-to-many",
                  placement={u: list(range(cols)) for u in units})


def test_sn40l_fills_sram_then_hbm_then_ddr_densest_first():
    from dse.model.breakdown import design_state
    from dse.results.verdict import design_verdict
    study, prepared = _prepare(1)
    design = _design(prepared, 1)
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    assert design_verdict(metrics, study).feasible and metrics["latency_s"] > 0
    W, _ = design_state(design, prepared)
    T = prepared.for_design(design).package_evaluator.kernel
    size = T.unit_capacity + T.unit_kv                  # one copy of each unit, all on chiplet 0
    f, g = W.f[: size.shape[0], 0], W.f_sram[: size.shape[0], 0]
    sram = arch.preset("sn40l-like").sram_bytes
    total = float(size.sum())
    assert total > sram + GIB                           # too big for SRAM + HBM: DDR holds the rest
    assert float((size * g).sum()) == pytest.approx(sram, rel=1e-9)
    assert float((size * (1 - f - g)).sum()) == pytest.approx(GIB, rel=1e-9)
    assert float((size * f).sum()) == pytest.approx(total - sram - GIB, rel=1e-9)
    density = (T.unit_w_copy[:, 1] + T.unit_other_dram[:, 0]) * T.unit_read_scale / np.where(size > 0, size, 1)
    held = size > 0
    # densest first: every byte in SRAM is at least as dense as any in HBM, and those as any in DDR
    assert density[held & (g > 0)].min() >= density[held & (g < 1)].max() - 1e-12
    assert density[held & (f < 1)].min() >= density[held & (f > 0)].max() - 1e-12


def test_without_ddr_the_shortfall_is_beyond_sram_plus_hbm():
    # old code: the SRAM held nothing once HBM was attached, so the shortfall was the bytes beyond the HBM alone
    from dse.results.verdict import design_verdict
    study, prepared = _prepare(0)
    design = _design(prepared, 0)
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    T = prepared.for_design(design).package_evaluator.kernel
    total = float((T.unit_capacity + T.unit_kv).sum())
    short = total - arch.preset("sn40l-like").sram_bytes - GIB
    verdict = design_verdict(metrics, study)
    assert not verdict.feasible and "capacity short" in verdict.reasons[0]
    assert metrics["capacity_short_bytes"] == pytest.approx(short, rel=1e-9)


def test_a_failure_leaves_what_the_survivor_serves_alone():
    # two SN40Ls each holding every unit: with three tiers every failure is evaluated in full
    # (dse.model.population_kernel.in_full); losing either leaves the one-chiplet design's step time
    _, two = _prepare(2, cols=2, objectives=("latency", "fault_tolerance"))
    both = two.evaluator.evaluate_designs([_design(two, 2, cols=2)]).iloc[0]
    _, one = _prepare(2)
    alone = one.evaluator.evaluate_designs([_design(one, 2)]).iloc[0]
    assert both["latency_s"] < alone["latency_s"]
    assert both["latency_s"] / both["fault_tolerance_frac"] == pytest.approx(alone["latency_s"], rel=1e-9)
