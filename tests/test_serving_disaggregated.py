"""Disaggregated prefill/decode serving (dse.serving.disaggregated) against hand computations and closed
forms, and through `dse serve --disaggregate`."""
import json

import numpy as np
import pytest

from dse.serving.analytic import AffineSteps
from dse.serving.disaggregated import simulate_disaggregated
from dse.serving.requests import Requests, synthetic
from dse.serving.simulate import simulate

KV = 131072.0              # bytes per token (Llama-2-7B fp16: 2 x 32 layers x 4096 x 2 bytes)


def test_one_request_by_hand():
    # TTFT = the prefill; the second token waits for the KV transfer (alpha + bytes / bandwidth) and one
    # decode step; then one decode step per token
    steps = AffineSteps(d1=0.02, slope=0.0, p0=0.0, pk=0.1, prompt=1000)
    r = Requests(arrival_s=np.array([0.0]), prompt=np.array([1000]), output=np.array([5]))
    out = simulate_disaggregated(r, steps, steps, 1, 1, KV, link_alpha_s=1e-3, link_Bps=50e9)
    transfer = 1e-3 + 1000 * KV / 50e9
    m = out.metrics()
    assert m["mean_ttft_ms"] == pytest.approx(100.0)
    assert m["mean_e2el_ms"] == pytest.approx((0.1 + transfer + 4 * 0.02) * 1e3)
    assert out.itl_s[0] == pytest.approx(transfer + 0.02)


def test_prefill_pool_is_an_md1_queue():
    # prompts one at a time (the token budget holds one), decode negligible: the prefill pool is an
    # M/D/1 queue of service S, mean wait lambda S^2 / (2 (1 - rho)) (Pollaczek-Khinchine)
    S, rate = 0.05, 12.0
    steps = AffineSteps(d1=1e-6, slope=0.0, p0=0.0, pk=S, prompt=1000)
    r = synthetic(20000, 1000, 2, rate, seed=4)
    out = simulate_disaggregated(r, steps, steps, 1, 1, KV, 0.0, 1e18, prefill_tokens=1000)
    rho = rate * S
    assert out.metrics()["mean_ttft_ms"] == pytest.approx((S + rate * S * S / (2 * (1 - rho))) * 1e3, rel=0.05)


def test_decodes_no_longer_wait_behind_prefills():
    # the same load colocated (continuous batching, prefill first) and split 1:1: TPOT drops to the decode
    # step of the sequences in flight; TTFT no longer shares the server with decodes
    steps = AffineSteps(d1=0.015, slope=2e-4, p0=0.002, pk=0.03, prompt=2048)
    reqs = synthetic(3000, 2048, 128, 8.0, seed=5)
    colocated = simulate(reqs, steps, max_batch=256).metrics()
    split = simulate_disaggregated(reqs, steps, steps, 1, 1, KV, 5e-6, 50e9).metrics()
    assert split["mean_tpot_ms"] < 0.8 * colocated["mean_tpot_ms"]
    assert split["p99_tpot_ms"] < 0.6 * colocated["p99_tpot_ms"]
    # decode-only TPOT is decode(N) (+ the KV wait once per request), N = lambda (O - 1) TPOT by Little's law
    tpot = split["mean_tpot_ms"] / 1e3
    n = 8.0 * 127 * tpot
    assert tpot == pytest.approx(0.015 + 2e-4 * (n - 1), rel=0.08)


def test_dse_serve_disaggregate_flag(tmp_path, dse_cli):
    import yaml
    data = yaml.safe_load(open("tests/data/tiny.yaml"))
    design_path = tmp_path / "design.yaml"
    out = tmp_path / "out"
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump(data))
    assert dse_cli("run", str(study), "--out", str(out))[0] == 0
    design_path = sorted((out / "designs").glob("*.yaml"))[0]
    args = ["serve", str(study), "--design", str(design_path), "--input-len", "64", "--output-len", "16",
            "--request-rate", "1", "--num-prompts", "50", "--json"]
    code, text, err = dse_cli(*args, "--disaggregate", "1:2", "--kv-link", "nvlink4-nvswitch")
    assert code == 0, err
    assert json.loads(text)["completed"] == 50
    for flag, value in (("--disaggregate", "0:1"), ("--disaggregate", "two"), ("--kv-link", "carrier-pigeon")):
        extra = ["--disaggregate", "1:1"] if flag == "--kv-link" else []
        code, _, err = dse_cli(*args, flag, value, *extra)
        assert code == 2 and flag in err and err.count("\n") == 1, err
