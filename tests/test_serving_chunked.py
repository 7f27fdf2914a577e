"""Chunked prefill's closed form (dse.serving.closed_form.chunked_prefill) against the discrete-event
simulation of the same scheduler on the same affine steps, and its M/D/1 wait against the textbook.

Measured (six settings: prompts 128-4,096, chunk budgets 512-2,048, max_batch 32-256; 2 x 20,000 requests
a point): TPOT p99 within 9 %, mean within 3 %; mean TTFT within 10 %; p99 TTFT -16 % to +13 % at 20 and
50 % of saturation, -26 % to -3 % at 80 % (along the rate +2 % to +9 %: the p99 climbs steeply there);
saturation within 5 % (stable at 95 %, growing at 105 %). docs/serving.md has the table."""
import numba
import numpy as np
import pytest
import yaml

import dse
from dse.serving.analytic import AffineSteps, steady_state
from dse.serving.closed_form.token_backlog import backlog_wait, md1_over
from dse.serving.requests import synthetic
from dse.serving.simulate import simulate

# d1, slope, p0, pk (s), prompt, output, max_batch, chunk tokens; a prefill reads the weights too: p0 is at
# least the pass's fixed part d1 - slope, and a chunk in a mixed pass adds p0 - (d1 - slope) + pk c / P
# (dse.serving.steps.mixed_step; the chunk's fixed parts 2, 1 and 5 ms)
SETTINGS = [(0.010, 1e-4, 0.0119, 0.001, 512, 128, 256, 2048),         # prompts share an iteration
            (0.020, 5e-4, 0.0205, 0.0013, 256, 64, 256, 512),           # two prompts overflow a chunk
            (0.015, 1e-4, 0.0199, 0.030, 4096, 128, 32, 512)]           # a prompt spans eight iterations


def _model(setting, rate):
    d1, slope, p0, pk, prompt, output, batch, chunk = setting
    return steady_state(AffineSteps(d1, slope, p0, pk, prompt), rate, prompt, output, batch, scheduler="chunked",
                        chunk_tokens=chunk)


