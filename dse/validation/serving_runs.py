"""dse serve's simulation against measured vLLM serving runs at a request rate: data/serving_rate_cases.yaml.

Each run is served as it was measured: its requests (the run's prompt and output lengths, request by
request) arrive as benchmark_serving.py sends them, every one at once (``rate: inf``) or as a Poisson process
of ``rate`` requests per second (seeded, dse.serving.requests.arrivals); the server is the run's vLLM
scheduler (``scheduler``: ``continuous``, vLLM V0 without chunked prefill, prefilling the waiting prompts
that fit ``max_num_batched_tokens``; ``chunked``, vLLM V1, that many tokens an iteration) with its
``max_num_seqs``, on the case's GPUs by the step model (dse.validation.serving.CaseSteps through
dse.serving.analytic.AffineSteps). Compared: mean TTFT, mean TPOT and mean end-to-end latency, as
benchmark_serving.py computes them (data file header).

The stack: the step model's GPUs issue kernels as CUDA graphs with no host time; vLLM's server adds host
work of two kinds, held in `STACK`: ``intake_s``, the API server's time to take in a request (HTTP, the
prompt's tokenization), one request after another on its event loop, which hands what it has taken in to
the engine process when it has worked off its queue: requests sent while it is busy reach the engine
together at the end of that busy period (a burst of N requests after N x ``intake_s``, a lone request
``intake_s`` after it was sent; vLLM 0.6.0's runs show it: a burst's first prefill takes the first prompts
together, at 3-6 ms a request sent); and
``host_s``, the engine's time a pass outside the GPU's kernels (scheduling, sampling, detokenizing). Both
are properties of the software stack (vLLM 0.6.0), not of a case: `fit_stack` chooses them on the
calibration runs (one server, one model) and every validation run uses them unchanged.

``python -m dse.validation.serving_runs [--write docs/validation.md]`` prints (and writes) the table;
`cases` gives them to `dse fidelity`.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from .common import DATA, Case, geomean_error, read_data, summary_lines, within, write_command
from .serving import CaseSteps

CASES = DATA / "serving_rate_cases.yaml"
TITLE = "dse serve's simulation against measured vLLM serving runs"
DOC, MARKERS = Path("docs/validation.md"), ("<!-- serving-runs table -->", "<!-- /serving-runs table -->")
METRICS = {"mean_ttft_ms": "mean TTFT", "mean_tpot_ms": "mean TPOT", "mean_e2el_ms": "mean end to end"}
#: vLLM 0.6.0's API-server time per request and engine host time per pass (s), chosen by `fit_stack` on
#: the calibration runs (l8-h100-tp1-n10, l8-h100-tp1-n40: Llama-3-8B on one H100)
STACK = {"intake_s": 3.0e-3, "host_s": 0.0}
#: the grids `fit_stack` searches (s)
INTAKE_GRID = np.arange(0.0, 8.01e-3, 0.25e-3)
HOST_GRID = np.arange(0.0, 4.01e-3, 0.25e-3)


class StackSteps:
    """``steps`` (``decode``, ``prefill``) plus the engine's host time ``host_s`` a pass."""

    def __init__(self, steps, host_s: float):
        self.steps, self.host_s = steps, host_s

    def decode(self, batch: float, context: float) -> float:
        return self.steps.decode(batch, context) + self.host_s

    def prefill(self, batch: float, context: float) -> float:
        return self.steps.prefill(batch, context) + self.host_s


def engine_arrivals(sent_s: np.ndarray, intake_s: float) -> np.ndarray:
    """When each request reaches the engine: the API server takes them in one after another in the order
    sent, ``intake_s`` each, and hands each busy period's requests over together at its end."""
    out = np.empty(len(sent_s))
    end, period = -np.inf, []
    for i in np.argsort(sent_s, kind="stable"):
        if float(sent_s[i]) > end:
            out[period] = end
            end, period = float(sent_s[i]), []
        end += intake_s
        period.append(int(i))
    out[period] = end
    return out


def load() -> dict:
    """The data file: ``lens`` (named prompt-length lists) and ``cases``."""
    return read_data(CASES.name)


def case_requests(case: dict, lens: dict, seed: int = 0):
    """The run's requests: its prompts and outputs (an empty output served as one token, the end of
    sequence its prefill produces), sent at once or at ``rate`` per second (Poisson)."""
    from ..serving.requests import Requests, arrivals

    prompt = np.asarray(lens[case["prompts"]] if isinstance(case["prompts"], str) else case["prompts"], float)
    output = np.maximum(np.asarray(case["outputs"], float), 1.0)
    rate = case.get("rate", "inf")
    rate = None if rate in ("inf", None) or not math.isfinite(float(rate)) else float(rate)
    return Requests(arrival_s=arrivals(len(prompt), rate, np.random.default_rng(seed)), prompt=prompt,
                    output=output)


