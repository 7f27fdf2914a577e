"""Issue 55: the accelerators the research names as presets (arch/data/chiplets.yaml), each figure from
its datasheet or vendor documentation (docs/arch.md lists the sources). `dse gemm --chiplet P --json`
reports the sourced peak rate and peak HBM bandwidth within 3 %, and a 4096-cube BF16 GEMM between 50 %
and 95 % of peak. Nothing here is fitted to measured results (MLPerf, vendor tables): they are held out."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import arch
from dse.cli import cli

#: preset: (dense BF16 FLOP/s, (the narrower precision, its dense rate), peak HBM bandwidth B/s)
SOURCED = {
    "gaudi2-like": (432e12, ("fp8", 865e12), 2.46e12),       # Intel, Hot Chips 2024; Intel Vision 2024
    "gaudi3-like": (1835e12, ("fp8", 1835e12), 3.67e12),     # Intel, Hot Chips 2024 spec table
    "tpu-v5p-like": (459e12, ("fp8", 459e12), 2765e9),       # Cloud TPU docs, TPU v5p
    "tpu-v6e-like": (918e12, ("int8", 1836e12), 1640e9),     # Cloud TPU docs, TPU v6e
    "trainium2-like": (667e12, ("fp8", 1299e12), 2.9e12),    # AWS Neuron docs, Trainium2
}
#: where the model misses the 50-95 % band of the 4096-cube GEMM, and why (reported, not fitted away)
OUTSIDE_BAND = {
    "trainium2-like": "the NKI guides state the Tensor Engine's tile loads, fill and drain hidden at the largest "
                      "tiles (background and fast LoadStationary, MultiplyMoving every max(N, 64) cycles): "
                      "99.9 % of peak; PSUM evacuation overlaps (2.4 % of the engine time), no chip power "
                      "published (docs/arch.md, the 50-95 % band)",
}


def _gemm(name: str, n: int = 4096) -> dict:
    res = CliRunner().invoke(cli, ["gemm", "--chiplet", name, "--m", str(n), "--n", str(n), "--k", str(n),
                                   "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.parametrize("name", sorted(SOURCED))
def test_peak_rates_and_bandwidth_match_the_sources(name):
    bf16, (narrow, narrow_rate), bandwidth = SOURCED[name]
    report = _gemm(name)
    assert report["peak_flops"] == pytest.approx(bf16, rel=0.03)
    assert report["peak_bandwidth_Bps"] == pytest.approx(bandwidth, rel=0.03)
    assert arch.preset(name).peak_flops(narrow) == pytest.approx(narrow_rate, rel=0.03)
    util = report["utilisation"]
    if name in OUTSIDE_BAND:
        assert not 0.5 <= util <= 0.95, f"{name} now lands in the band: drop it from OUTSIDE_BAND"
    else:
        assert 0.5 <= util <= 0.95, (name, util)
    assert report["power_limit_w"] == 0 or report["power_w"] <= report["power_limit_w"] * (1 + 1e-9)


def test_a_tiny_study_characterizes_and_evaluates_the_presets():
    # GPT-2 decode on a 1 x 2 package mixing two of the new presets: every unit gets a row on each, at the
    # preset's peak, and a design placing the units on both runs through the evaluator's step model
    import dse
    from dse.model.breakdown import chiplet_busy_s
    from dse.model.characterize import characterize
    from dse.study.space import Design

    names = ["gaudi3-like", "tpu-v6e-like"]
    study = dse.Study.from_dict({
        "name": "accel", "workload": {"model": "gpt2", "phase": "decode", "batch": 4, "context": 512},
        "hardware": {"chiplets": [{"preset": n} for n in names],
                     "memory": [{"kind": "hbm2e", "stacks": [1, 2]}, {"kind": "ddr5", "channels": [1, 1]}],
                     "package": {"mesh": {"rows": 1, "cols": 2}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": 1},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})
    prepared = dse.prepare(study)
    table = characterize(prepared)
    for name in names:
        rows = table[table["chiplet"] == name]
        assert len(rows) == len(prepared.tables.unit_names)
        assert (rows["peak_flops"] == arch.preset(name).peak_flops("bf16")).all()
        assert (rows["time_s"] > 0).all()
    units = prepared.tables.unit_names
    design = Design(rows=1, cols=2, chiplets=names, hbm_stacks=[1, 1], ddr_channels=1, link="ucie-advanced",
                    mapping="many-to-many", placement={u: [i % 2] for i, u in enumerate(units)})
    _, busy = chiplet_busy_s(design, prepared)
    assert (busy > 0).all() and (busy < 1.0).all()


def test_a_large_gemm_draws_the_published_power_limit():
    # issue 48's check: Gaudi 3's 4096 cube runs at the 900 W limit through the shared 5 nm systolic energy per
    # MAC (clock 0.936); Gaudi 2's, at 49 % of its 600 W through the shared 7 nm figure, carries an energy
    # per MAC fitted to its TDP (dse.validation.gaudi_power), as b200-like's tensor cores are
    from dse.validation import gaudi_power

    gaudi3 = _gemm("gaudi3-like")
    assert 0.8 <= gaudi3["power_w"] / gaudi3["power_limit_w"] <= 1.0 + 1e-9
    assert gaudi3["clock_fraction"] < 1.0
    gaudi2 = _gemm("gaudi2-like")
    assert 0.8 <= gaudi2["power_w"] / gaudi2["power_limit_w"] <= 1.0 + 1e-9
    assert gaudi2["clock_fraction"] == 1.0
    assert arch.preset("gaudi2-like").overrides["systolic_mac_overhead"] == gaudi_power.fit_mac_overhead()
    shared = gaudi_power.modelled(arch.technology.node("7nm").systolic_mac_overhead)
    assert shared.power_w / gaudi_power.POWER_LIMIT_W < 0.8          # what the shared figure leaves


def test_tpu_v6e_runs_at_a_clock_like_v5p():
    # four 256 x 256 MXUs at v5p's 1.75 GHz, not two at 3.5 GHz (arch/data/chiplets.yaml); N splits four ways
    v6e, v5p = arch.preset("tpu-v6e-like"), arch.preset("tpu-v5p-like")
    assert v6e.freq_hz == pytest.approx(v5p.freq_hz, rel=1e-3) and v6e.arrays == 4


def test_an_sram_capacity_of_zero_is_one_line_naming_the_key(tmp_path, dse_cli):
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: s\nworkload: {model: gpt2, phase: decode, batch: 4, context: 512}\n"
        "hardware:\n  chiplets:\n    - {preset: gaudi3-like, sram_mb: 0}\n"
        "  memory:\n    - {kind: hbm2e, stacks: [1, 2]}\n"
        "  package: {mesh: {rows: 1, cols: 1}, link: ucie-advanced}\n"
        "search: {objectives: [latency, energy], population: 4, generations: 1}\n")
    code, out, err = dse_cli("characterize", str(study))
    assert code == 2
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and "sram_mb" in lines[0], lines


#: the nine presets issue 55 names
ISSUE_55 = ("gaudi2-like", "gaudi3-like", "groq-lpu-like", "cerebras-wse3-like", "sn40l-like", "ipu-bow-like",
            "trainium2-like", "tpu-v5p-like", "tpu-v6e-like")


def test_dse_characterize_costs_every_unit_on_every_one_of_the_nine_presets(tmp_path, dse_cli):
    # one study whose library holds all nine (mesh 1 x 1: the wafer-scale part is alone on its package): `dse
    # characterize` gives each unit a row on each, at the preset's peak, with a positive time
    import pandas as pd
    study = tmp_path / "all.yaml"
    chiplets = "".join(f"    - {{preset: {name}}}\n" for name in ISSUE_55)
    study.write_text(
        "name: all\nworkload: {model: gpt2, phase: decode, batch: 4, context: 512}\n"
        f"hardware:\n  chiplets:\n{chiplets}"
        "  memory:\n    - {kind: hbm3, stacks: [0, 4]}\n    - {kind: ddr5, channels: [0, 2]}\n"
        "  package: {mesh: {rows: 1, cols: 1}, link: ucie-advanced}\n"
        "search: {objectives: [latency, energy], population: 4, generations: 1}\n")
    out = tmp_path / "table.csv"
    code, stdout, err = dse_cli("characterize", str(study), "--out", str(out))
    assert code == 0, stdout + err
    table = pd.read_csv(out)
    assert set(table["chiplet"]) == set(ISSUE_55)
    per_kind = table.groupby("chiplet")
    assert per_kind.size().nunique() == 1 and (table["time_s"] > 0).all()
    for name in ISSUE_55:
        assert (per_kind.get_group(name)["peak_flops"] == arch.preset(name).peak_flops("bf16")).all()
