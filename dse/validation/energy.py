"""The energy model and the serving simulation against measured GPU serving runs: every case of
data/energy_cases.yaml, and Splitwise's A100 power.

A case is one of ML.ENERGY's H100 serving runs (vLLM, ``batch`` sequences in flight, tensor parallel over
``gpus``), described as dse.validation.gpu describes a GPU server (one ``h100-like`` chiplet per GPU,
the GPUs all-to-all over NVLink) and served as ML.ENERGY served it (`served`: dse.serving's simulation,
its steady state). Four figures each: the run's average power of all its GPUs, energy per output token,
median inter-token latency and output throughput. `modelled` is the bare decode step (its power: energy
per step over the step's latency).

``calibrate()`` fits the node's ``active_pj_per_mm2_cycle`` (arch/data/technology.yaml) on the calibration
case's power with scipy's brentq; ``python -m dse.validation.energy [--write docs/validation.md]`` prints
(and writes) the table of every case and Splitwise's A100 power check; ``dse fidelity --suite energy``
prints its cases (`cases`: four figures a run).

Speed: the runs of one model on one server share most of their step tables' grid points (the grid is
fixed but for its largest batch and context), so each point is evaluated once per process
(`shared_step_figures`) and each run simulated on its own table; a run takes about a second.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import gpu
from .common import DATA, Case, read_data, summary_lines, geomean_error, within, write_command

CASES = DATA / "energy_cases.yaml"
TITLE = "power, energy and latency of ML.ENERGY's H100 serving runs"
SOURCE = "ml.energy-v3"
#: the markdown file ``--write`` fills by default, and the markers its tables stand between
DOC, MARKERS = Path("docs/validation.md"), ("<!-- energy table -->", "<!-- /energy table -->")
#: LM Arena chat prompts' length is not in the published records: an assumption of the comparison, not a
#: fitted value (at 128 or 1,024 tokens the modelled power moves by a few per cent: docs/validation.md).
PROMPT_TOKENS = 256
#: vLLM 0.11 runs the attention core as one FlashAttention kernel (workload.attention: fused)
ATTENTION = "fused"
#: vLLM V1's default token budget of an iteration (max_num_batched_tokens); requests simulated per sequence
#: in flight, for a steady state long against the ramp up and the drain
CHUNK_TOKENS, REQUESTS_PER_SEQUENCE = 8192, 8


@lru_cache(maxsize=1)
def _data() -> dict:
    return read_data(CASES.name)


def load_cases() -> list[dict]:
    """The measured runs of data/energy_cases.yaml."""
    return [dict(c) for c in _data()["cases"]]


def gpu_case(case: dict, prompt_tokens: int) -> dict:
    """A run as a decode case of dse.validation.gpu (its mean context: the prompt and half the output)."""
    return {"id": case["id"], "model": case["model"], "gpu": "h100", "gpus": int(case["gpus"]),
            "phase": "decode", "batch": int(case["batch"]), "context": prompt_tokens + int(case["output"]) // 2,
            "precision": "bf16", "stack": "graphs", "attention": ATTENTION}


def _prepared(case: dict, active_pj: float | None, prompt_tokens: int):
    """(prepared study, design) of a case; ``active_pj`` overrides the node's active energy per mm² per cycle."""
    from ..system.prepare import prepare

    gcase = gpu_case(case, prompt_tokens)
    technology = None if active_pj is None else {"active_pj_per_mm2_cycle": active_pj}
    prepared = prepare(gpu.case_study(gcase, technology))
    return prepared, gpu.case_design(gcase, prepared)


def modelled(case: dict, active_pj: float | None = None, prompt_tokens: int = PROMPT_TOKENS) -> dict:
    """The modelled power (W, all GPUs) and step latency (s) of a case's bare decode step."""
    prepared, design = _prepared(case, active_pj, prompt_tokens)
    row = prepared.evaluator.evaluate_designs([design], with_faults=False).iloc[0]
    latency = float(row["latency_s"])
    return {"mean_power_w": float(row["energy_j_per_token"]) * prepared.tables.tokens_per_step / latency,
            "latency_s": latency}


