"""Issue 55: the SRAM-resident accelerators (Groq LPU, Graphcore Bow IPU, SambaNova SN40L, Cerebras WSE-3) as
presets whose SRAM is a memory tier (arch.SystolicChiplet.sram_Bps), and the wafer-scale die (arch.wafer).
`dse gemm --chiplet P --json` reports the sourced peak rate and, as ``peak_bandwidth_Bps``, the fastest tier
that holds the operands (the SRAM) within 3 %; an SRAM-only part refuses a design whose bytes do not fit it
(infeasible, with the reason); bad input is one line naming the key. Nothing is fitted to measured results."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

import arch
from arch.wafer import wafer_die_yield
from dse.cli import cli

#: preset: (dense BF16 FLOP/s, on-die SRAM bandwidth B/s), docs/arch.md's sources
SOURCED = {
    "groq-lpu-like": (188e12, 80e12),           # TechPowerUp, Feb 2024
    "ipu-bow-like": (350e12, 65e12),            # Bow-2000 datasheet (350 TFLOP/s, 260 TB/s per 4 IPUs)
    "sn40l-like": (638e12, 62.5e12),            # Hot Chips 2024 (638); the SRAM figure a floor (L)
    "cerebras-wse3-like": (125e15 / 8, 21e15),  # 125 PFLOP/s over the quoted 8x sparsity (derived); 21 PB/s
}
#: where the model misses the 50-95 % band of the 4096-cube GEMM, and why (reported, not fitted away)
OUTSIDE_BAND = {
    "sn40l-like": "stall-free from SRAM; no PCU geometry, clock, socket power or kernel-call overhead "
                  "published: 99.7 %",
    "cerebras-wse3-like": "a 4096 cube gives each of the 948 x 949 cores a 5 x 5 weight block: 5 of its 8 SIMD "
                          "lanes, 5 words a token on its one-word links, 1,895 hops of fill: 42.7 %; Cerebras's own "
                          "SUMMA / MeshGEMM mapping (os, lanes over M) gives 42.6 % (tests/test_array_grid.py)",
}


def _gemm(name: str, n: int = 4096) -> dict:
    res = CliRunner().invoke(cli, ["gemm", "--chiplet", name, "--m", str(n), "--n", str(n), "--k", str(n),
                                   "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("name", sorted(SOURCED))
def test_peak_rate_and_sram_bandwidth_match_the_sources(name):
    bf16, sram = SOURCED[name]
    report = _gemm(name)
    assert report["peak_flops"] == pytest.approx(bf16, rel=0.03)
    assert report["peak_bandwidth_Bps"] == pytest.approx(sram, rel=0.03)
    assert "SRAM" in report["memory"]
    util = report["utilisation"]
    if name in OUTSIDE_BAND:
        assert not 0.5 <= util <= 0.95, f"{name} now lands in the band: drop it from OUTSIDE_BAND"
    else:
        assert 0.5 <= util <= 0.95, (name, util)


def test_groq_int8_runs_at_its_published_four_times_fp16():
    # 750 TOPS INT8 against 188 TFLOP/s FP16 (TechPowerUp, Feb 2024): macs_per_pe {int8: 4}, not the 2x that
    # packing by bit width gave (376 TOPS); a systolic chiplet without the field still packs by width
    groq = arch.preset("groq-lpu-like")
    assert groq.peak_flops("int8") == pytest.approx(750e12, rel=0.03)
    assert groq.peak_flops("int8") == pytest.approx(4 * groq.peak_flops("bf16"))
    assert arch.preset("groq-lpu-like", macs_per_pe={}).peak_flops("int8") == pytest.approx(2 * 188e12, rel=0.03)
    report = CliRunner().invoke(cli, ["gemm", "--chiplet", "groq-lpu-like", "--m", "4096", "--n", "4096",
                                      "--k", "4096", "--precision", "int8", "--json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.output)["peak_flops"] == pytest.approx(750e12, rel=0.03)


def test_groq_fp16_runs_as_its_two_160_by_320_sub_operations():
    # ISCA 2022 (Abts et al.): a matrix multiply decomposes into [1 x K] x [K x 320] sub-operations, K = 160 at
    # FP16, two of them a cycle; a 4096 cube folds K over 160 (26 passes of 25.6) and each array's 2,048 columns
    # over 320 (7 of 6.4): 90 % of the 188 TFLOP/s, where one 320 x 320 array gave 96.8 %
    groq = arch.preset("groq-lpu-like")
    assert (groq.rows, groq.cols, groq.arrays) == (160, 320, 2)
    assert _gemm("groq-lpu-like")["utilisation"] == pytest.approx(4096 ** 2 * 2048 / (160 * 320 * 26 * 7 * 4096),
                                                                   rel=1e-3)


def test_groq_draws_its_published_power_limit_on_a_large_gemm():
    # issue 48's check: the 300 W TSP card, through the 7 nm systolic energy per MAC scaled to 14 nm
    report = _gemm("groq-lpu-like")
    assert 0.8 <= report["power_w"] / report["power_limit_w"] <= 1.0 + 1e-9


def test_operands_beyond_the_sram_come_from_the_tier_below_or_are_refused(dse_cli):
    # SN40L: a 16384 cube (1.6 GB) does not fit its 520 MB SRAM: read from its 64 GB HBM at 1.6 TB/s
    report = _gemm("sn40l-like", 16384)
    assert report["peak_bandwidth_Bps"] == pytest.approx(1.6e12, rel=0.03)
    # Groq: no tier below its SRAM, so an 8192 cube (402 MB > 230 MB) is one line naming the flag
    code, out, err = dse_cli("gemm", "--chiplet", "groq-lpu-like", "--m", "8192", "--n", "8192", "--k", "8192")
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--chiplet" in lines[0] and "SRAM" in lines[0], lines


def _study(cols: int, memory: list, chiplet: str = "groq-lpu-like"):
    import dse
    return dse.Study.from_dict({
        "name": "sram", "workload": {"model": "gpt2", "phase": "decode", "batch": 4, "context": 512},
        "hardware": {"chiplets": [{"preset": chiplet}], "memory": memory,
                     "package": {"mesh": {"rows": 1, "cols": cols}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": 1},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})


def test_an_sram_only_part_refuses_weights_that_do_not_fit_and_spills_to_ddr_when_it_has_one():
    # GPT-2's 326 MB of weights and KV cache: one Groq LPU (230 MB, no HBM, no DDR) cannot hold them, two can;
    # one with DDR below spills its least-read bytes there and runs slower than two from SRAM
    import dse
    from dse.model.characterize import characterize
    from dse.results.verdict import design_verdict
    from dse.study.space import Design

    no_ddr = [{"kind": "hbm3", "stacks": [0, 0]}]
    results = {}
    for cols, memory, ddr in ((1, no_ddr, 0), (2, no_ddr, 0), (1, no_ddr + [{"kind": "ddr5", "channels": [2, 2]}], 2)):
        study = _study(cols, memory)
        prepared = dse.prepare(study)
        units = prepared.tables.unit_names
        design = Design(rows=1, cols=cols, chiplets=["groq-lpu-like"] * cols, hbm_stacks=[0] * cols,
                        ddr_channels=ddr, link="ucie-advanced", mapping="many-to-many",
                        placement={u: [i % cols] for i, u in enumerate(units)})
        metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
        results[(cols, ddr)] = (metrics, design_verdict(metrics, study))
    alone, verdict = results[(1, 0)]
    assert not verdict.feasible and "capacity short" in verdict.reasons[0] and "SRAM" in verdict.reasons[0]
    assert alone["units_without_memory"] == 0          # its path is its SRAM: the shortfall is the reason
    two, verdict = results[(2, 0)]
    assert verdict.feasible and 0 < two["latency_s"] < 0.1
    spilled, verdict = results[(1, 2)]
    assert verdict.feasible and spilled["latency_s"] > two["latency_s"]
    table = characterize(dse.prepare(_study(2, no_ddr)))        # every unit fits one LPU: read from SRAM
    assert (table["hbm_stacks"] == 0).all() and (table["bandwidth_Bps"] == 80e12).all()


def test_the_wafer_scale_die_yields_by_its_spare_cores_and_is_exempt_from_the_reticle():
    wse = arch.preset("cerebras-wse3-like")
    area = arch.chiplet_area_mm2(wse)
    assert area > 40 * 858                              # far above the reticle, yet manufacturable
    assert arch.check_manufacturable(wse) == area
    # 46,225 mm² at 0.10 defects per cm²: about 46 dead cores expected; 70,000 spares take them all, none
    # would leave it dead, and the whole-die negative binomial would give ~3e-8
    assert wafer_die_yield(46225, 970000, 70000, 0.10) == pytest.approx(1.0)
    assert wafer_die_yield(46225, 970000, 0, 0.10) < 1e-15
    assert 0.1 < wafer_die_yield(46225, 970000, 46, 0.10) < 0.9
    assert arch.die_yield(46225, 0.10) < 1e-6
    assert arch.chiplet_cost_usd(wse) == pytest.approx(wse.tech().wafer_cost_usd / 1.0)
    # a die without spare cores costs a wafer over its (tiny) yield
    assert arch.chiplet_cost_usd(arch.preset("cerebras-wse3-like", spare_cores=0)) > 1e12 or \
        math.isinf(arch.chiplet_cost_usd(arch.preset("cerebras-wse3-like", spare_cores=0)))


def _one_line(dse_cli, tmp_path, chiplets: str, mesh: str, memory: str = "{kind: hbm3, stacks: [0, 1]}"):
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: s\nworkload: {model: gpt2, phase: decode, batch: 4, context: 512}\n"
        f"hardware:\n  chiplets:\n{chiplets}  memory:\n    - {memory}\n"
        f"  package: {{mesh: {mesh}, link: ucie-advanced}}\n"
        "search: {objectives: [latency, energy], population: 4, generations: 1}\n")
    code, out, err = dse_cli("characterize", str(study))
    return code, [line for line in (out + err).splitlines() if line.strip()]


def test_a_wafer_among_other_chiplets_is_one_line_naming_the_key(dse_cli, tmp_path):
    code, lines = _one_line(dse_cli, tmp_path, "    - {preset: cerebras-wse3-like}\n    - {preset: h100-like}\n",
                            "{rows: 1, cols: 2}")
    assert code == 2 and len(lines) == 1 and "wafer_cores" in lines[0], lines
    code, lines = _one_line(dse_cli, tmp_path, "    - {preset: cerebras-wse3-like}\n", "{rows: 1, cols: 1}")
    assert code == 0, lines                             # alone on its package it is a design


@pytest.mark.parametrize("field, key", [("sram_mb: 0", "sram_mb"), ("sram_tbps: -1", "sram_tbps"),
                                        ("spare_cores: 980000", "spare_cores"),
                                        ("macs_per_pe: {int8: 0}", "macs_per_pe"),
                                        ("macs_per_pe: {int9: 4}", "macs_per_pe"),
                                        ("arrays: [0, 2]", "arrays"), ("arrays: [2, 2, 2]", "arrays"),
                                        ("array_link_words: -1", "array_link_words")])
def test_bad_sram_or_wafer_fields_are_one_line_naming_the_key(dse_cli, tmp_path, field, key):
    code, lines = _one_line(dse_cli, tmp_path, f"    - {{preset: cerebras-wse3-like, {field}}}\n",
                            "{rows: 1, cols: 1}")
    assert code == 2 and len(lines) == 1 and key in lines[0], lines
