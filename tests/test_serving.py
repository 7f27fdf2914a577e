"""The serving simulator (dse.serving) against closed forms and hand computations."""
import math
import time

import numpy as np
import pytest

from dse.serving.requests import Requests, synthetic
from dse.serving.simulate import simulate


class Steps:
    """A step table with prefill = a + b x tokens and decode = c + d x batch (seconds)."""

    def __init__(self, a=0.0, b=0.0, c=0.0, d=0.0):
        self.a, self.b, self.c, self.d = a, b, c, d

    def prefill(self, batch, context):
        return self.a + self.b * batch * context

    def decode(self, batch, context):
        return self.c + self.d * batch


def test_single_server_queue_matches_pollaczek_khinchine():
    # one request at a time, one token each: an M/D/1 queue of service S; mean wait lambda S^2 / (2 (1 - rho))
    S, rate = 0.01, 60.0
    reqs = synthetic(20000, prompt=100, output=1, rate=rate, seed=1)
    out = simulate(reqs, Steps(a=S), max_batch=1)
    rho = rate * S
    expected_ttft = S + rate * S * S / (2 * (1 - rho))
    assert out.metrics()["mean_ttft_ms"] / 1e3 == pytest.approx(expected_ttft, rel=0.05)


def test_static_batching_by_hand():
    # 4 requests at t = 0, batches of 2: prefill 2 x 10 tokens = 0.2 s, then decode steps of 0.05 s
    reqs = Requests(arrival_s=np.zeros(4), prompt=np.full(4, 10.0), output=np.array([3.0, 1.0, 2.0, 2.0]))
    out = simulate(reqs, Steps(b=0.01, c=0.05), scheduler="static", max_batch=2)
    # batch 1: prefill ends 0.2 (first tokens), request 0 needs 2 more steps: done 0.3; request 1 done 0.2
    # batch 2 starts 0.3: first tokens 0.5, one more step: done 0.55
    assert out.first_token_s.tolist() == pytest.approx([0.2, 0.2, 0.5, 0.5])
    assert out.done_s.tolist() == pytest.approx([0.3, 0.2, 0.55, 0.55])
    m = out.metrics()
    assert m["mean_tpot_ms"] == pytest.approx(np.mean([50.0, 50.0, 50.0]))
    assert m["request_throughput"] == pytest.approx(4 / 0.55)


def test_continuous_batching_by_hand():
    # two requests: A at 0 (prompt 10, 3 tokens), B at 0.15 (prompt 10, 2 tokens); prefill 0.1 each,
    # decode 0.05 + 0.01 x batch
    reqs = Requests(arrival_s=np.array([0.0, 0.15]), prompt=np.full(2, 10.0), output=np.array([3.0, 2.0]))
    out = simulate(reqs, Steps(b=0.01, c=0.05, d=0.01))
    # A: prefill 0..0.1 (token 1); decode 0.1..0.16 (token 2); B arrived: prefill 0.16..0.26 (B token 1);
    # decode both 0.26..0.33 (A token 3 done, B token 2 done)
    assert out.first_token_s.tolist() == pytest.approx([0.1, 0.26])
    assert out.done_s.tolist() == pytest.approx([0.33, 0.33])
    assert sorted(out.itl_s.tolist()) == pytest.approx(sorted([0.06, 0.17, 0.07]))


def test_kv_capacity_makes_requests_wait():
    reqs = Requests(arrival_s=np.zeros(2), prompt=np.full(2, 100.0), output=np.full(2, 10.0))
    roomy = simulate(reqs, Steps(b=0.001, c=0.01))
    tight = simulate(reqs, Steps(b=0.001, c=0.01), kv_capacity_tokens=150)
    assert roomy.first_token_s[1] == roomy.first_token_s[0]
    assert tight.first_token_s[1] > tight.done_s[0] - 1e-12       # the second waits for the first's cache


def test_ten_thousand_requests_simulate_quickly():
    reqs = synthetic(10000, prompt={"uniform": [100, 1000]}, output={"lognormal": {"median": 128, "sigma": 0.5}},
                     rate=20.0, seed=0)
    start = time.perf_counter()
    out = simulate(reqs, Steps(a=0.005, b=2e-6, c=0.01, d=1e-4))
    took = time.perf_counter() - start
    print(f"\n10,000 requests simulated in {took:.2f} s")
    assert np.isfinite(out.done_s).all() and out.metrics()["completed"] == 10000


