"""dse serve's simulation against measured LLM serving: every case of tools/data/serving_cases.yaml.

Each case's GPUs are tools/gpu_validation.py's (one ``a100-like`` / ``h100-like`` chiplet per GPU, NVLink,
tensor parallel over all, kernels issued ahead as NIM's TensorRT-LLM and vLLM's CUDA graphs do). The
step model gives the affine steps the serving objectives use (dse.serving.analytic: decode of 1 and of
the batch at the mean context, prefill of 1 and 8 prompts); the discrete-event simulation
(dse.serving.simulate) serves the case's requests with them: a closed loop of ``concurrency`` requests
under the case's scheduler (NIM's TensorRT-LLM: chunked prefill with its default token budget) or one
static batch. Compared: mean TTFT and mean ITL in the loop's steady state, or mean end-to-end latency.

``python tools/serving_validation.py [--write docs/serving_validation.md]`` prints (and writes) the table.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_validation import _step_s  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tools" / "data" / "serving_cases.yaml"
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
        return _step_s({**self.case, "phase": phase, "batch": max(int(round(batch)), 1),
                        "context": max(int(round(context)), 1)})

    def decode(self, batch: float, context: float) -> float:
        return self._at("decode", batch, context)

    def prefill(self, batch: float, context: float) -> float:
        return self._at("prefill", batch, context)


def simulate_case(case: dict) -> dict:
    """The simulated counterparts of the case's measured figures (ms)."""
    from dse.serving.analytic import AffineSteps
    from dse.serving.requests import synthetic
    from dse.serving.simulate import simulate

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
    for case in cases or yaml.safe_load(CASES.read_text())["cases"]:
        model = simulate_case(case)
        for metric, value in model.items():
            rows.append({"id": case["id"], "metric": metric, "measured_ms": float(case[metric]),
                         "modelled_ms": value, "ratio": value / float(case[metric]), "source": case["source"]})
    return rows


def geomean_error(rows: list[dict]) -> float:
    return math.exp(sum(abs(math.log(r["ratio"])) for r in rows) / len(rows)) - 1.0


def markdown(rows: list[dict]) -> str:
    lines = ["| case | metric | measured [ms] | modelled [ms] | ratio | source |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['metric']} | {r['measured_ms']:.4g} | {r['modelled_ms']:.4g} | "
                     f"{r['ratio']:.2f} | {r['source']} |")
    within = sum(abs(r["ratio"] - 1.0) <= 0.25 for r in rows)
    lines += ["", f"Geometric-mean error {geomean_error(rows) * 100:.1f} % over {len(rows)} figures; "
              f"{within} within 25 %."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", help="also write the table into this markdown file (between its markers)")
    args = parser.parse_args(argv)
    text = markdown(table())
    print(text)
    if args.write:
        path = Path(args.write)
        start, end = "<!-- serving-validation:start -->", "<!-- serving-validation:end -->"
        doc = path.read_text()
        head, _, rest = doc.partition(start)
        _, _, tail = rest.partition(end)
        path.write_text(f"{head}{start}\n{text}\n{end}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
