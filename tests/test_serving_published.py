"""dse serve's simulation on the step model against published serving measurements (sources in
dse/validation/data/serving_cases.yaml: NVIDIA NIM 1.8 Llama-3.3-70B fp8 on 2 x H100 at concurrency 1-50; vLLM's
latency benchmark, Llama-3.1-8B static batch of 8 on A100 and H100). Table in docs/serving.md."""
import pytest

from dse.validation import serving as serving_validation


@pytest.fixture(scope="module")
def rows():
    return serving_validation.table()


def test_every_published_serving_figure_within_25_percent(rows):
    assert len(rows) == 12
    for r in rows:
        assert r["modelled_ms"] == pytest.approx(r["measured_ms"], rel=0.25), (r["id"], r["metric"], r["ratio"])


def test_the_closed_loop_counts_latency_from_when_a_request_is_sent():
    # vLLM benchmark_serving --max-concurrency: a request waiting for a slot is not yet sent, so with one
    # request at a time every TTFT is one prefill, however many wait behind it
    from dse.serving.analytic import AffineSteps
    from dse.serving.requests import synthetic
    from dse.serving.simulate import simulate
    steps = AffineSteps(d1=0.01, slope=0.0, p0=0.0, pk=0.05, prompt=100)
    out = simulate(synthetic(20, 100, 10, None), steps, max_batch=8, max_concurrency=1).metrics()
    assert out["mean_ttft_ms"] == pytest.approx(50.0) and out["p99_ttft_ms"] == pytest.approx(50.0)
    assert out["mean_e2el_ms"] == pytest.approx(50.0 + 9 * 10.0)
