"""A discrete-event simulation of an LLM server, iteration by iteration, and vLLM's serving metrics.

Schedulers (each iteration's time from the design's step table, dse.serving.steps):

* ``continuous`` (iteration-level batching, Orca / vLLM without chunking): before every iteration,
  waiting requests are admitted first come first served while the batch has room (``max_batch``,
  ``max_concurrency``) and the paged KV cache has blocks for their prompts (sequences grow block by
  block; when they outgrow the cache the last admitted is preempted and recomputed later, as vLLM does);
  an iteration either prefills the newly admitted prompts (prefill first, as vLLM does) or decodes one
  token for every running sequence;
* ``chunked`` (chunked prefill, Sarathi-Serve / vLLM V1): an iteration decodes every running sequence
  and spends the rest of a ``chunk_tokens`` budget on prompt chunks; its time is one forward pass over
  the mixed batch (dse.serving.steps.mixed_step: weights read once, each chunk attending to its prompt's
  earlier tokens);
  (both: dse.serving.scheduler; with prefix caching a prompt's cached blocks are not computed again:
  dse.serving.kv_cache)
* ``static``: batches of ``max_batch`` requests in arrival order; a batch starts when it is full (or the
  last) and the server is free, prefills together and decodes until its longest output is done.

Metrics use vLLM benchmark_serving's names: TTFT (arrival to first token), TPOT (time per output token
after the first, per request), ITL (every gap between consecutive tokens), request and output
throughput over the run (first arrival to last completion). With a step table that knows each step's
energy (dse.serving.steps) also the run's ``energy_j``, ``energy_j_per_output_token`` and ``mean_power_w``
over the run (what ML.ENERGY reports: energy per output token, average power); while the server waits
for requests its chips draw their idle power (the step table's ``idle_w``, arch.power.idle_power_w).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import StudyError
from .kv_cache import KvCache, blocks
from .request_path import ENGINE_ONLY, RequestPath
from .requests import Requests
from .scheduler import Server
from .steps import idle_energy_j, step_energy_j

SCHEDULERS = ("continuous", "chunked", "static")
#: tokens an iteration processes at most under chunked prefill (vLLM's max_num_batched_tokens with chunking)
CHUNK_TOKENS = 512


@dataclass
class Outcome:
    """Per request: first-token and completion times (s); all inter-token gaps of the run (s)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    done_s: np.ndarray
    output: np.ndarray
    itl_s: np.ndarray
    energy_j: float = float("nan")      # of every step of the run (NaN: the steps' energy is not known)
    iterations: np.ndarray | None = None  # [k, 4] per iteration: seconds, tokens out, joules, sequences in it
    prefix_hit_rate: float = 0.0          # prompt tokens found in the prefix cache over those looked up
    preemptions: int = 0                  # sequences preempted (recomputed) when the KV cache ran out

    def steady_state(self) -> dict:
        """Output throughput, median inter-token latency (ms), mean power (W) and energy per output token (J)
        over the run's steady state: from the first to the last iteration holding the most sequences (what a
        benchmark measuring a full batch sees, without the ramp up and the drain)."""
        it = self.iterations
        if it is None or not len(it):
            raise ValueError("a steady state needs the iterations of a continuous or chunked run")
        full = np.flatnonzero(it[:, 3] == it[:, 3].max())
        span = it[full[0]:full[-1] + 1]
        seconds, tokens, joules = span[:, 0].sum(), span[:, 1].sum(), span[:, 2].sum()
        order = np.argsort(span[:, 0])            # a token's gap is its iteration's time: median by tokens
        cumulative = np.cumsum(span[order, 1])
        median = span[order, 0][np.searchsorted(cumulative, cumulative[-1] / 2)]
        return {"output_throughput": tokens / seconds, "median_itl_ms": median * 1e3, "mean_power_w": joules / seconds,
                "energy_j_per_output_token": joules / tokens}

    def metrics(self) -> dict:
        """vLLM benchmark_serving's metrics (times in ms, throughputs per second)."""
        ttft = (self.first_token_s - self.arrival_s) * 1e3
        many = self.output > 1
        tpot = (self.done_s - self.first_token_s)[many] / (self.output[many] - 1) * 1e3
        duration = float(self.done_s.max() - self.arrival_s.min())
        out = {"completed": int(len(ttft)), "duration_s": duration,
               "request_throughput": len(ttft) / duration, "output_throughput": float(self.output.sum()) / duration,
               "prefix_hit_rate": self.prefix_hit_rate, "preemptions": self.preemptions}
        for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", self.itl_s * 1e3),
                             ("e2el", (self.done_s - self.arrival_s) * 1e3)):
            values = values if len(values) else np.zeros(1)
            out[f"mean_{name}_ms"] = float(np.mean(values))
            out[f"median_{name}_ms"] = float(np.median(values))
            out[f"p90_{name}_ms"] = float(np.percentile(values, 90))
            out[f"p99_{name}_ms"] = float(np.percentile(values, 99))
        if np.isfinite(self.energy_j):
            out.update(energy_j=self.energy_j, energy_j_per_output_token=self.energy_j / float(self.output.sum()),
                       mean_power_w=self.energy_j / duration)
        return out