_BASE: dict[str, object] = {}


def base_steps(case: dict, requests):
    """The case's affine steps by the step model (cached per case id: the step model is the slow part)."""
    from ..serving.analytic import AffineSteps

    if case["id"] not in _BASE:
        batch = int(min(len(requests), case.get("max_num_seqs", 256)))
        _BASE[case["id"]] = AffineSteps.fit(CaseSteps(case), float(requests.prompt.mean()),
                                            float(requests.output.mean()), max(batch, 2))
    return _BASE[case["id"]]


def simulate_case(case: dict, lens: dict, stack: dict | None = None) -> dict:
    """The simulated counterparts of the run's figures (ms), computed as benchmark_serving.py does."""
    from ..serving.simulate import simulate

    from ..serving.requests import Requests

    stack = STACK if stack is None else stack
    sent = case_requests(case, lens)
    r = Requests(arrival_s=engine_arrivals(sent.arrival_s, stack["intake_s"]), prompt=sent.prompt,
                 output=sent.output)
    steps = StackSteps(base_steps(case, sent), stack["host_s"])
    out = simulate(r, steps, scheduler=case.get("scheduler", "continuous"), max_batch=int(case["max_num_seqs"]),
                   chunk_tokens=int(case["max_num_batched_tokens"]),
                   prefill_budget=int(case["max_num_batched_tokens"]))
    measured_out = np.asarray(case["outputs"], float)
    ttft = np.where(measured_out > 0, out.first_token_s - sent.arrival_s, 0.0)   # an empty stream counts 0
    e2el = out.done_s - sent.arrival_s
    many = measured_out > 1
    tpot = (e2el[many] - ttft[many]) / (measured_out[many] - 1.0)
    return {"mean_ttft_ms": float(ttft.mean()) * 1e3, "mean_tpot_ms": float(tpot.mean()) * 1e3,
            "mean_e2el_ms": float(e2el.mean()) * 1e3}


def table(data: dict | None = None, stack: dict | None = None) -> list[dict]:
    """One row per measured figure: id, metric, measured, modelled (ms), ratio, set, source."""
    data = data or load()
    rows = []
    for case in data["cases"]:
        model = simulate_case(case, data["lens"], stack)
        for metric, value in model.items():
            rows.append({"id": case["id"], "metric": metric, "measured_ms": float(case[metric]),
                         "modelled_ms": value, "ratio": value / float(case[metric]), "set": case["set"],
                         "source": case["source"].split()[0]})
    return rows


def fit_stack(data: dict | None = None) -> dict:
    """``intake_s`` and ``host_s`` on the grids that minimise the geometric-mean error of the calibration
    runs' figures (the validation runs are not looked at)."""
    data = data or load()
    calibration = {**data, "cases": [c for c in data["cases"] if c["set"] == "calibration"]}
    best = None
    for intake in INTAKE_GRID:
        for host in HOST_GRID:
            stack = {"intake_s": float(intake), "host_s": float(host)}
            err = geomean_error(r["ratio"] for r in table(calibration, stack))
            if best is None or err < best[0]:
                best = (err, stack)
    return best[1]


def cases() -> list[Case]:
    """Every measured figure as a `Case` (ms), in its set."""
    return [Case(r["id"], METRICS[r["metric"]], "ms", r["measured_ms"], r["modelled_ms"], r["set"], r["source"])
            for r in table()]


def errors(rows: list[dict]) -> dict[tuple[str, str], float]:
    """The geometric-mean error per (set, metric) and per set (metric ``all``)."""
    out = {}
    for name in ("calibration", "validation"):
        part = [r for r in rows if r["set"] == name]
        for metric in (*METRICS, "all"):
            sel = [r["ratio"] for r in part if metric in ("all", r["metric"])]
            if sel:
                out[(name, metric)] = geomean_error(sel)
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| run | figure | measured [ms] | modelled [ms] | ratio | set |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {METRICS[r['metric']]} | {r['measured_ms']:.4g} | {r['modelled_ms']:.4g} | "
                     f"{r['ratio']:.2f} | {r['set']} |")
    err = errors(rows)
    lines += ["", f"Stack (fitted on the calibration runs): {STACK['intake_s'] * 1e3:.2f} ms a request taken in, "
              f"{STACK['host_s'] * 1e3:.2f} ms a pass.", ""]
    lines += summary_lines(rows)
    for name in ("calibration", "validation"):
        parts = ", ".join(f"{METRICS[m]} {err[(name, m)]:.1%}" for m in METRICS if (name, m) in err)
        lines.append(f"- {name} by figure: {parts}; "
                     f"{within(r['ratio'] for r in rows if r['set'] == name)} figures within 25 %")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if "--fit" in argv:
        print(fit_stack())
        return 0
    return write_command(__doc__, lambda: markdown(table()) + "\n", DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