def test_dse_serve_prints_vllm_metric_names(tmp_path, dse_cli):
    import json

    import yaml

    import dse
    p = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    design = p.evaluator.designs(p.space.upper[None, :])[0]
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(design.to_dict()))
    code, out, err = dse_cli("serve", "tests/data/tiny.yaml", "--design", str(path), "--input-len", "128",
                             "--output-len", "16", "--request-rate", "4", "--num-prompts", "50", "--max-batch", "8",
                             "--json")
    assert code == 0, err
    m = json.loads(out)
    for key in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
                "mean_itl_ms", "request_throughput", "output_throughput", "energy_j_per_output_token", "mean_power_w"):
        assert math.isfinite(m[key]) and m[key] > 0
    code, out, err = dse_cli("serve", "tests/data/tiny.yaml", "--design", str(path), "--input-len", "128",
                             "--output-len", "16", "--request-rate", "4", "--num-prompts", "50", "--max-batch", "8")
    assert code == 0, err        # the printed table gives the throughputs' units (the JSON keys stay vLLM's)
    assert "request_throughput (req/s)" in out and "output_throughput (tok/s)" in out
    code, _, err = dse_cli("serve", "tests/data/tiny.yaml", "--design", str(path), "--input-len", "128")
    assert code == 2 and "--dataset" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("coeffs, prompt, output", [((0.002, 2e-6, 0.01, 1e-4), 512, 128),
                                                    ((0.001, 5e-6, 0.02, 5e-4), 256, 64),
                                                    ((0.0, 1e-5, 0.005, 2e-4), 1024, 256)])
def test_steady_state_model_agrees_with_the_simulation(coeffs, prompt, output):
    # mean TTFT within 15 % and mean TPOT within 10 % up to 80 % of the saturation rate (the model gives
    # means; p99 is the simulation's)
    from dse.serving.analytic import max_rate, steady_state
    steps = Steps(*coeffs)
    saturation = max_rate(steps, prompt, output)
    for fraction in (0.2, 0.5, 0.8):
        rate = fraction * saturation
        model = steady_state(steps, rate, prompt, output)
        sim = simulate(synthetic(3000, prompt, output, rate, seed=1), steps).metrics()
        assert model.ttft_s * 1e3 == pytest.approx(sim["mean_ttft_ms"], rel=0.15)
        assert model.tpot_s * 1e3 == pytest.approx(sim["mean_tpot_ms"], rel=0.10)
    assert steady_state(steps, 1.2 * saturation, prompt, output).saturated


class EnergySteps(Steps):
    """`Steps` whose steps also cost joules: prefill e_p per prompt token, decode e_d per sequence."""

    def __init__(self, e_p, e_d, **times):
        super().__init__(**times)
        self.e_p, self.e_d = e_p, e_d

    def prefill_energy(self, batch, context):
        return self.e_p * batch * context

    def decode_energy(self, batch, context):
        return self.e_d * batch


@pytest.mark.parametrize("scheduler", ["static", "continuous", "chunked"])
def test_a_run_uses_the_energy_of_its_steps(scheduler):
    # every prompt token and every decoded token is paid once whatever the batching: 3 requests of
    # 10-token prompts and 4 outputs (the first from the prefill) -> 30 x e_p + 9 x e_d
    reqs = Requests(arrival_s=np.zeros(3), prompt=np.full(3, 10.0), output=np.full(3, 4.0))
    out = simulate(reqs, EnergySteps(2.0, 0.5, b=0.01, c=0.05), scheduler=scheduler, max_batch=2, chunk_tokens=16)
    assert out.energy_j == pytest.approx(30 * 2.0 + 9 * 0.5)
    m = out.metrics()
    assert m["energy_j_per_output_token"] == pytest.approx(out.energy_j / 12)
    assert m["mean_power_w"] == pytest.approx(out.energy_j / m["duration_s"])
    assert "energy_j" not in simulate(reqs, Steps(b=0.01, c=0.05), scheduler=scheduler).metrics()