def simulate(requests: Requests, steps, scheduler: str = "continuous", max_batch: int = 256,
             max_concurrency: int | None = None, kv_capacity_tokens: float = np.inf,
             chunk_tokens: int = CHUNK_TOKENS, prefix_caching: bool = False,
             prefill_budget: int | None = None, path: RequestPath = ENGINE_ONLY) -> Outcome:
    """Serve ``requests`` (module docstring); ``steps`` has ``prefill(batch, context)`` and
    ``decode(batch, context)`` in seconds. ``max_batch``: vLLM's max_num_seqs; ``chunk_tokens``: its
    max_num_batched_tokens under chunked prefill; ``kv_capacity_tokens``: the KV cache (paged, with
    preemption: dse.serving.scheduler); ``prefix_caching``: vLLM's automatic prefix caching
    (dse.serving.kv_cache); ``prefill_budget``: the continuous scheduler's max_num_batched_tokens (vLLM V0
    without chunking: an iteration prefills the waiting prompts whose tokens fit it; None: every one);
    ``path``: the request's way around the engine (dse.serving.request_path; default the engine alone)."""
    if scheduler not in SCHEDULERS:
        raise StudyError(f"unknown scheduler {scheduler!r}; allowed: {', '.join(SCHEDULERS)}", key="scheduler")
    total = requests.prompt + requests.output
    too_long = blocks(total) > KvCache(kv_capacity_tokens).total
    if too_long.any():
        raise StudyError(f"a request of {int(total[too_long][0]):,} tokens cannot fit "
                         f"the KV cache of {kv_capacity_tokens:,.0f} tokens", key="kv cache")
    if scheduler == "static":
        return _static(requests, steps, max_batch)
    cache = KvCache(kv_capacity_tokens, prefix_caching)
    return serve_requests(requests, steps, scheduler, max_batch, chunk_tokens, cache, max_concurrency, prefill_budget,
                          path)


def serve_requests(requests: Requests, steps, scheduler: str, max_batch: int, chunk_tokens: int, cache: KvCache,
                   max_concurrency: int | None = None, prefill_budget: int | None = None,
                   path: RequestPath = ENGINE_ONLY, cold_start_s: float = 0.0) -> Outcome:
    """`simulate` under the continuous or chunked scheduler on a given KV ``cache`` (a server's, kept
    from one run of requests to the next: what its prefix cache holds carries over). The request's
    path (dse.serving.request_path): it reaches the engine ``path.intake_s`` after it is sent, each of
    its tokens reaches the client ``path.stream_s`` after its step; times in the `Outcome` are the
    client's (sent, first line, last line); every step also takes ``path.sequence_s`` per sequence in it
    (host work, dse.serving.request_path). ``cold_start_s``: seconds the server's first step takes
    beyond its pass (one-off start-up work; dse.serving.scheduler)."""
    engine = replace(requests, arrival_s=requests.arrival_s + path.intake_s) if path.intake_s else requests
    s = Server(engine, steps, scheduler == "chunked", max_batch, max_concurrency, cache, chunk_tokens, prefill_budget,
               lookahead=path.async_scheduling, cold_start_s=cold_start_s, sequence_s=path.sequence_s).run()
    return _outcome(s, requests, path, cache)


