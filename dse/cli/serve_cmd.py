"""``dse serve``: serving metrics of one design under a request workload (dse.serving), with the names
vLLM's benchmark_serving prints."""
from __future__ import annotations

import json
import math
from typing import NamedTuple

import click

from ..errors import StudyError
from ..model.prepare import prepare
from ..results.folder import read_design
from ..serving.requests import from_file, shared_prefixes, synthetic
from ..serving.disaggregated import simulate_disaggregated
from ..serving.kv_cache import capacity_tokens
from ..serving.request_path import VLLM_V1
from ..serving.simulate import CHUNK_TOKENS, SCHEDULERS, simulate
from ..serving.steps import StepTable
from ..study.schema.serving import GPU_MEMORY_UTILIZATION
from ..study.spec import load_study
from ..system.hardware import default_packages_per_node, fabric_level, fabric_names, network_level, network_names
from .common import cli
from .output import compiles, print_pairs

KEYS = ("completed", "duration_s", "request_throughput", "output_throughput", "mean_ttft_ms", "median_ttft_ms",
        "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
        "median_itl_ms", "p90_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms",
        "energy_j_per_output_token", "mean_power_w", "prefix_hit_rate", "preemptions")

#: units of the printed rows whose JSON keys (vLLM benchmark_serving's) carry none
UNITS = {"request_throughput": "req/s", "output_throughput": "tok/s"}


@cli.command("serve")
@click.argument("study_file", metavar="STUDY.yaml")
@click.option("--design", "design_file", required=True, help="a design YAML (a results folder's designs/<id>.yaml)")
@click.option("--input-len", type=int, help="prompt tokens of every request")
@click.option("--output-len", type=int, help="output tokens of every request")
@click.option("--dataset", help="an Azure LLM inference trace (.csv) or a JSON of [input, output] length pairs")
@click.option("--request-rate", type=float, help="Poisson arrivals, requests per second; inf: every request "
              "at once, at t = 0 (vLLM's benchmark)")
@click.option("--max-concurrency", type=int, help="requests in flight at most (all arrive at once)")
@click.option("--num-prompts", type=int, default=1000, show_default=True)
@click.option("--scheduler", help=f"{' | '.join(SCHEDULERS)} (default: the serving study's, else continuous)")
@click.option("--max-num-seqs", "--max-batch", "max_batch", type=int, default=256, show_default=True,
              help="sequences in a batch at most (vLLM's max_num_seqs; --max-batch: the same)")
@click.option("--max-num-batched-tokens", "chunk_tokens", type=int,
              help="tokens an iteration computes at most under chunked prefill (vLLM's; default: the serving "
              f"study's chunk_tokens, else {CHUNK_TOKENS})")
@click.option("--gpu-memory-utilization", "utilization", type=float,
              help="share of the design's memory for weights and KV cache (vLLM's; default: the serving study's, "
              f"else {GPU_MEMORY_UTILIZATION})")
@click.option("--enable-prefix-caching", "prefix_caching", is_flag=True, default=None,
              help="keep computed prompt blocks for later prompts (vLLM's automatic prefix caching; LRU)")
@click.option("--prefix-len", type=int, help="tokens of a shared prefix every prompt starts with")
@click.option("--num-prefixes", type=int, help="shared prefixes, each prompt one of them (default 1)")
@click.option("--num-distinct-prompts", type=int, help="prompts drawn cyclically from this many distinct ones")
@click.option("--disaggregate", metavar="P:D", help="serve on P prefill and D decode copies of the design, the KV "
              "caches sent between them (Splitwise, DistServe); --scheduler does not apply")
@click.option("--kv-link", default="infiniband-ndr", show_default=True,
              help="what carries the KV caches with --disaggregate: a fabric or network of dse/system/data/systems.yaml")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@compiles("serve")
