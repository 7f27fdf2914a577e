"""dse serve against measured vLLM v0.15.1 servers under Poisson load: data/serve_vllm_*.csv.

The calibration half of the inference-sim project's sim-to-real runs (data/serve_vllm_README.md says how
they were made; copied unchanged from shared/reference/serve_vllm/: ``serve_vllm_runs.csv`` one row per
run, ``serve_vllm_stages.csv`` one row per load stage). Every stage is served as it was measured:

- **requests**: N = rate x duration exponential gaps rescaled to sum to the stage's duration (Poisson
  conditioned on N, seeded); prompt = a shared prefix of P tokens and a question of Q tokens, outputs of
  exactly the workload's length (``ignore_eos``); 100 distinct prompts (10 prefixes x 10 questions) shuffled
  once and cycled, request n of a stage using prompt n mod 100 (`WORKLOADS`, the README's table);
- **stages** one after another on the same server (its prefix cache kept), each starting when the one
  before has finished;
- **server**: vLLM V1's chunked prefill with ``--max-num-batched-tokens`` and ``--max-num-seqs`` from the
  run, prefix caching on, the KV cache vLLM allocates at ``--gpu-memory-utilization``
  (dse.serving.kv_cache.capacity_tokens), ``dp`` copies of the server each taking every dp-th request
  (a mixture of experts' copies stepping together, each step the slowest copy's: vLLM's data-parallel
  ranks, dse.serving.data_parallel); `serve_run`'s ``expert_group`` (off) makes their expert layers one
  tensor-parallel group over all dp x tp GPUs running every rank's tokens (`expert_group_steps`: vLLM's
  default, but on run 32 it halves the modelled ITL against a measured ITL that did not fall, docs/serving.md);
  the GPUs as dse.validation.gpu models them (one ``h100-like`` / ``a100-like`` chiplet per GPU, NVLink,
  tensor parallel over all; FlashAttention as vLLM runs it; vLLM's decode a full CUDA graph, `STACK`),
  their steps a dse.serving.StepTable;
- **the request's path** around the engine: dse.serving.request_path.VLLM_V1 (fitted here: ``host_s`` by
  `fit_path`, ``sequence_s``, the host's work per running sequence per step, by `fit_sequence`);
- **the server's start-up** (`COLD_START_S`): a model with routed experts pays a one-off stall on the
  server's first step (the first stage only).

Compared per stage: mean, p90 and p99 TTFT, mean ITL and mean, p90 and p99 E2E. ITL is the client's
(`client_itl`): (E2E - TTFT) over the tokens the client counts less one, where the client counts the
streamed text's tokens again (stages.csv's ``output_len_measured_mean``: 236-250 for 247-251 tokens
served, the tokeniser's merges of the random text), not the ``max_tokens`` the server decoded; the
stages' ITL column is that formula over their own means to five digits, every stage.

``python -m dse.validation.serving_vllm [--write docs/validation.md]`` prints (and writes) the table;
`cases` gives them to ``dse fidelity --suite serving-vllm``; ``--stages K`` keeps every K-th stage (a
quick look), ``--fit`` refits the request path's terms (``sequence_s``, then ``host_s`` with VLLM_V1's
``sequence_s``: commit the first before trusting the second).
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .common import DATA, Case, geomean_error, summary_lines, within, write_command

TITLE = "dse serve against measured vLLM v0.15.1 servers under Poisson load"
SOURCE = "inference-sim"
RUNS, STAGES = DATA / "serve_vllm_runs.csv", DATA / "serve_vllm_stages.csv"
DOC, MARKERS = Path("docs/validation.md"), ("<!-- serving-vllm table -->", "<!-- /serving-vllm table -->")

#: the README's workloads: shared prefix P, question Q, output tokens
WORKLOADS = {"general": (100, 447, 248), "general-lite": (100, 447, 248), "codegen": (100, 466, 247),
             "roleplay": (150, 600, 251), "reasoning": (100, 934, 1448), "reasoning-lite": (100, 934, 1448)}
#: distinct prompts (prefixes x questions), cycled
PREFIXES, QUESTIONS = 10, 10
#: the README's GPUs -> dse.validation.gpu's
GPUS = {"H100": "h100", "A100-80GB": "a100", "A100": "a100", "H200": "h200"}
#: the runs' checkpoints -> bundled presets (same architecture; Llama-3.1-8B is Llama-3-8B's with longer RoPE)
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b", "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
          "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b"}
#: figures per stage: column of the stages file -> printed name
FIGURES = {"ttft_mean_ms": "mean TTFT", "ttft_p90_ms": "p90 TTFT", "ttft_p99_ms": "p99 TTFT",
           "itl_mean_ms": "mean ITL", "e2e_mean_ms": "mean E2E", "e2e_p90_ms": "p90 E2E", "e2e_p99_ms": "p99 E2E"}
#: the figures the issue's targets are on (geometric mean over the stages)
HEADLINE = ("ttft_mean_ms", "itl_mean_ms", "e2e_mean_ms")
#: vLLM's attention for the step model: FlashAttention, one kernel
ATTENTION = "fused"
#: vLLM's software stack for the step model (dse.validation.gpu.STACKS: a decode step replayed as one CUDA
#: graph, each kernel at its in-graph time; issue 50: "graphs", the presets' kernels timed alone, before)
STACK = "vllm"
SEED = 0
#: seconds a server of a model with routed experts stalls on its first step, once (vLLM runs
#: mixture-of-experts layers through Triton's fused-MoE kernels, compiled on their first use for each
#: batch shape, outside the CUDA graphs captured at start-up). Not fitted: Lambda's vLLM benchmark runs
#: of Mixtral-8x7B (docs/validation.md, "Serving against measured vLLM runs": their first prefill takes
#: 3.5 s). Range 0-10 s. What the calibration runs show agrees: the stage-0 mean TTFT of every Mixtral
#: run on two H100s is 5-14 ms above the model's without it (a mean above the p90, p99 of 150-850 ms),
#: what a stall of 3-4 s at 5-8 requests/s adds; dense models' first stages show no such tail.
COLD_START_S = 3.5


def preset(model_hf_id: str) -> str:
    """The bundled preset of a run's checkpoint (`MODELS`, else its name lower-cased without the
    organisation and the -Instruct / -hf / -chat / -v0.1 suffixes, Llama-3.x as Llama-3)."""
    if model_hf_id in MODELS:
        return MODELS[model_hf_id]
    import workloads

    name = model_hf_id.split("/")[-1].lower()
    for tail in ("-instruct-hf", "-chat-hf", "-hf", "-instruct", "-chat", "-v0.1", "-instruct-v0.1"):
        name = name[: -len(tail)] if name.endswith(tail) else name
    for old, new in (("llama-3.1-", "llama-3-"), ("llama-3.3-", "llama-3-"), ("meta-llama-3-", "llama-3-")):
        name = name.replace(old, new)
    if name not in workloads.list_presets():
        raise ValueError(f"{model_hf_id}: no bundled preset (tried {name!r}); add it to serving_vllm.MODELS")
    return name


@lru_cache(maxsize=1)
def load() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, stages) as the CSVs hold them."""
    return pd.read_csv(RUNS), pd.read_csv(STAGES)