def serve_data_parallel(requests: Requests, steps, scheduler: str, max_batch: int, chunk_tokens: int,
                        caches: list[KvCache], path: RequestPath = ENGINE_ONLY, cold_start_s: float = 0.0,
                        lockstep: bool | None = None, group=None) -> list[Outcome]:
    """`serve_requests` on ``len(caches)`` data-parallel ranks of a server, rank c taking every
    len(caches)-th request from the c-th (each its own scheduler and KV cache, ``caches[c]``); one `Outcome`
    per rank. ``lockstep`` (default: the model routes tokens to experts, ``steps.routed``): the ranks step
    together, each step the slowest rank's, a rank with nothing scheduled running a dummy pass
    (dse.serving.data_parallel: vLLM V1's data parallelism of a mixture of experts); otherwise each rank
    is a server of its own. ``group``: the step table of the expert layers' DP x TP group, every rank's pass
    that group's over all ranks' tokens (dse.serving.data_parallel; None: each rank's pass its own)."""
    from .data_parallel import lockstep as run_together

    ranks = len(caches)
    together = bool(getattr(steps, "routed", False)) if lockstep is None else lockstep
    parts = [replace(requests, arrival_s=requests.arrival_s[mine], prompt=requests.prompt[mine],
                     output=requests.output[mine],
                     prompt_id=None if requests.prompt_id is None else requests.prompt_id[mine],
                     prefix_id=None if requests.prefix_id is None else requests.prefix_id[mine])
             for mine in (np.arange(c, len(requests), ranks) for c in range(ranks))]
    if not together or ranks == 1:
        return [serve_requests(p, steps, scheduler, max_batch, chunk_tokens, cache, path=path,
                               cold_start_s=cold_start_s) for p, cache in zip(parts, caches)]
    servers = [Server(replace(p, arrival_s=p.arrival_s + path.intake_s) if path.intake_s else p, steps,
                      scheduler == "chunked", max_batch, None, cache, chunk_tokens, lookahead=path.async_scheduling,
                      cold_start_s=cold_start_s, sequence_s=path.sequence_s) for p, cache in zip(parts, caches)]
    run_together(servers, group)
    return [_outcome(s, p, path, cache) for s, p, cache in zip(servers, parts, caches)]


def _outcome(s: Server, requests: Requests, path: RequestPath, cache: KvCache) -> Outcome:
    """The `Outcome` of a served ``s`` of ``requests`` (the client's times: ``path``'s intake and stream)."""
    return Outcome(arrival_s=s.sent - path.intake_s, first_token_s=s.first + path.stream_s,
                   done_s=s.done + path.stream_s, output=requests.output,
                   itl_s=np.concatenate(s.itl) if s.itl else np.zeros(0), energy_j=s.energy,
                   iterations=np.array(s.log, float), prefix_hit_rate=cache.hit_rate, preemptions=s.preemptions)




def _static(r: Requests, steps, max_batch: int) -> Outcome:
    n = len(r)
    order = np.argsort(r.arrival_s, kind="stable")
    first = np.zeros(n)
    done = np.zeros(n)
    itl: list[float] = []
    free = energy = 0.0
    for start in range(0, n, max_batch):
        batch = order[start:start + max_batch]
        t = max(free, float(r.arrival_s[batch].max()))
        energy += idle_energy_j(steps, t - free) if start else 0.0
        t += steps.prefill(len(batch), float(np.mean(r.prompt[batch])))
        energy += step_energy_j(steps, "prefill", len(batch), float(np.mean(r.prompt[batch])))
        first[batch] = t
        steps_left = int(r.output[batch].max()) - 1
        ctx = float(np.mean(r.prompt[batch]))
        for k in range(steps_left):
            step = steps.decode(len(batch), ctx + k + 1)
            energy += step_energy_j(steps, "decode", len(batch), ctx + k + 1)
            t += step
            for i in batch:
                if r.output[i] >= k + 2:
                    itl.append(step)
                    if r.output[i] == k + 2:
                        done[i] = t
        for i in batch:
            if r.output[i] <= 1:
                done[i] = first[i]
        free = t
    return Outcome(arrival_s=r.arrival_s, first_token_s=first, done_s=done, output=r.output, itl_s=np.array(itl),
                   energy_j=energy)