def serve_cmd(study_file, design_file, input_len, output_len, dataset, request_rate, max_concurrency, num_prompts,
              scheduler, max_batch, chunk_tokens, utilization, prefix_caching, prefix_len, num_prefixes,
              num_distinct_prompts, disaggregate, kv_link, seed, as_json):
    """Serve requests on one design of a study: a discrete-event simulation of the scheduler, each
    iteration's time and energy from the study's own step model (TTFT, TPOT, ITL, throughput, energy per
    output token, mean power). A serving study's
    ``serving`` section gives the lengths and rate the flags leave out."""
    study = load_study(study_file)
    if study.system is not None:
        raise StudyError("dse serve simulates one package; this study describes a system of packages (its serving "
                         "objectives come from `dse run` with workload.phase: serve)", key="system")
    _check_acting(scheduler, chunk_tokens, disaggregate, study.serving)
    scheduler = scheduler or (study.serving.scheduler if study.serving is not None else "continuous")
    sv = study.serving
    chunk_tokens = chunk_tokens if chunk_tokens is not None else sv.chunk_tokens if sv is not None else CHUNK_TOKENS
    utilization = utilization if utilization is not None else \
        sv.gpu_memory_utilization if sv is not None else GPU_MEMORY_UTILIZATION
    prefix = _prefix_options(sv, prefix_caching, prefix_len, num_prefixes, num_distinct_prompts)
    if study.serving is not None and dataset is None:
        input_len = study.serving.input_len if input_len is None else input_len
        output_len = study.serving.output_len if output_len is None else output_len
        if request_rate is None and max_concurrency is None:
            request_rate = study.serving.request_rate
    if dataset is not None and (input_len is not None or output_len is not None):
        raise StudyError("give --input-len and --output-len, or --dataset, not both", key="--dataset")
    if dataset is None and (input_len is None or output_len is None):
        missing = "--input-len" if input_len is None else "--output-len"
        raise StudyError("the requests' lengths are missing: give --input-len and --output-len (tokens of every "
                         "prompt and output), or --dataset FILE, or a study with a serving section", key=missing)
    if request_rate is not None and max_concurrency is not None and not math.isinf(request_rate):
        raise StudyError("give --request-rate or --max-concurrency, not both (--request-rate inf may go with it)",
                         key="--max-concurrency")
    if not (math.isfinite(utilization) and 0 < utilization <= 1):
        raise StudyError(f"must be a share of memory in (0, 1], got {utilization}", key="--gpu-memory-utilization")
    for flag, value, high in (("--max-num-seqs", max_batch, 65536), ("--max-concurrency", max_concurrency, 65536),
                              ("--max-num-batched-tokens", chunk_tokens, 10**7), ("--seed", seed, 2**32 - 1)):
        if value is not None and not (0 if flag == "--seed" else 1) <= value <= high:
            raise StudyError(f"must be a whole number up to {high:,}, got {value}", key=flag)
    if request_rate is not None and not request_rate > 0:
        raise StudyError(f"must be a positive number of requests per second, or inf (every request sent at once, "
                         f"at t = 0), got {request_rate}", key="--request-rate")
    pools = _pools(disaggregate, max_concurrency)
    if pools and prefix.caching:
        raise StudyError("prefix caching is simulated on one server, not with --disaggregate",
                         key="--enable-prefix-caching")
    link = _kv_link(kv_link) if pools else None
    prepared = prepare(study)
    design = read_design(design_file)
    prepared.check_design(design, source=design_file)
    reqs = (from_file(dataset, num_prompts, request_rate, seed) if dataset else
            synthetic(num_prompts, input_len, output_len, request_rate, seed))
    if prefix.shaped:
        reqs = shared_prefixes(reqs, prefix.prefix_len, prefix.num_prefixes, prefix.num_distinct_prompts)
    batch = min(max_batch, max_concurrency or max_batch, len(reqs))
    longest = int((reqs.prompt + reqs.output).max())
    steps = StepTable.build(prepared, design, batch, longest)
    kv = capacity_tokens(prepared, design, utilization)
    if pools:
        per_token = prepared.tables.workload.summary.get("kv_cache_bytes_per_token", 0.0)
        out = simulate_disaggregated(reqs, steps, steps, pools[0], pools[1], per_token, link.alpha_s,
                                     link.pair_bandwidth_Bps, max_batch=batch, kv_capacity_tokens=kv)
        scheduler = f"disaggregated {pools[0]}:{pools[1]} over {kv_link}"
    else:
        out = simulate(reqs, steps, scheduler=scheduler, max_batch=batch, max_concurrency=max_concurrency,
                       kv_capacity_tokens=kv, chunk_tokens=chunk_tokens, prefix_caching=prefix.caching, path=VLLM_V1)
    metrics = out.metrics()
    metrics["kv_cache_tokens"] = kv
    if as_json:
        click.echo(json.dumps(metrics))
        return
    print_pairs([(f"{key} ({UNITS[key]})" if key in UNITS else key, metrics[key])
                 for key in [k for k in KEYS if k in metrics] + ["kv_cache_tokens"]],
                title=f"{len(reqs)} requests, {scheduler}{'' if pools else ' batching'}")