def run_row(runs: pd.DataFrame, experiment_id: str) -> dict:
    return runs[runs["experiment_id"] == experiment_id].iloc[0].to_dict()


def gpu_case(run: dict, gpus: int | None = None) -> dict:
    """The run's GPUs as a dse.validation.gpu case (one server copy: ``tp`` GPUs; or ``gpus``)."""
    return {"id": run["experiment_id"], "model": preset(run["model_hf_id"]), "gpu": GPUS[run["gpu"]],
            "gpus": int(run["tp"]) if gpus is None else int(gpus), "phase": "decode", "batch": 1, "context": 512,
            "precision": "bf16",
            "stack": STACK, "attention": ATTENTION}


def utilization(run: dict) -> float:
    value = run.get("gpu_mem_util")
    return 0.9 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def dp(run: dict) -> int:
    value = run.get("dp")
    return 1 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


_SERVERS: dict = {}


def server(run: dict, gpus: int | None = None):
    """(StepTable, KV cache tokens) of one copy of the run's server, tensor parallel over ``tp`` GPUs (or
    ``gpus``: `expert_group`) (cached per model, GPU, TP and memory utilisation: the step model is the
    slow part)."""
    from ..serving import StepTable
    from ..serving.kv_cache import capacity_tokens
    from ..system.prepare import prepare
    from . import gpu
    from .energy import shared_step_figures

    case = gpu_case(run, gpus)
    key = (case["model"], case["gpu"], case["gpus"], int(run["max_num_seqs"]), int(run["max_model_len"]),
           utilization(run))
    if key not in _SERVERS:
        prepared = prepare(gpu.case_study(case))
        design = gpu.case_design(case, prepared)
        steps = StepTable.build(prepared, design, int(run["max_num_seqs"]), int(run["max_model_len"]),
                                point=shared_step_figures)
        _SERVERS[key] = (steps, capacity_tokens(prepared, design, utilization(run)))
    return _SERVERS[key]


