"""dse serve against measured vLLM serving runs (dse.validation.serving_runs, issue 39): the API server's
intake and the continuous scheduler's prefill budget by hand, and the validation errors measured.

Runs: Lambda Labs' vllm-benchmark (github.com/LambdaLabsML/vllm-benchmark, results/prompt_<N>/..., vLLM
0.6.0): Llama-3-8B-Instruct on 1 x H100 (N = 10, 40: calibration; 80) and 1 x A100 (40), Llama-3-70B-
Instruct on 2 x H100 (10, 80), 4 x H100 (40) and 2 x A100 (40), N ShareGPT requests sent at once; also
Llama-3-8B on 1 x A100 at N = 10. Measured when written (docs/validation.md, "Serving against measured vLLM
runs"), validation geometric-mean error: mean TTFT 21.4 %, mean TPOT 11.9 %, mean end to end 5.8 %, all 21
figures 12.8 %; calibration 10.6 %; stack fitted 3.0 ms a request taken in, 0 ms a pass.
"""
from pathlib import Path

import numpy as np
import pytest

from dse.serving.requests import Requests
from dse.serving.simulate import simulate
from dse.validation import serving_runs

ROOT = Path(__file__).resolve().parents[1]


class FlatSteps:
    """A prefill of k prompts of c tokens takes k c ms; a decode 1 ms."""

    def decode(self, batch, context):
        return 1e-3

    def prefill(self, batch, context):
        return batch * context * 1e-3


def test_a_burst_reaches_the_engine_after_its_intake():
    # three sent at 0 (a busy period of 3 x 10 ms), two at 1.0 s and 1.001 s (one period of 20 ms)
    out = serving_runs.engine_arrivals(np.array([0.0, 0.0, 0.0, 1.0, 1.001]), 0.01)
    assert out == pytest.approx([0.03, 0.03, 0.03, 1.02, 1.02])


def test_the_prefill_budget_splits_a_burst_into_whole_prompts():
    r = Requests(arrival_s=np.zeros(3), prompt=np.array([1500.0, 1500.0, 100.0]), output=np.ones(3) * 2)
    # without a budget one prefill of all three (3.1 s); with 2,048 tokens the first prompt alone (1.5 s),
    # then the second and third together (1.6 s more): a prompt is never split without chunking
    whole = simulate(r, FlatSteps(), scheduler="continuous")
    budget = simulate(r, FlatSteps(), scheduler="continuous", prefill_budget=2048)
    assert whole.first_token_s == pytest.approx([3.1, 3.1, 3.1])
    assert budget.first_token_s == pytest.approx([1.5, 3.1, 3.1])


@pytest.fixture(scope="module")
def rows():
    return serving_runs.table()


def test_validation_errors_stay_within_what_was_measured(rows):
    err = serving_runs.errors(rows)
    assert err[("validation", "mean_ttft_ms")] < 0.23          # measured 21.4 %
    # 17.4 % (15.4 % before issue 48 fitted the 7 nm GPU energy per MAC, the A100 now held to its 400 W limit;
    # 11.9 % before the GH100 energy)
    assert err[("validation", "mean_tpot_ms")] < 0.18
    assert err[("validation", "mean_e2el_ms")] < 0.08          # 7.3 % (5.8 % before the GH100 energy)
    assert err[("validation", "all")] < 0.14                   # measured 12.8 %
    assert err[("calibration", "all")] < 0.12                  # measured 10.6 %


def test_the_docs_table_is_the_harness(rows):
    text = (ROOT / "docs" / "validation.md").read_text().split(serving_runs.MARKERS[0], 1)[1]
    text = text.split(serving_runs.MARKERS[1], 1)[0]
    assert text.strip() == serving_runs.markdown(rows).strip()


def test_calibration_is_a_few_runs_and_the_rest_validation():
    cases = serving_runs.load()["cases"]
    assert {c["set"] for c in cases} == {"calibration", "validation"}
    assert sum(c["set"] == "calibration" for c in cases) == 2


def test_a_rate_run_sends_poisson_arrivals():
    case = {"prompts": [100] * 2000, "outputs": [10] * 2000, "rate": 4.0}
    r = serving_runs.case_requests(case, {})
    gaps = np.diff(r.arrival_s)
    assert (gaps >= 0).all() and np.mean(gaps) == pytest.approx(0.25, rel=0.06)
    burst = serving_runs.case_requests({**case, "rate": "inf"}, {})
    assert (burst.arrival_s == 0).all()
