"""Disaggregated serving (Splitwise, Patel et al. ISCA 2024; DistServe, Zhong et al. OSDI 2024): prompts
are prefilled on one pool of instances, their KV caches sent over a link to another pool that only
decodes, so decodes never wait behind a prefill and prefills never share a step with decodes.

A discrete-event simulation (heapq) of ``prefill_instances`` + ``decode_instances`` copies of a design:

* a free prefill instance takes the waiting prompts first come first served, up to ``prefill_tokens``
  tokens (at least one prompt), and prefills them in one step; the step's end is each request's first
  token (the prompt phase produces it, as in Splitwise);
* each request's KV cache then crosses the link: ``alpha + prompt x kv_bytes_per_token / bandwidth``
  (transfers in parallel; Splitwise overlaps them layer by layer, this counts the whole transfer);
* it joins the decode instance holding the fewest sequences whose KV cache has room, at that instance's
  next iteration; a decode instance runs iterations of all its sequences (one token each) back to back.

Each pool's step is a forward pass of dse.serving.steps.mixed_step (no pass mixes the phases here: a
prefill pass is the prefill, a decode pass the decode, as in the colocated simulation). A decode
instance reserves a request's prompt and output tokens when it takes it.

Latencies use vLLM benchmark_serving's definitions (dse.serving.simulate.Outcome).
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import NamedTuple

import numpy as np

from ..errors import StudyError
from .requests import Requests
from .simulate import Outcome
from .steps import mixed_step


class Event(NamedTuple):
    """What happens at ``time_s`` (events at one time in the order they were scheduled, ``order``): an
    arrival, a prefill done, a KV cache sent, or a decode iteration ended."""

    time_s: float
    order: int
    kind: str
    payload: object


def simulate_disaggregated(r: Requests, prefill_steps, decode_steps, prefill_instances: int, decode_instances: int,
                           kv_bytes_per_token: float, link_alpha_s: float, link_Bps: float, max_batch: int = 256,
                           kv_capacity_tokens: float = np.inf, prefill_tokens: int = 8192) -> Outcome:
    """Serve ``r`` on separate prefill and decode pools (module docstring); ``kv_capacity_tokens`` is one
    decode instance's KV cache."""
    if prefill_instances < 1 or decode_instances < 1:
        raise StudyError("disaggregated serving needs at least one prefill and one decode instance",
                         key="--disaggregate")
    too_long = r.prompt + r.output > kv_capacity_tokens
    if too_long.any():
        raise StudyError(f"a request of {int((r.prompt + r.output)[too_long][0]):,} tokens cannot fit the KV cache "
                         f"of {kv_capacity_tokens:,.0f} tokens", key="kv cache")
    n = len(r)
    first, done = np.full(n, np.nan), np.full(n, np.nan)
    last_token, generated = np.zeros(n), np.zeros(n, np.int64)
    itl: list[float] = []
    events: list[Event] = []
    seq = 0
    energy = 0.0                            # of every step of both pools (the KV transfers not counted)

    def push(t, kind, payload):
        nonlocal seq
        heapq.heappush(events, Event(t, seq, kind, payload))
        seq += 1

    for i in np.argsort(r.arrival_s, kind="stable"):
        push(float(r.arrival_s[i]), "arrive", int(i))
    waiting: deque[int] = deque()
    free_prefill = prefill_instances
    ready: deque[int] = deque()                                # sent to the decode pool, not yet placed
    running = [[] for _ in range(decode_instances)]
    kv_used = np.zeros(decode_instances)
    busy = np.zeros(decode_instances, bool)

    def start_prefills(t):
        nonlocal free_prefill, energy
        while free_prefill and waiting:
            batch, tokens = [], 0
            while waiting and (not batch or tokens + r.prompt[waiting[0]] <= prefill_tokens):
                tokens += r.prompt[waiting[0]]
                batch.append(waiting.popleft())
            free_prefill -= 1
            sizes = (0, 0.0, len(batch), float(np.mean(r.prompt[batch])))
            push(t + mixed_step(prefill_steps, *sizes), "prefilled", batch)
            energy += mixed_step(prefill_steps, *sizes, joules=True)

    def place(t):
        while ready:
            i = ready[0]
            need = r.prompt[i] + r.output[i]
            fits = [d for d in range(decode_instances) if kv_used[d] + need <= kv_capacity_tokens
                    and len(running[d]) < max_batch]
            if not fits:
                return
            d = min(fits, key=lambda d: len(running[d]))
            ready.popleft()
            running[d].append(i)
            kv_used[d] += need
            if not busy[d]:
                start_decode(t, d)

    def start_decode(t, d):
        nonlocal energy
        busy[d] = True
        ctx = float(np.mean(r.prompt[running[d]] + generated[running[d]]))
        push(t + mixed_step(decode_steps, len(running[d]), ctx, 0, 0.0), "decoded", (d, list(running[d])))
        energy += mixed_step(decode_steps, len(running[d]), ctx, 0, 0.0, joules=True)

    while events:
        event = heapq.heappop(events)
        t, kind, payload = event.time_s, event.kind, event.payload
        if kind == "arrive":
            waiting.append(payload)
            start_prefills(t)
        elif kind == "prefilled":
            free_prefill += 1
            for i in payload:
                first[i] = last_token[i] = t
                generated[i] = 1
                if r.output[i] <= 1:
                    done[i] = t
                else:
                    push(t + link_alpha_s + r.prompt[i] * kv_bytes_per_token / link_Bps, "sent", i)
            start_prefills(t)
        elif kind == "sent":
            ready.append(payload)
            place(t)
        else:                                                      # a decode iteration ended
            d, batch = payload
            for i in batch:
                itl.append(t - last_token[i])
                last_token[i] = t
                generated[i] += 1
                if generated[i] >= r.output[i]:
                    done[i] = t
                    kv_used[d] -= r.prompt[i] + r.output[i]
            running[d] = [i for i in running[d] if generated[i] < r.output[i]]
            busy[d] = False
            place(t)
            if running[d] and not busy[d]:
                start_decode(t, d)
    return Outcome(arrival_s=r.arrival_s.astype(float), first_token_s=first, done_s=done, output=r.output,
                   itl_s=np.array(itl), energy_j=energy)
