"""Study schema: the ``serving`` section (``workload.phase: serve``; dse.serving.package).

A design serves requests of ``input_len`` prompt and ``output_len`` output tokens arriving as a Poisson
stream at ``request_rate`` per second, under continuous (iteration-level) batching or chunked prefill
(``scheduler``, ``chunk_tokens``) of at most ``max_batch`` sequences; its service-level objectives are a
99th-percentile time to first token and time per output token. The study's decode step (the latency,
energy and memory it reports) is a batch of ``max_batch`` sequences at the mean context
``input_len + output_len / 2``: a serving study sets ``workload.batch`` and ``workload.context`` from
here.

SLO defaults: MLPerf Inference v4.1's server scenario for Llama-2-70B (TTFT 2 s, TPOT 200 ms at the
99th percentile; MLCommons inference rules, "Llama2-70b" latency constraints).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import StrictModel

#: requests per second offered: 10^6 (a large fleet; one design serves far fewer)
MAX_RATE = 1e6
#: tokens of one request's prompt or output: 10^6
MAX_TOKENS = 1_000_000


class SloSpec(StrictModel):
    ttft_ms: float = Field(2000.0, gt=0, le=3.6e6, description="99th-percentile time to first token, ms")
    tpot_ms: float = Field(200.0, gt=0, le=3.6e6, description="99th-percentile time per output token, ms")


class ServingSpec(StrictModel):
    input_len: int = Field(ge=1, le=MAX_TOKENS, description="prompt tokens of every request")
    output_len: int = Field(ge=2, le=MAX_TOKENS, description="output tokens of every request (TPOT needs two)")
    request_rate: float = Field(gt=0, le=MAX_RATE, description="Poisson arrivals, requests per second")
    max_batch: int = Field(256, ge=1, le=65_536, description="sequences in a batch at most")
    scheduler: Literal["continuous", "chunked"] = Field("continuous", description=(
        "continuous: prefill-first iteration-level batching (Orca, vLLM without chunking); chunked: chunked "
        "prefill (Sarathi-Serve, vLLM's default), prompts riding along the decodes within chunk_tokens"))
    chunk_tokens: int = Field(512, ge=1, le=MAX_TOKENS, description=(
        "tokens an iteration processes at most under chunked prefill, decodes included (vLLM's "
        "max_num_batched_tokens)"))
    slo: SloSpec = SloSpec()

    @property
    def mean_context(self) -> int:
        """Tokens a sequence holds on average while it decodes."""
        return self.input_len + self.output_len // 2
