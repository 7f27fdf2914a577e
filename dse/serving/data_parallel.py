"""Data-parallel ranks of a mixture-of-experts model stepping together, as vLLM V1 runs them.

vLLM deploys each data-parallel (DP) rank as its own engine core with its own scheduler and KV cache,
but for a model with routed experts "the data parallel ranks are not completely independent. Forward
passes must be aligned, and expert layers across all ranks are required to synchronize during every
forward pass"; "when any requests are in progress in any rank, we must ensure that empty 'dummy'
forward passes are performed in all ranks that don't currently have any requests scheduled" (vLLM docs,
"Data Parallel Deployment", docs/serving/data_parallel_deployment.md, v0.12 onwards; the expert layers
form one group over every rank's GPUs). So every rank's step starts together and ends with the slowest
rank's (its pass, its host work, a one-off start-up: dse.serving.scheduler.Server.end_s); a rank with
nothing scheduled runs a dummy pass of one token (vLLM's ``execute_dummy_batch``; on the server's first
step it pays the start-up work too, so the ranks' start-up stalls overlap, once) and waits; while no
rank has work none steps, and the clock moves to the next arrival at any rank. Each rank keeps its own
queue, seats, token budget and KV cache. A dense model's ranks are independent servers (each
`Server.run` on its own). Not modelled: the DP coordinator's per-step synchronisation as a time of its
own (inside the step's collectives).

The expert layers' group (``group``: a step table of the whole model tensor parallel over all DP x TP GPUs,
e.g. a TP-4 server for run 32's TP 2 x DP 2). vLLM's docs go on: "the expert layers will by default form a
(DP x TP) sized tensor parallel group" (unless ``--enable-expert-parallel``, an EP group of the same size),
so each GPU holds 1/(DP x TP) of every expert, and every rank's expert layers run every rank's tokens: the
ranks all-gather their tokens before the expert layers and reduce-scatter after them, over the group, every
layer (vLLM's default all2all backend, ``allgather_reducescatter``: docs "Expert Parallel Deployment").
With ``group`` each step's pass is that group's pass (dse.serving.steps.mixed_step on the group's table)
over the union of the ranks' batches (decodes, prompt pieces and tokens summed, contexts and prefixes
averaged over their sequences; an idle rank's dummy token in it), the same for every rank: the expert FFN
sized by all ranks' tokens and split over DP x TP GPUs, the exchange an all-reduce (= reduce-scatter +
all-gather, the same bytes) of those tokens over the group's links, each layer, costed by the step
model's collective over the group. Approximated: the attention layers, which each rank runs on its own
TP GPUs over its own sequences, are costed as the group's, spread over all DP x TP GPUs (the same
FLOPs and KV bytes a GPU when the ranks hold equal batches, as requests dealt in turn give; the
attention weights read at 1/(DP x TP) a GPU, not 1/TP: Mixtral-8x7B's 1.3 G attention parameters, about
0.2 ms a step too little on H100s at TP 2); a rank's energy stays its own table's pass over its own batch.
"""
from __future__ import annotations

import numpy as np

from .scheduler import Server
from .steps import idle_energy_j, mixed_step, pass_fixed, pass_full, token_compute_s


def union_sizes(sizes: list[tuple]) -> tuple:
    """The pass sizes (dse.serving.steps.mixed_step's: decodes, their mean context, prompt pieces, their
    mean tokens, their mean prefix) of all ranks' batches run as one: counts summed, means weighted."""
    n = sum(s[0] for s in sizes)
    k = sum(s[2] for s in sizes)
    context = sum(s[0] * s[1] for s in sizes) / n if n else 0.0
    tokens = sum(s[2] * s[3] for s in sizes) / k if k else 0.0
    prefix = sum(s[2] * s[4] for s in sizes) / k if k else 0.0
    return n, context, k, tokens, prefix


def lockstep(servers: list[Server], group=None) -> list[Server]:
    """Serve every rank's requests with the ranks stepping together (module docstring); the servers,
    run (per request ``first``, ``done``; iteration logs of the ranks' own steps). ``group``: the step
    table of the expert layers' DP x TP group (module docstring); None: each rank's pass its own."""
    if group is not None:
        per_token = token_compute_s(group)
        terms = dict(fixed=pass_fixed(group), per_token=per_token, full=pass_full(group, per_token))
    orders = [np.argsort(s.r.arrival_s, kind="stable") for s in servers]
    nxt = [0] * len(servers)
    left = sum(len(s.r) for s in servers)
    while left > 0:
        nxt = [s.arrive(order, k) for s, order, k in zip(servers, orders, nxt)]
        busy = [s.busy() for s in servers]
        if not any(busy):
            now = max(s.t for s in servers)
            upcoming = [float(s.r.arrival_s[order[k]]) for s, order, k in zip(servers, orders, nxt) if k < len(s.r)]
            then = max(min(upcoming), now)
            for s in servers:
                s.energy += idle_energy_j(s.steps, then - s.t)
                s.t = then
            continue
        work = [s.schedule() if b else None for s, b in zip(servers, busy)]
        plans = [s.plan(*w) if w else None for s, w in zip(servers, work)]
        if group is not None:           # every rank's pass: the group's over all ranks' tokens
            seconds = mixed_step(group, *union_sizes([p[0] if p else Server.DUMMY for p in plans]), **terms)
            plans = [(p[0], p[1], seconds) if p else None for p in plans]
            until = max(s.end_s(w[0] if w else (), seconds) for s, w in zip(servers, work))
        else:
            until = max(s.end_s(w[0], p[2]) if w else s.dummy_end_s() for s, w, p in zip(servers, work, plans))
        for s, w, p in zip(servers, work, plans):
            if w:
                left -= s.step(*w, p, until)
            else:
                s.dummy_step(until)
    return servers
