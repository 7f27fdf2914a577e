"""Cost of the serving objectives (issue 19): designs/s of studies/serve_llama2_7b.yaml's evaluator (the
decode step with every metric and fault tolerance, three more steps for the affine fit, the closed form)
against a plain decode-step evaluation of the same designs in the same run (goal: at most 2x its time),
and the discrete-event simulation's time for 10,000 requests (goal: under 2 s). Three studies: the bundled
serving study (a 4-unit model, where a step evaluation is cheap and the three extra steps dominate; also
under chunked prefill, whose closed form, dse.serving.closed_form.chunked, costs more), the quickstart's Mixtral
package served and issue 7's per-layer benchmark package served (fault tolerance the bulk of a step, as
in the studies that take time)."""
import time
from pathlib import Path

import numpy as np
import yaml

import dse
from dse.serving.analytic import AffineSteps
from dse.serving.requests import synthetic
from dse.serving.simulate import simulate
from dse.system.prepare import prepare_step

POPULATION = 2000
ROUNDS = 5                                         # the best of five interleaved runs each


def seconds(evaluator, X) -> float:
    """CPU seconds of one evaluation of the population (every thread's)."""
    start = time.process_time()
    evaluator.metrics_array(X)
    return time.process_time() - start


def compare(label: str, study) -> None:
    serving = dse.prepare(study)
    plain = prepare_step(study.model_copy(update={"workload": study.workload.model_copy(update={"phase": "decode"}),
                                                  "serving": None}))
    X = np.random.default_rng(0).integers(serving.space.lower, serving.space.upper + 1,
                                          size=(POPULATION, serving.space.n_var))
    plain.evaluator.metrics_array(X[:4])             # compile or load the Numba caches
    serving.evaluator.metrics_array(X[:4])
    t_plain = t_serving = np.inf
    for _ in range(ROUNDS):                          # interleaved: a slow spell of this machine hits both alike
        t_plain = min(t_plain, seconds(plain.evaluator, X))
        t_serving = min(t_serving, seconds(serving.evaluator, X))
    print(f"{label}: plain decode step {POPULATION / t_plain:,.0f} designs/s; with the serving objectives "
          f"{POPULATION / t_serving:,.0f} designs/s ({t_serving / t_plain:.2f}x the plain step's time)")


def main() -> None:
    compare("studies/serve_llama2_7b.yaml (4 units, up to 8 chiplets)", dse.load_study("studies/serve_llama2_7b.yaml"))
    data = yaml.safe_load(Path("studies/serve_llama2_7b.yaml").read_text())
    data["serving"].update(scheduler="chunked", chunk_tokens=1024)
    compare("the same under chunked prefill (1,024 tokens an iteration)", dse.Study.from_dict(data))
    data = yaml.safe_load(Path("studies/quickstart.yaml").read_text())
    data["workload"] = {k: v for k, v in data["workload"].items() if k not in ("batch", "context")}
    data["workload"]["phase"] = "serve"
    data["serving"] = {"input_len": 1024, "output_len": 256, "request_rate": 2.0, "max_batch": 16}
    data["search"]["objectives"] = ["max_rate_at_slo", "cost"]
    compare("the quickstart's Mixtral-8x7B package as a server (up to 16 chiplets)", dse.Study.from_dict(data))
    data = yaml.safe_load(Path(__file__).with_name("evaluate_mixtral.yaml").read_text())
    data["workload"] = {k: v for k, v in data["workload"].items() if k not in ("batch", "context")}
    data["workload"]["phase"] = "serve"
    data["serving"] = {"input_len": 2048, "output_len": 4096, "request_rate": 2.0, "max_batch": 32}
    data["search"]["objectives"] = ["max_rate_at_slo", "cost"]
    compare("issue 7's benchmark package (Mixtral per layer, 290 units, 16 chiplets) as a server",
            dse.Study.from_dict(data))

    steps = AffineSteps(d1=0.01, slope=1e-4, p0=0.002, pk=0.001, prompt=512)
    reqs = synthetic(10_000, 512, 128, 40.0, seed=0)
    start = time.process_time()
    out = simulate(reqs, steps, max_batch=256).metrics()
    print(f"discrete-event simulation of 10,000 requests (continuous batching, 40 req/s): "
          f"{time.process_time() - start:.2f} s (p99 TTFT {out['p99_ttft_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