def _simulated(setting, rate, n=10000, seed=2):
    d1, slope, p0, pk, prompt, output, batch, chunk = setting
    out = simulate(synthetic(n, prompt, output, rate, seed=seed), AffineSteps(d1, slope, p0, pk, prompt),
                   scheduler="chunked", max_batch=batch, chunk_tokens=chunk)
    ttft = (out.first_token_s - out.arrival_s)[n // 10:]          # past the empty start
    tpot = ((out.done_s - out.first_token_s) / (output - 1))[n // 10:]
    return ttft, tpot


@pytest.mark.parametrize("setting, requests", list(zip(SETTINGS, [(10000, 20000), (10000, 20000), (4000, 8000)])))
def test_chunked_closed_form_agrees_with_the_simulation(setting, requests):
    # requests simulated below and at 80 % of saturation (the tails are noisy there; the long prompts'
    # iterations cost the simulation time)
    saturation = _model(setting, 1.0).saturation_req_s
    for f in (0.2, 0.5, 0.8):
        model = _model(setting, f * saturation)
        ttft, tpot = _simulated(setting, f * saturation, n=requests[f == 0.8])
        assert model.ttft_s == pytest.approx(ttft.mean(), rel=0.12), f
        assert model.tpot_s == pytest.approx(tpot.mean(), rel=0.05), f
        assert model.tpot_p99_s == pytest.approx(np.percentile(tpot, 99), rel=0.12), f
        if f < 0.8:
            assert model.ttft_p99_s == pytest.approx(np.percentile(ttft, 99), rel=0.20), f
        else:                           # steep in the rate: where the closed form reaches the simulated p99
            target, lo, hi = np.percentile(ttft, 99), 0.0, saturation * (1 - 1e-6)
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if _model(setting, mid).ttft_p99_s < target else (lo, mid)
            assert lo == pytest.approx(f * saturation, rel=0.10)


@pytest.mark.parametrize("setting", SETTINGS[1:])
def test_chunked_saturation_is_where_the_simulated_queue_stops_settling(setting):
    saturation = _model(setting, 1.0).saturation_req_s
    below, _ = _simulated(setting, 0.95 * saturation, n=12000, seed=7)
    above, _ = _simulated(setting, 1.05 * saturation, n=12000, seed=7)
    assert below[-1000:].mean() < 1.5 * below[:4000].mean()          # settles
    assert above[-1000:].mean() > 2.0 * above[:4000].mean()          # grows without bound
    assert _model(setting, 1.05 * saturation).saturated


@numba.njit(cache=True)
def _lindley_over(rate, service, u, n, seed):
    """P(W > u) over n customers of the Lindley recursion W' = max(W + S - A, 0), A ~ Exp(rate)."""
    np.random.seed(seed)
    w, count = 0.0, 0
    for _ in range(n):
        count += w > u
        w = max(w + service - np.random.exponential(1.0 / rate), 0.0)
    return count / n


def test_md1_wait_matches_the_pollaczek_khinchine_mean_and_a_lindley_recursion():
    # Erlang's exact M/D/1 waiting-time distribution (with the Cramer-Lundberg tail past a few services):
    # its mean is Pollaczek-Khinchine's rho S / (2 (1 - rho)) (a textbook formula), and its distribution
    # that of the Lindley recursion with exponential interarrival times (4 million customers)
    for rho in (0.3, 0.6, 0.85):
        rate, service = rho, 1.0
        C, theta = backlog_wait(rate, service)
        grid = np.linspace(0.0, 80.0, 80001)
        over = np.array([md1_over(u, rate, service, C, theta) for u in grid])
        mean = float(np.sum((over[1:] + over[:-1]) / 2) * (grid[1] - grid[0]))
        assert mean == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.01)
        for u in (0.0, 0.5, 2.0, 5.0, 8.0):
            assert md1_over(u, rate, service, C, theta) == pytest.approx(
                _lindley_over(rate, service, u, 4_000_000, 1), abs=0.004), (rho, u)


def test_a_chunked_serving_study_evaluates_with_the_chunked_closed_form(tmp_path):
    data = yaml.safe_load(open("studies/serve_llama2_7b.yaml"))
    data["serving"].update(scheduler="chunked", chunk_tokens=1024)
    data["search"].update(population=8, generations=2)
    path = tmp_path / "chunked.yaml"
    path.write_text(yaml.safe_dump(data))
    prepared = dse.prepare(dse.load_study(path))
    ev = prepared.evaluator
    X = np.random.default_rng(0).integers(prepared.space.lower, prepared.space.upper + 1, size=(24, prepared.space.n_var))
    df = ev(X)
    served = df.index[np.isfinite(df["tpot_p99_s"])]
    assert len(served) > 0
    i = int(served[0])
    steps, n_max, replicas = ev.steps_of(ev.designs(X[i:i + 1])[0])
    sv = prepared.study.serving
    s = steady_state(steps, sv.request_rate, sv.input_len, sv.output_len, sv.max_batch,
                     n_max * (sv.input_len + sv.output_len), sv.slo.ttft_ms / 1e3, sv.slo.tpot_ms / 1e3,
                     scheduler="chunked", chunk_tokens=1024)
    assert df.loc[i, "ttft_p99_s"] == pytest.approx(s.ttft_p99_s, rel=1e-9)
    assert df.loc[i, "saturation_req_s"] == pytest.approx(s.saturation_req_s * replicas, rel=1e-9)
    continuous = steady_state(steps, sv.request_rate, sv.input_len, sv.output_len, sv.max_batch,
                              n_max * (sv.input_len + sv.output_len))
    assert s.ttft_p99_s != continuous.ttft_p99_s                       # the scheduler reaches the objectives