def _check_acting(scheduler, chunk_tokens, disaggregate, sv) -> None:
    """Refuse a flag the simulation would not read, rather than ignore it: --scheduler with --disaggregate
    (each pool batches its own way), --max-num-batched-tokens outside the chunked scheduler (the only one
    with a token budget per iteration)."""
    if disaggregate is not None and scheduler is not None:
        raise StudyError("does not apply with --disaggregate (prefill and decode run on separate copies); leave "
                         "it out", key="--scheduler")
    if chunk_tokens is None:
        return
    if disaggregate is not None:
        raise StudyError("does not apply with --disaggregate; it is the token budget of --scheduler chunked",
                         key="--max-num-batched-tokens")
    chosen = scheduler or (sv.scheduler if sv is not None else "continuous")
    if chosen != "chunked":
        raise StudyError(f"is the token budget of --scheduler chunked; the scheduler here is {chosen}: give "
                         "--scheduler chunked or leave it out", key="--max-num-batched-tokens")


def _pools(text: str | None, max_concurrency) -> tuple[int, int] | None:
    """--disaggregate P:D as (P, D), each 1 to 1,024."""
    if text is None:
        return None
    if max_concurrency is not None:
        raise StudyError("a closed loop (--max-concurrency) is not simulated with disaggregation; give "
                         "--request-rate", key="--disaggregate")
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isdigit() and 1 <= int(p) <= 1024 for p in parts):
        raise StudyError(f"must be P:D, prefill and decode instances from 1 to 1,024 (e.g. 1:2), got {text!r}",
                         key="--disaggregate")
    return int(parts[0]), int(parts[1])


def _kv_link(name: str):
    """The link a KV cache crosses: a fabric between two packages of a node, or a network between nodes
    (one NIC per package)."""
    if name in fabric_names():
        return fabric_level(name, default_packages_per_node(name))
    if name in network_names():
        return network_level(name, 1, 1, "fat-tree", 2)
    raise StudyError(f"unknown link {name!r}; allowed: {', '.join(fabric_names() + network_names())}", key="--kv-link")


class PrefixOptions(NamedTuple):
    """The requests' prefix structure and whether the server caches prefixes."""
    caching: bool
    prefix_len: int
    num_prefixes: int
    num_distinct_prompts: int | None

    @property
    def shaped(self) -> bool:
        return bool(self.prefix_len) or self.num_distinct_prompts is not None


def _prefix_options(sv, caching, prefix_len, num_prefixes, num_distinct) -> PrefixOptions:
    """The flags, else the serving study's keys (vLLM's default: prefix caching off here, as the issue asks)."""
    pick = lambda flag, key, default: flag if flag is not None else (getattr(sv, key) if sv is not None  # noqa: E731
                                                                      else default)
    return PrefixOptions(caching=bool(pick(caching, "enable_prefix_caching", False)),
                         prefix_len=int(pick(prefix_len, "prefix_len", 0)),
                         num_prefixes=int(pick(num_prefixes, "num_prefixes", 1)),
                         num_distinct_prompts=pick(num_distinct, "num_distinct_prompts", None))
