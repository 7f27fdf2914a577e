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
own (inside the step's collectives), and the expert layers' split over every rank's GPUs (each rank's
step table is its own TP group's).
"""
from __future__ import annotations

import numpy as np

from .scheduler import Server
from .steps import idle_energy_j


def lockstep(servers: list[Server]) -> list[Server]:
    """Serve every rank's requests with the ranks stepping together (module docstring); the servers,
    run (per request ``first``, ``done``; iteration logs of the ranks' own steps)."""
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
        until = max(s.end_s(w[0], p[2]) if w else s.dummy_end_s() for s, w, p in zip(servers, work, plans))
        for s, w, p in zip(servers, work, plans):
            if w:
                left -= s.step(*w, p, until)
            else:
                s.dummy_step(until)
    return servers
