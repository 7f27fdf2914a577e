"""Study schema: the ``serving`` section (``workload.phase: serve``; dse.serving.package).

A design serves requests of ``input_len`` prompt and ``output_len`` output tokens arriving as a Poisson
stream at ``request_rate`` per second, under continuous (iteration-level) batching or chunked prefill
(``scheduler``, ``chunk_tokens``) of at most ``max_batch`` sequences; its service-level objectives are a
99th-percentile time to first token and time per output token. The study's decode step (the latency,
energy and memory it reports) is a batch of ``max_batch`` sequences at the mean context
``input_len + output_len / 2``: a serving study sets ``workload.batch`` and ``workload.context`` from
here. vLLM's names are taken too: ``max_num_seqs`` (= ``max_batch``), ``max_num_batched_tokens`` (=
``chunk_tokens``), ``gpu_memory_utilization`` (the KV cache is that share of the memory less the weights),
``enable_prefix_caching`` with the requests' prefix structure (``prefix_len``, ``num_prefixes``,
``num_distinct_prompts``: dse.serving.requests.shared_prefixes), which the closed form reads as the
cached share of every prompt (`ServingSpec.cached_tokens`).

SLO defaults: MLPerf Inference v4.1's server scenario for Llama-2-70B (TTFT 2 s, TPOT 200 ms at the
99th percentile; MLCommons inference rules, "Llama2-70b" latency constraints).
"""
from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, model_validator

from .common import StrictModel

#: requests per second offered: 10^6 (a large fleet; one design serves far fewer)
MAX_RATE = 1e6
#: tokens of one request's prompt or output: 10^6
MAX_TOKENS = 1_000_000
#: vLLM's default share of a GPU's memory for weights, activations and KV cache (gpu_memory_utilization)
GPU_MEMORY_UTILIZATION = 0.9
#: tokens of a KV cache block (vLLM's block_size; dse.serving.kv_cache.BLOCK)
BLOCK_TOKENS = 16


class SloSpec(StrictModel):
    ttft_ms: float = Field(2000.0, gt=0, le=3.6e6, description="99th-percentile time to first token, ms")
    tpot_ms: float = Field(200.0, gt=0, le=3.6e6, description="99th-percentile time per output token, ms")


class ServingSpec(StrictModel):
    input_len: int = Field(ge=1, le=MAX_TOKENS, description="prompt tokens of every request")
    output_len: int = Field(ge=2, le=MAX_TOKENS, description="output tokens of every request (TPOT needs two)")
    request_rate: float = Field(gt=0, le=MAX_RATE, description="Poisson arrivals, requests per second")
    max_batch: int = Field(256, ge=1, le=65_536, validation_alias=AliasChoices("max_batch", "max_num_seqs"),
                           description="sequences in a batch at most (vLLM's max_num_seqs: either name)")
    scheduler: Literal["continuous", "chunked"] = Field("continuous", description=(
        "continuous: prefill-first iteration-level batching (Orca, vLLM without chunking); chunked: chunked "
        "prefill (Sarathi-Serve, vLLM's default), prompts riding along the decodes within chunk_tokens"))
    chunk_tokens: int = Field(512, ge=1, le=MAX_TOKENS, validation_alias=AliasChoices(
        "chunk_tokens", "max_num_batched_tokens"), description=(
        "tokens an iteration processes at most under chunked prefill, decodes included (vLLM's "
        "max_num_batched_tokens: either name)"))
    gpu_memory_utilization: float = Field(GPU_MEMORY_UTILIZATION, gt=0, le=1, description=(
        "share of the memory for weights and KV cache (vLLM's): the KV cache is this share less the weights"))
    enable_prefix_caching: bool = Field(False, description=(
        "vLLM's automatic prefix caching: a prompt's cached blocks are not computed again"))
    prefix_len: int = Field(0, ge=0, le=MAX_TOKENS, description="tokens of a prefix the prompts share")
    num_prefixes: int = Field(1, ge=1, le=MAX_TOKENS, description="shared prefixes, each prompt one of them")
    num_distinct_prompts: int | None = Field(None, ge=1, le=MAX_TOKENS, description=(
        "prompts drawn cyclically from this many distinct ones (None: every prompt differs)"))
    #: the service-level objectives on p99 TTFT and TPOT
    slo: SloSpec = SloSpec()

    @model_validator(mode="after")
    def _prefix_fits(self):
        if self.prefix_len > self.input_len:
            raise ValueError(f"prefix_len {self.prefix_len} exceeds input_len {self.input_len}")
        return self

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens a request finds in the prefix cache in the steady state (the closed form's): with
        caching on, the full blocks of its shared prefix, or of its whole prompt less the last token when
        prompts repeat (the cache assumed to hold them: LRU evictions are the simulation's,
        dse.serving.kv_cache)."""
        if not self.enable_prefix_caching:
            return 0
        shared = self.input_len - 1 if self.num_distinct_prompts is not None else min(self.prefix_len,
                                                                                      self.input_len - 1)
        return shared // BLOCK_TOKENS * BLOCK_TOKENS

    @property
    def mean_context(self) -> int:
        """Tokens a sequence holds on average while it decodes."""
        return self.input_len + self.output_len // 2