def expert_group_steps(run: dict):
    """The step table of the expert layers' group of a mixture of experts on ``dp`` > 1 ranks: the server
    tensor parallel over all dp x tp GPUs (vLLM's default without ``--enable-expert-parallel``, which no
    run of this data sets: dse.serving.data_parallel); None for one rank or a dense model."""
    steps, _ = server(run)
    if dp(run) == 1 or not steps.routed:
        return None
    return server(run, dp(run) * int(run["tp"]))[0]


def stage_requests(run: dict, stage: dict, order: np.ndarray, start_s: float, seed: int,
                   limit_s: float | None = None):
    """The stage's requests (dse.serving.Requests) from ``start_s``: module docstring; ``limit_s`` cuts
    the stage to that long, its rate kept (a quick check)."""
    from ..serving import Requests

    prefix, question, output = WORKLOADS[run["workload"]]
    duration = float(stage["duration_s"]) if limit_s is None else min(float(stage["duration_s"]), limit_s)
    n = max(int(round(int(stage["num_requests"]) * duration / float(stage["duration_s"]))), 1)
    gaps = np.random.default_rng(seed).exponential(1.0, n)
    arrival = start_s + np.cumsum(gaps / gaps.sum() * duration)
    prompt_id = order[np.arange(n) % len(order)]
    return Requests(arrival_s=arrival, prompt=np.full(n, float(prefix + question)), output=np.full(n, float(output)),
                    prompt_id=prompt_id, prefix_id=prompt_id // QUESTIONS, prefix_len=prefix)


def serve_run(run: dict, stages: list[dict], path=None, limit_s: float | None = None,
              lockstep: bool | None = None, expert_group: bool = False) -> list[dict]:
    """Every stage of a run served in turn (module docstring): per stage its modelled figures (ms), the
    prefix cache's hit rate and the preemptions; ``limit_s``: `stage_requests`'; ``lockstep``:
    dse.serving.simulate.serve_data_parallel's (default: a mixture of experts' ranks step together);
    ``expert_group``: the ranks' expert layers one DP x TP group (`expert_group_steps`; off: each rank's
    pass its own TP group's)."""
    from ..serving.kv_cache import KvCache
    from ..serving.request_path import VLLM_V1
    from ..serving.simulate import serve_data_parallel

    path = VLLM_V1 if path is None else path
    steps, kv_tokens = server(run)
    copies = dp(run)
    group = expert_group_steps(run) if expert_group else None
    caches = [KvCache(kv_tokens, caching=True) for _ in range(copies)]
    order = np.random.default_rng(SEED).permutation(PREFIXES * QUESTIONS)
    out, start = [], 0.0
    for stage in stages:
        counts = [(c.hit_tokens, c.query_tokens) for c in caches]
        requests = stage_requests(run, stage, order, start, SEED + 1 + int(stage["stage_index"]), limit_s)
        cold = COLD_START_S if steps.routed and stage is stages[0] else 0.0
        parts = serve_data_parallel(requests, steps, "chunked", int(run["max_num_seqs"]),
                                    int(run["max_num_batched_tokens"]), caches, path, cold, lockstep, group)
        ttft = np.concatenate([p.first_token_s - p.arrival_s for p in parts]) * 1e3
        e2e = np.concatenate([p.done_s - p.arrival_s for p in parts]) * 1e3
        outputs = np.concatenate([p.output for p in parts])
        itl = client_itl(e2e, ttft, stage, outputs)
        start = float(max(p.done_s.max() for p in parts))
        log = np.concatenate([p.iterations for p in parts])
        # sequences a token's step held, averaged over the tokens (what sequence_s multiplies: `fit_sequence`)
        running = float((log[:, 3] * log[:, 1]).sum() / max(log[:, 1].sum(), 1.0))
        out.append({"ttft_mean_ms": ttft.mean(), "ttft_p90_ms": np.percentile(ttft, 90),
                    "ttft_p99_ms": np.percentile(ttft, 99), "itl_mean_ms": itl.mean(), "e2e_mean_ms": e2e.mean(),
                    "e2e_p90_ms": np.percentile(e2e, 90), "e2e_p99_ms": np.percentile(e2e, 99),
                    "prefix_hit_rate": sum(c.hit_tokens - h for c, (h, _) in zip(caches, counts)) /
                    sum(c.query_tokens - q for c, (_, q) in zip(caches, counts)),
                    "preemptions": int(sum(p.preemptions for p in parts)), "running": running,
                    "lines_per_step": float(np.mean(client_itl(np.ones(len(e2e)), np.zeros(len(e2e)), stage,
                                                               outputs) * (outputs - 1.0)))})
    return out


def client_itl(e2e_ms: np.ndarray, ttft_ms: np.ndarray, stage: dict, outputs: np.ndarray) -> np.ndarray:
    """Each request's ITL as the client reports it (ms): (E2E - TTFT) / (tokens it counts - 1), the count
    the stage's ``output_len_measured_mean`` (the client's count of the streamed text's tokens, module
    docstring); ``outputs`` (the tokens served) where the stage has none."""
    counted = stage.get("output_len_measured_mean")
    tokens = outputs if counted is None or not np.isfinite(counted) else np.full(len(e2e_ms), float(counted))
    return (e2e_ms - ttft_ms) / np.maximum(tokens - 1.0, 1.0)


def table(every: int = 1, path=None, figures=FIGURES, runs: list[str] | None = None,
          limit_s: float | None = None) -> list[dict]:
    """One row per stage and figure: run, stage, figure, measured, modelled (ms), ratio; every
    ``every``-th stage (1: all), of the ``runs`` named (None: all); ``limit_s``: `stage_requests`'."""
    all_runs, stages = load()
    rows = []
    chosen = stages.iloc[::every]
    if runs is not None:
        chosen = chosen[chosen["experiment_id"].isin(runs)]
    for experiment_id in dict.fromkeys(chosen["experiment_id"]):
        run = run_row(all_runs, experiment_id)
        mine = stages[stages["experiment_id"] == experiment_id].sort_values("stage_index")
        modelled = serve_run(run, mine.to_dict("records"), path, limit_s)
        for stage, model in zip(mine.to_dict("records"), modelled):
            if not ((chosen["experiment_id"] == experiment_id) & (chosen["stage_index"] == stage["stage_index"])).any():
                continue
            for figure in figures:
                rows.append({"id": f"{experiment_id}/{stage['stage_index']}", "figure": figure,
                             "measured_ms": float(stage[figure]), "modelled_ms": float(model[figure]),
                             "ratio": float(model[figure]) / float(stage[figure]), "set": "calibration",
                             "hit_rate": model["prefix_hit_rate"], "preemptions": model["preemptions"],
                             "running": model["running"], "lines_per_step": model["lines_per_step"]})
    return rows


#: the values `fit_path` searches for host_s (s)
HOST_GRID = np.arange(0.0, 20.0001e-3, 0.05e-3)


def fit_path(rows: list[dict] | None = None):
    """dse.serving.request_path.VLLM_V1 (its ``sequence_s`` kept) with ``host_s`` fitted (client send + API server
    intake + detokenisation and first streamed line, 0-20 ms), chosen on `HOST_GRID` to minimise the
    geometric-mean error of every stage's mean TTFT (the figure it moves: it adds to every TTFT and E2E
    alike, and E2E is seconds long). ``rows``: `table`'s rows served with host_s = 0 (default: served now)."""
    from ..serving.request_path import VLLM_V1

    engine = replace(VLLM_V1, intake_s=0.0, stream_s=0.0)
    rows = table(path=engine, figures=("ttft_mean_ms",)) if rows is None else rows
    ttft = [(r["measured_ms"], r["modelled_ms"]) for r in rows if r["figure"] == "ttft_mean_ms"]
    best = min(HOST_GRID, key=lambda h: geomean_error((m + h * 1e3) / x for x, m in ttft))
    return replace(engine, intake_s=float(round(best, 5)))


#: the values `fit_sequence` searches for sequence_s (s per sequence per step)
SEQUENCE_GRID = np.arange(0.0, 100.0001e-6, 0.5e-6)


def fit_sequence(rows: list[dict] | None = None, trial: tuple[float, list[dict]] | None = None) -> float:
    """``sequence_s`` of dse.serving.request_path.VLLM_V1 (host time per sequence per step, 0-100 us),
    chosen on `SEQUENCE_GRID` to minimise the geometric-mean error of every stage's mean ITL. ``rows``:
    `table`'s mean-ITL rows served with sequence_s = 0; ``trial``: (s1, the same rows served with
    sequence_s = s1). A step of n sequences lengthens by sequence_s x n, so, to first order, a stage's
    client ITL by sequence_s x its ``running`` (the sequences a token's step held, averaged over the
    tokens) x ``lines_per_step`` (a request's steps over the lines the client counts, `client_itl`'s).
    A longer step also draws more sequences into each (Little's law: the loop gain, 10-20 % more at
    100 sequences), so with ``trial`` each stage's ITL is the secant through its ITL at 0 and at s1.
    Default: served at 0, s1 the first-order fit, served at s1, the secant's fit."""
    from ..serving.request_path import VLLM_V1

    def itl(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r["figure"] == "itl_mean_ms"]

    if rows is None:
        rows = table(path=replace(VLLM_V1, sequence_s=0.0), figures=("itl_mean_ms",))
        s1 = fit_sequence(rows)
        return fit_sequence(rows, (s1, table(path=replace(VLLM_V1, sequence_s=s1), figures=("itl_mean_ms",))))
    if trial is None or trial[0] <= 0:
        points = [(r["measured_ms"], r["modelled_ms"], 1e3 * r["running"] * r["lines_per_step"]) for r in itl(rows)]
    else:
        s1, at = trial
        points = [(r["measured_ms"], r["modelled_ms"], (q["modelled_ms"] - r["modelled_ms"]) / s1)
                  for r, q in zip(itl(rows), itl(at))]
    best = min(SEQUENCE_GRID, key=lambda s: geomean_error((m + s * k) / x for x, m, k in points))
    return float(round(best, 7))


def fitted() -> list[str]:
    """The request path's terms as `dse fidelity` prints them (the fitted one's value, unit, range and
    the rows that determine it)."""
    from ..serving.request_path import VLLM_V1

    return [*VLLM_V1.describe(), "host_s is determined by every stage's mean TTFT (fit_path)",
            "sequence_s by every stage's mean ITL (fit_sequence)",
            f"cold_start_s {COLD_START_S:.2f} s (set from Lambda's Mixtral runs, not fitted here; range "
            "0-10 s: a one-off stall on the first step of a server with routed experts)"]


#: shorter names of a run's parts in a case id (`short_id`), so that `dse fidelity`'s rows fit 80 columns
SHORT = (("llama-3-1-8b", "l8"), ("mixtral-8x7b", "mx7"), ("codellama-34b", "cl34"), ("20260218-", ""))


def short_id(experiment_id: str) -> str:
    """A run's id as `dse fidelity` prints it (`SHORT`'s parts abbreviated, the date left out)."""
    for long, short in SHORT:
        experiment_id = experiment_id.replace(long, short)
    return experiment_id


def errors(rows: list[dict]) -> dict[str, float]:
    """The geometric-mean error per figure over the stages."""
    return {f: geomean_error(r["ratio"] for r in rows if r["figure"] == f)
            for f in FIGURES if any(r["figure"] == f for r in rows)}


def cases(every: int = 1) -> list[Case]:
    """Every stage's figures as `Case`s (ms), the calibration set."""
    return [Case(short_id(r["id"]), FIGURES[r["figure"]], "ms", r["measured_ms"], r["modelled_ms"], r["set"], SOURCE)
            for r in table(every)]


def markdown(rows: list[dict]) -> str:
    from ..serving.request_path import VLLM_V1

    lines = ["| run/stage | figure | measured [ms] | modelled [ms] | ratio |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {FIGURES[r['figure']]} | {r['measured_ms']:.4g} | {r['modelled_ms']:.4g} | "
                     f"{r['ratio']:.2f} |")
    lines += ["", "Request path: " + "; ".join(VLLM_V1.describe()) + f"; cold_start_s {COLD_START_S:.2f} s "
              "(set, not fitted: a server with routed experts stalls on its first step)", ""]
    lines += summary_lines(rows)
    lines.append("- by figure: " + ", ".join(f"{FIGURES[f]} {e:.1%}" for f, e in errors(rows).items()))
    lines.append(f"- {within(r['ratio'] for r in rows)} of {len(rows)} figures within 25 %")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--fit" in argv:
        print(fit_sequence())
        print(fit_path())
        return 0
    every = 1
    if "--stages" in argv:
        i = argv.index("--stages")
        every = int(argv[i + 1])
        del argv[i:i + 2]
    return write_command(__doc__, lambda: markdown(table(every)) + "\n", DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
