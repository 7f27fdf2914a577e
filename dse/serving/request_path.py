"""The path of a request as the client sees it, around the engine's steps (vLLM V1's OpenAI server).

A streamed request's time to first token, measured by the client (first streamed line minus send time),
is the sum of:

1. **the client's send and the API server's intake**: the request crosses the network, the API server
   (vLLM's ``vllm serve``, an asyncio process in front of the engine core) parses the HTTP request,
   tokenises the prompt, validates it and hands it to the engine core over ZeroMQ (vLLM docs, "V1
   architecture": API server process, EngineCore process);
2. **the wait for the engine's next scheduling step**: the engine core takes requests in between steps.
   With async scheduling (vLLM's default since v0.12, PR #27614: the scheduler works one step ahead of the
   GPU, NanoFlow-style, PR #19970) the step after the one under way is already scheduled when the request
   arrives, so it joins the step after that: it waits the rest of the step under way (half a step on
   average) and one whole step (``async_scheduling``; the simulator admits to a step only the requests
   that had reached the engine when the step before it started, dse.serving.scheduler);
3. **the first step holding its prefill chunk**, together with the running decodes: one forward pass
   (dse.serving.steps.mixed_step), simulated;
4. **sampling**, inside the step's time (the step model's pass ends in the LM head; vLLM samples on the
   GPU in the same step);
5. **detokenisation and the first streamed line**: the engine core returns the step's tokens to the API
   server, which detokenises them and writes one server-sent-event line per request to the client.

Besides these, every step carries host work per running sequence that the GPU waits on (term 6,
``sequence_s``): vLLM V1's engine core prepares each scheduled request's inputs (token ids, positions,
block-table rows, slot mappings) and processes its output (sampled token back to the request, stop
checks, the output sent to the API server), in Python, per request and per step (vLLM docs, "V1
architecture"; vllm/v1/worker/gpu_model_runner.py ``_prepare_inputs``, vllm/v1/engine/output_processor.py);
the step model's GPU time does not see it. It adds ``sequence_s`` x the sequences in the step to every
step: it lengthens the gaps between streamed lines (ITL) in proportion to the load, which the calibration
stages' ITL determines (dse.validation.serving_vllm.fit_sequence).

Terms 1 and 5 are host and network time the step model does not see; on the client's clock they add to
every request's TTFT and E2E alike (a streamed line's time is shifted by term 5, every gap between
lines is a step), so measured TTFT and E2E determine their sum only: ``host_s``, the one figure fitted
(dse.validation.serving_vllm.fit_path). The simulation leaves the API server's own queue out (at the
measured rates of at most 20 requests/s and a few ms each it is busy a few per cent of the time).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestPath:
    """Host time around the engine (s) and whether the engine schedules one step ahead.

    ``intake_s``: client send + API server intake (HTTP, tokenisation, validation, hand-off), before the
    engine sees the request; ``stream_s``: the engine's output to the client's line (detokenisation, SSE
    write, network), after each step; ``async_scheduling``: a request joins the second step after it
    reaches the engine (term 2 of the module docstring), else the next one; ``sequence_s``: host time a
    step takes per sequence in it (term 6, s per sequence per step)."""

    intake_s: float = 0.0
    stream_s: float = 0.0
    async_scheduling: bool = False
    sequence_s: float = 0.0

    @property
    def host_s(self) -> float:
        """Host time a request's TTFT and E2E carry besides the engine's steps (s)."""
        return self.intake_s + self.stream_s

    def describe(self) -> list[str]:
        """The terms as `dse fidelity` prints them: name, value, unit, range, meaning."""
        return [f"host_s {self.host_s * 1e3:.2f} ms (fitted, range 0-20 ms: client send, API server intake, "
                "detokenisation and first streamed line)",
                f"sequence_s {self.sequence_s * 1e6:.1f} us (fitted, range 0-100 us: host time per running "
                "sequence per step)",
                f"async scheduling {'on' if self.async_scheduling else 'off'} (vLLM V1 default: a request "
                "joins the second step after it arrives)"]


#: the engine alone (what dse serve modelled before issue 50): requests reach it as sent, their tokens
#: leave it as produced, and a request joins the next step
ENGINE_ONLY = RequestPath()
#: vLLM v0.15.1's OpenAI server, fitted on the measured runs of dse/validation/data/serve_vllm_*.csv
#: (dse.validation.serving_vllm.fit_path: every calibration stage's mean TTFT and E2E); the split of
#: host_s between intake and streaming is not determined by them, and is put on the intake side
VLLM_V1 = RequestPath(intake_s=7.6e-3, stream_s=0.0, async_scheduling=True, sequence_s=21e-6)