def output_lengths(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` output lengths drawn from a model's published histogram (uniform within a bin)."""
    hist = _data()["output_lengths"][name]
    edges, counts = np.asarray(hist["bins"], float), np.asarray(hist["counts"], float)
    bins = rng.choice(len(counts), size=n, p=counts / counts.sum())
    return np.maximum(np.round(rng.uniform(edges[bins], edges[bins + 1])), 1.0)


def served(case: dict, active_pj: float | None = None, prompt_tokens: int = PROMPT_TOKENS, seed: int = 0) -> dict:
    """The run served as ML.ENERGY served it (dse.serving): requests queued at once, ``batch`` in flight,
    chunked prefill with vLLM's 8,192-token budget, FlashAttention (``ATTENTION``: vLLM's attention backend
    runs the core as one kernel), outputs drawn from the model's histogram; its steady
    state's power (W, all GPUs), energy per output token (J), median inter-token latency (ms) and output
    throughput (tokens/s) (dse.serving.simulate.Outcome.steady_state)."""
    from ..serving import Requests, StepTable, simulate

    prepared, design = _prepared(case, active_pj, prompt_tokens)
    batch = int(case["batch"])
    n = max(REQUESTS_PER_SEQUENCE * batch, 256)
    output = output_lengths(case["lengths"], n, np.random.default_rng(seed))
    requests = Requests(arrival_s=np.zeros(n), prompt=np.full(n, float(prompt_tokens)), output=output)
    steps = StepTable.build(prepared, design, batch, int(prompt_tokens + output.max()), point=shared_step_figures)
    state = simulate(requests, steps, scheduler="chunked", max_batch=batch, max_concurrency=batch,
                     chunk_tokens=CHUNK_TOKENS).steady_state()
    return {"mean_power_w": state["mean_power_w"], "energy_j_per_token": state["energy_j_per_output_token"],
            "itl_ms": state["median_itl_ms"], "output_tok_s": state["output_throughput"]}


def calibrate(cases: list[dict] | None = None) -> float:
    """The active energy per mm² per cycle (pJ) at which the calibration case's power is the measured one."""
    from scipy.optimize import brentq

    case = next(c for c in (cases or load_cases()) if c["set"] == "calibration")
    return brentq(lambda pj: served(case, pj)["mean_power_w"] - float(case["mean_power_w"]), 100.0, 1000.0, xtol=0.05)


FIGURES = ("mean_power_w", "energy_j_per_token", "itl_ms", "output_tok_s")


def table(cases: list[dict] | None = None) -> list[dict]:
    """Per case: measured and modelled figures (``modelled_<figure>``), ``ratio_<figure>``; ``ratio`` is
    the power's."""
    rows = []
    for case in cases or load_cases():
        m = served(case)
        row = {**case, **{f"modelled_{k}": m[k] for k in FIGURES},
               **{f"ratio_{k}": m[k] / float(case[k]) for k in FIGURES}}
        rows.append({**row, "ratio": row["ratio_mean_power_w"]})
    return rows


#: Splitwise's DGX-A100 Llama-2-70B requests of 512 prompt and 128 output tokens, one at a time (artifact
#: Mutinifni/splitwise-sim data/perf_model.csv, commit 3780880, median average_power per tensor-parallel
#: degree): the power column is a fraction, of the A100's 400 W TDP we assume (its peak_power column tops
#: out at 1.0 in long prefills, where an A100 reaches its power limit). 128 decode steps of 45-60 ms make
#: 95 % of each request, so the modelled figure is the decode step's power (the eager stack's host binds
#: at 8 GPUs, leaving the GPUs idle part of each step).
SPLITWISE_A100_POWER = {2: 0.736, 4: 0.594, 8: 0.435}
A100_TDP_W = 400.0


def splitwise_a100() -> list[dict]:
    """Per tensor-parallel degree: measured and modelled power per GPU (W) of Splitwise's A100 requests."""
    from ..system.prepare import prepare

    rows = []
    for gpus, fraction in SPLITWISE_A100_POWER.items():
        case = {"id": f"sw-a100-tp{gpus}-power", "model": "llama-2-70b", "gpu": "a100", "gpus": gpus,
                "phase": "decode", "batch": 1, "context": 512 + 64, "precision": "fp16", "stack": "eager"}
        prepared = prepare(gpu.case_study(case))
        row = prepared.evaluator.evaluate_designs([gpu.case_design(case, prepared)],
                                                  with_faults=False).iloc[0]
        watts = float(row["energy_j_per_token"]) / float(row["latency_s"]) / gpus
        rows.append({"gpus": gpus, "measured_w": fraction * A100_TDP_W, "modelled_w": watts,
                     "ratio": watts / (fraction * A100_TDP_W)})
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| id | set | model | GPUs | batch | W | model | J/token | model | ITL ms | model | tokens/s | model |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    body = [f"| {r['id']} | {r['set']} | {r['model']} | {r['gpus']} x H100 | {r['batch']} | {r['mean_power_w']:.0f} | "
            f"{r['ratio_mean_power_w']:.2f} | {r['energy_j_per_token']:.3g} | {r['ratio_energy_j_per_token']:.2f} | "
            f"{r['itl_ms']:.4g} | {r['ratio_itl_ms']:.2f} | {r['output_tok_s']:.0f} | {r['ratio_output_tok_s']:.2f} |"
            for r in rows]
    validation = [r for r in rows if r["set"] == "validation"]
    summary = [f"- validation, {label}: geometric-mean error "
               f"{geomean_error(r[f'ratio_{k}'] for r in validation):.1%}, "
               f"{min(r[f'ratio_{k}'] for r in validation):.2f}-{max(r[f'ratio_{k}'] for r in validation):.2f}, "
               f"{within(r[f'ratio_{k}'] for r in validation)} of {len(validation)} within 25 %"
               for k, label in zip(FIGURES, ("power", "energy per output token", "median ITL", "output throughput"))]
    return ("Measured figures and the model's ratio to them (model / measured):\n\n" + "\n".join([head] + body)
            + "\n\n" + "\n".join(summary_lines(rows) + summary) + "\n")


def splitwise_markdown(rows: list[dict]) -> str:
    """The table of `splitwise_a100`'s rows."""
    return ("Splitwise DGX-A100, Llama-2-70B, one request at a time (power per GPU; 400 W TDP assumed):\n\n"
            "| GPUs | measured W | modelled W | ratio |\n|---|---|---|---|\n"
            + "".join(f"| {r['gpus']} | {r['measured_w']:.0f} | {r['modelled_w']:.0f} | {r['ratio']:.2f} |\n"
                      for r in rows))


#: per figure of a run: the name `dse fidelity` prints and its unit
METRICS = {"mean_power_w": ("power", "W"), "energy_j_per_token": ("energy per output token", "J"),
           "itl_ms": ("median ITL", "ms"), "output_tok_s": ("output throughput", "tokens/s")}


def cases() -> list[Case]:
    """Every run's four figures (`METRICS`) as `Case`s, the run's set for each, and Splitwise's A100
    power per GPU (validation)."""
    out, rows = [], table()
    for k in FIGURES:
        out += [Case(r["id"], METRICS[k][0], METRICS[k][1], float(r[k]), r[f"modelled_{k}"], r["set"], SOURCE)
                for r in rows]
    out += [Case(f"sw-a100-tp{r['gpus']}-power", "power per GPU", "W", r["measured_w"], r["modelled_w"],
                 "validation", "splitwise") for r in splitwise_a100()]
    return out


_STEP_FIGURES: dict = {}


def shared_step_figures(prepared, design, phase: str, batch: int, context: int) -> tuple:
    """dse.serving.step_figures, each point evaluated once per process: runs of the same model on the
    same server (their studies equal but for the workload's batch and context, which a point sets) share
    their step tables' points."""
    from ..serving import step_figures

    workload = prepared.study.workload.model_copy(update={"phase": phase, "batch": int(batch), "context": int(context)})
    key = (prepared.study.model_copy(update={"workload": workload}).model_dump_json(), repr(design))
    if key not in _STEP_FIGURES:
        _STEP_FIGURES[key] = step_figures(prepared, design, phase, batch, context)
    return _STEP_FIGURES[key]


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()) + "\n" + splitwise_markdown(splitwise_a100()), DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