def test_step_table_energy_is_the_evaluators_at_its_grid():
    import dse
    from dse.serving.steps import StepTable, step_figures

    p = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    design = p.evaluator.designs(p.space.upper[None, :])[0]
    steps = StepTable.build(p, design, 4, 512)
    for phase in ("prefill", "decode"):
        seconds, joules, short = step_figures(p, design, phase, 4, 512)
        assert getattr(steps, phase)(4, 512) == pytest.approx(seconds, rel=1e-9)
        assert getattr(steps, f"{phase}_energy")(4, 512) == pytest.approx(joules, rel=1e-9)
        assert joules > 0 and short == 0


def test_step_table_interpolates_as_scipy_does():
    # StepTable's scalar look-up is scipy's RegularGridInterpolator (linear in log batch and log context,
    # extended beyond the grid), with the same arithmetic: inside, at grid points and outside the grid
    from scipy.interpolate import RegularGridInterpolator

    from dse.serving.steps import StepTable

    rng = np.random.default_rng(3)
    for shape in ((3, 5), (6, 7), (2, 1)):
        batches = np.cumsum(rng.uniform(1, 50, shape[0]))
        contexts = np.cumsum(rng.uniform(100, 5000, shape[1]))
        values = rng.uniform(1e-3, 1.0, shape)
        steps = StepTable(batches, contexts, values, 2 * values, values, values)
        reference = RegularGridInterpolator((np.log(batches), np.log(contexts)), np.log(values), bounds_error=False,
                                            fill_value=None)
        points = [(rng.uniform(0.5, 2 * batches[-1]), rng.uniform(1, 2 * contexts[-1])) for _ in range(300)]
        points += [(float(b), float(c)) for b in batches for c in contexts]
        for b, c in points:
            expected = float(np.exp(reference(np.log([[max(b, 1.0), max(c, 1.0)]]))[0]))
            assert steps.prefill(b, c) == pytest.approx(expected, rel=1e-12)


class AttentionSteps(Steps):
    """Prefill time growing with the square of each prompt's tokens (attention over its own prompt)."""

    def prefill(self, batch, context):
        return 1e-4 * batch * context ** 2


def test_a_chunk_is_a_batch_of_its_prompts_pieces():
    # a 20-token budget takes both 10-token prompts in one chunk: 2 pieces of 10, not one 20-token prompt
    reqs = Requests(arrival_s=np.zeros(2), prompt=np.full(2, 10.0), output=np.full(2, 1.0))
    out = simulate(reqs, AttentionSteps(), scheduler="chunked", chunk_tokens=20)
    assert out.first_token_s.tolist() == pytest.approx([2 * 1e-4 * 100] * 2)


def test_grid_points_beyond_the_memory_are_extrapolated_in_context():
    from dse.serving.steps import extrapolate_short

    contexts = np.array([128.0, 512.0, 2048.0, 8192.0])
    values = np.array([[1.0, 2.0, 8e13, 9e13], [1.0, 2.0, 3.0, 4.0]])      # row 0 runs out of memory at 2,048
    short = np.array([[False, False, True, True], [False, False, False, False]])
    out = extrapolate_short(contexts, values, short)
    slope = 1.0 / 384.0
    assert out[0].tolist() == pytest.approx([1.0, 2.0, 2.0 + slope * 1536, 2.0 + slope * 7680])
    assert out[1].tolist() == values[1].tolist()


def test_steady_state_is_the_full_batch_span():
    # 6 identical requests, 2 in flight: waves of prefill (2 x 0.1 s) and 3 decodes (0.05 s, 2 tokens each)
    reqs = Requests(arrival_s=np.zeros(6), prompt=np.full(6, 10.0), output=np.full(6, 4.0))
    out = simulate(reqs, EnergySteps(1.0, 0.5, b=0.01, c=0.05), max_batch=2, max_concurrency=2)
    state = out.steady_state()
    assert state["output_throughput"] == pytest.approx(24 / out.done_s.max())
    assert state["energy_j_per_output_token"] == pytest.approx(out.energy_j / 24)
    assert state["median_itl_ms"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="continuous or chunked"):
        simulate(reqs, Steps(b=0.01, c=0.05), scheduler="static").steady_state()
