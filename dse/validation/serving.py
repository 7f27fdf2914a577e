"""dse serve's simulation against measured LLM serving: every case of data/serving_cases.yaml.

Each case's GPUs are dse.validation.gpu's (one ``a100-like`` / ``h100-like`` chiplet per GPU, NVLink,
tensor parallel over all, kernels issued ahead as NIM's TensorRT-LLM and vLLM's CUDA graphs do). The
step model gives the affine steps the serving objectives use (dse.serving.analytic: decode of 1 and of
the batch at the mean context, prefill of 1 and 8 prompts); the discrete-event simulation
(dse.serving.simulate) serves the case's requests with them: a closed loop of ``concurrency`` requests
under the case's scheduler (NIM's TensorRT-LLM: chunked prefill with its default token budget) or one
static batch. Compared: mean TTFT and mean ITL in the loop's steady state, or mean end-to-end latency.

``python -m dse.validation.serving [--write docs/serving.md]`` prints (and writes) the table; ``dse fidelity
--suite serving`` prints its cases (`cases`).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .common import DATA, Case, geomean_error, read_data, within, write_command
from .gpu import step_s

CASES = DATA / "serving_cases.yaml"
TITLE = "dse serve's simulation against published serving benchmarks"
#: the markdown file ``--write`` fills by default, and the markers its table stands between
DOC, MARKERS = Path("docs/serving.md"), ("<!-- serving-validation:start -->", "<!-- serving-validation:end -->")
#: per measured figure: the name `dse fidelity` prints
METRICS = {"mean_ttft_ms": "mean TTFT", "mean_itl_ms": "mean ITL", "mean_e2el_ms": "mean end to end"}
#: requests per concurrency slot simulated, and the first rounds left out of the means: the first round
#: starts together (every prompt at once), the loop's steady state staggers them as a benchmark's long
#: run does
ROUNDS = 12
WARMUP_ROUNDS = 2


class CaseSteps:
    """``decode(batch, context)`` and ``prefill(batch, context)`` of a case's GPUs by the step model."""

    def __init__(self, case: dict):
        self.case = {k: case[k] for k in ("id", "model", "gpu", "gpus", "precision")}

    def _at(self, phase: str, batch: float, context: float) -> float:
        return step_s({**self.case, "phase": phase, "batch": max(int(round(batch)), 1),
                        "context": max(int(round(context)), 1)})

    def decode(self, batch: float, context: float) -> float:
        return self._at("decode", batch, context)

    def prefill(self, batch: float, context: float) -> float:
        return self._at("prefill", batch, context)


def simulate_case(case: dict) -> dict:
    """The simulated counterparts of the case's measured figures (ms)."""
    from ..serving.analytic import AffineSteps
    from ..serving.requests import synthetic
    from ..serving.simulate import simulate

    batch = int(case.get("concurrency") or case["batch"])
    steps = AffineSteps.fit(CaseSteps(case), case["input"], case["output"], batch)
    if case["mode"] == "static":
        out = simulate(synthetic(batch, case["input"], case["output"], None), steps, scheduler="static",
                       max_batch=batch).metrics()
        return {"mean_e2el_ms": out["mean_e2el_ms"]}
    out = simulate(synthetic(batch * ROUNDS, case["input"], case["output"], None), steps,
                   scheduler=case.get("scheduler", "continuous"), max_batch=batch, max_concurrency=batch,
                   chunk_tokens=int(case.get("chunk_tokens", 512)))
    steady = slice(batch * WARMUP_ROUNDS, None)          # the first rounds start together, cold
    ttft = (out.first_token_s - out.arrival_s)[steady]
    tpot = ((out.done_s - out.first_token_s) / (out.output - 1))[steady]     # = mean ITL: equal output lengths
    return {"mean_ttft_ms": float(ttft.mean()) * 1e3, "mean_itl_ms": float(tpot.mean()) * 1e3}


def table(cases: list[dict] | None = None) -> list[dict]:
    """One row per measured figure: case, metric, measured, modelled, ratio, source."""
    rows = []
    for case in cases or load_cases():
        model = simulate_case(case)
        for metric, value in model.items():
            rows.append({"id": case["id"], "metric": metric, "measured_ms": float(case[metric]),
                         "modelled_ms": value, "ratio": value / float(case[metric]), "source": case["source"]})
    return rows


def load_cases() -> list[dict]:
    """The measured cases of data/serving_cases.yaml."""
    return read_data(CASES.name)["cases"]


def cases() -> list[Case]:
    """Every measured figure as a `Case` (ms; validation: none was fitted)."""
    return [Case(r["id"], METRICS[r["metric"]], "ms", r["measured_ms"], r["modelled_ms"], "validation", r["source"])
            for r in table()]


def markdown(rows: list[dict]) -> str:
    lines = ["| case | metric | measured [ms] | modelled [ms] | ratio | source |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['metric']} | {r['measured_ms']:.4g} | {r['modelled_ms']:.4g} | "
                     f"{r['ratio']:.2f} | {r['source']} |")
    lines += ["", f"Geometric-mean error {geomean_error(r['ratio'] for r in rows) * 100:.1f} % over {len(rows)} "
              f"figures; {within(r['ratio'] for r in rows)} within 25 %."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()) + "\n", DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
