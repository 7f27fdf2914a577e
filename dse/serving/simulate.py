"""A discrete-event simulation of an LLM server, iteration by iteration, and vLLM's serving metrics.

Schedulers (each iteration's time from the design's step table, dse.serving.steps):

* ``continuous`` (iteration-level batching, Orca / vLLM without chunking): before every iteration,
  waiting requests are admitted first come first served while the batch has room (``max_batch``,
  ``max_concurrency``) and the KV cache can reserve their prompt and output tokens (what does not fit
  waits); an iteration either prefills the newly admitted prompts (prefill first, as vLLM does) or
  decodes one token for every running sequence;
* ``chunked`` (chunked prefill, Sarathi-Serve / vLLM): an iteration decodes every running sequence and
  spends the rest of a ``chunk_tokens`` budget on prompt chunks; its time is the decode step plus the
  prefill of the chunk, as a batch of its prompts' pieces (each attends within its own prompt);
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

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import StudyError
from .requests import Requests
from .steps import step_energy_j

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
               "request_throughput": len(ttft) / duration, "output_throughput": float(self.output.sum()) / duration}
        for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", self.itl_s * 1e3),
                             ("e2el", (self.done_s - self.arrival_s) * 1e3)):
            values = values if len(values) else np.zeros(1)
            out[f"mean_{name}_ms"] = float(np.mean(values))
            out[f"median_{name}_ms"] = float(np.median(values))
            out[f"p99_{name}_ms"] = float(np.percentile(values, 99))
        if np.isfinite(self.energy_j):
            out.update(energy_j=self.energy_j, energy_j_per_output_token=self.energy_j / float(self.output.sum()),
                       mean_power_w=self.energy_j / duration)
        return out


def simulate(requests: Requests, steps, scheduler: str = "continuous", max_batch: int = 256,
             max_concurrency: int | None = None, kv_capacity_tokens: float = np.inf,
             chunk_tokens: int = CHUNK_TOKENS) -> Outcome:
    """Serve ``requests`` (module docstring); ``steps`` has ``prefill(batch, context)`` and
    ``decode(batch, context)`` in seconds."""
    if scheduler not in SCHEDULERS:
        raise StudyError(f"unknown scheduler {scheduler!r}; allowed: {', '.join(SCHEDULERS)}", key="scheduler")
    too_long = requests.prompt + requests.output > kv_capacity_tokens
    if too_long.any():
        raise StudyError(f"a request of {int((requests.prompt + requests.output)[too_long][0]):,} tokens cannot fit "
                         f"the KV cache of {kv_capacity_tokens:,.0f} tokens", key="kv cache")
    if scheduler == "static":
        return _static(requests, steps, max_batch)
    return _iterations(requests, steps, scheduler == "chunked", max_batch, max_concurrency, kv_capacity_tokens,
                       chunk_tokens)


def _iterations(r: Requests, steps, chunked: bool, max_batch: int, concurrency: int | None, kv_capacity: float,
                chunk_tokens: int) -> Outcome:
    """Continuous or chunked batching. With ``concurrency`` the client keeps at most that many requests
    in flight (vLLM benchmark_serving's --max-concurrency, a closed loop): a request is sent when it has
    arrived and a slot has freed, and its latencies count from then."""
    n = len(r)
    sent = r.arrival_s.astype(float).copy()
    freed: deque[float] = deque([-np.inf] * concurrency) if concurrency else deque()
    limit = min(max_batch, concurrency or max_batch)
    order = np.argsort(r.arrival_s, kind="stable")
    first = np.full(n, np.nan)
    done = np.full(n, np.nan)
    generated = np.zeros(n)
    prefilled = np.zeros(n)                       # prompt tokens already computed (chunked)
    last_token = np.zeros(n)
    itl: list[np.ndarray] = []
    waiting: deque[int] = deque()
    running = np.zeros(0, np.int64)               # in admission order
    kv_used = 0.0
    t = energy = 0.0
    log: list[tuple] = []
    nxt = 0
    finished = 0
    while finished < n:
        while nxt < n and r.arrival_s[order[nxt]] <= t:
            waiting.append(int(order[nxt]))
            nxt += 1
        if not len(running) and not waiting:
            energy += _idle_j(steps, float(r.arrival_s[order[nxt]]) - t)
            t = float(r.arrival_s[order[nxt]])
            continue
        admitted = []
        while waiting and len(running) + len(admitted) < limit:
            i = waiting[0]
            need = r.prompt[i] + r.output[i]
            if kv_used + need > kv_capacity:
                break
            kv_used += need
            if concurrency:
                sent[i] = max(sent[i], freed.popleft())
            admitted.append(waiting.popleft())
        admitted = np.array(admitted, np.int64)
        t0, e0 = t, energy
        if chunked:
            running = np.concatenate([running, admitted])
            prompts = running[prefilled[running] < r.prompt[running]]
            decoding = running[prefilled[running] >= r.prompt[running]]
            budget = max(chunk_tokens - len(decoding), 0)
            chunk = 0.0
            parts = 0                               # prompts with tokens in the chunk
            for i in prompts:
                take = min(r.prompt[i] - prefilled[i], budget - chunk)
                if take <= 0:
                    break
                prefilled[i] += take
                chunk += take
                parts += 1
            ctx = float(np.mean(r.prompt[decoding] + generated[decoding])) if len(decoding) else 0.0
            t += (steps.decode(len(decoding), ctx) if len(decoding) else 0.0) + \
                (steps.prefill(parts, chunk / parts) if chunk else 0.0)
            energy += (step_energy_j(steps, "decode", len(decoding), ctx) if len(decoding) else 0.0) + \
                (step_energy_j(steps, "prefill", parts, chunk / parts) if chunk else 0.0)
            produced = np.concatenate([decoding, prompts[prefilled[prompts] >= r.prompt[prompts]]])
        elif len(admitted):
            t += steps.prefill(len(admitted), float(np.mean(r.prompt[admitted])))
            energy += step_energy_j(steps, "prefill", len(admitted), float(np.mean(r.prompt[admitted])))
            prefilled[admitted] = r.prompt[admitted]
            running = np.concatenate([running, admitted])
            produced = admitted
        else:
            ctx = float(np.mean(r.prompt[running] + generated[running]))
            t += steps.decode(len(running), ctx)
            energy += step_energy_j(steps, "decode", len(running), ctx)
            produced = running
        log.append((t - t0, len(produced), energy - e0, len(running)))
        # every sequence of the iteration gets a token at t (array operations: 10,000 requests make about
        # a million tokens)
        started = generated[produced] > 0
        first[produced[~started]] = t
        if started.any():
            itl.append(t - last_token[produced[started]])
        last_token[produced] = t
        generated[produced] += 1
        ended = produced[generated[produced] >= r.output[produced]]
        if len(ended):
            done[ended] = t
            kv_used -= float((r.prompt[ended] + r.output[ended]).sum())
            finished += len(ended)
            if concurrency:
                freed.extend([t] * len(ended))
            running = running[generated[running] < r.output[running]]
    return Outcome(arrival_s=sent, first_token_s=first, done_s=done, output=r.output,
                   itl_s=np.concatenate(itl) if itl else np.zeros(0), energy_j=energy, iterations=np.array(log, float))


def _idle_j(steps, seconds: float) -> float:
    """Joules the server's chips draw waiting ``seconds`` for requests (the step table's ``idle_w``; 0 without)."""
    return float(getattr(steps, "idle_w", 0.0)) * max(seconds, 0.0)


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
        energy += _idle_j(steps, t - free) if start else 0.0
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
