"""Ensemble scenarios: which nodes one request visits, and which a batch of requests runs.

A request's path is the set of nodes it visits; requests are independent, so for a batch of
B the step runs the union of B paths. ``Workload.scenarios`` lists those unions (as stage sets) with
their probabilities: exact (the distribution of B-fold unions, built by repeated convolution) when it has
at most ``max_scenarios`` distinct sets; otherwise ``max_scenarios`` batches sampled with the seed, each
of weight 1/max_scenarios (duplicates merged), an unbiased Monte-Carlo estimate of any step average.
A stage's ``prob`` is the total probability of the scenarios holding it; ``after`` may name stages of
nodes absent from a scenario, which the scenario's critical path skips.
"""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from .ensemble_spec import _error, _Node
from .routing import selection_probabilities
from .workload import Workload

MAX_REQUEST_PATHS = 4096
MAX_EXACT_UNIONS = 4096


def _router_choices(node: _Node, g: nx.DiGraph, seed: int, index: int) -> list[tuple[frozenset, float]]:
    """Distribution over the subsets of children a router sends one request to."""
    kids = sorted(g.successors(node.name), key=lambda c: g.edges[node.name, c]["order"])
    given = [g.edges[node.name, c]["prob"] for c in kids]
    if any(p is not None for p in given):
        if any(p is None for p in given):
            raise _error(f"router {node.name!r}: give a probability on every edge or on none")
        w = np.array(given, float)
        if node.top_k == 1 and abs(w.sum() - 1.0) > 1e-6:
            raise _error(f"router {node.name!r}: top-1 edge probabilities must sum to 1, got {w.sum():.6g}")
    else:
        raw = node.raw
        w = selection_probabilities(len(kids), 1, raw.get("distribution", "uniform"), float(raw.get("s", 1.0)),
                                    seed, index, float(raw.get("alpha", 1.0)))
    if w.sum() <= 0:
        raise _error(f"router {node.name!r}: probabilities are all zero")
    w = w / w.sum()
    out: dict[frozenset, float] = {}
    if len(kids) ** node.top_k > 100_000:
        raise _error(f"router {node.name!r}: top_k {node.top_k} of {len(kids)} children is too many paths")
    for perm in itertools.permutations(range(len(kids)), node.top_k):
        p, left = 1.0, 1.0
        for i in perm:
            if left <= 0:
                p = 0.0
                break
            p *= w[i] / left
            left -= w[i]
        if p > 0:
            key = frozenset(kids[i] for i in perm)
            out[key] = out.get(key, 0.0) + p
    return list(out.items())


def request_paths(nodes, g: nx.DiGraph, seed: int = 0) -> list[tuple[frozenset, float]]:
    """Every set of nodes one request can visit, with its probability (routers branch, others pass on)."""
    choices = {n.name: _router_choices(n, g, seed, i) for i, n in enumerate(nodes) if n.role == "router"}
    states: dict[tuple[frozenset, frozenset], float] = {(frozenset(), frozenset()): 1.0}
    for name in nx.topological_sort(g):
        new: dict[tuple[frozenset, frozenset], float] = {}
        for (visited, reached), p in states.items():
            if g.in_degree(name) and name not in reached:
                options = [((visited, reached), 1.0)]
            elif name in choices:
                options = [((visited | {name}, reached | kids), q) for kids, q in choices[name]]
            else:
                options = [((visited | {name}, reached | set(g.successors(name))), 1.0)]
            for key, q in options:
                new[key] = new.get(key, 0.0) + p * q
        if len(new) > MAX_REQUEST_PATHS:
            raise _error(f"more than {MAX_REQUEST_PATHS} distinct request paths; use fewer routers or smaller top_k")
        states = new
    out: dict[frozenset, float] = {}
    for (visited, _), p in states.items():
        out[visited] = out.get(visited, 0.0) + p
    return list(out.items())


def batch_unions(paths: list[tuple[frozenset, float]], order: list[str], batch: int, max_scenarios: int,
                 seed: int) -> tuple[list[tuple[float, frozenset]], str]:
    """Distribution of the union of ``batch`` independent request paths (exact or sampled; module docs)."""
    bit = {n: 1 << i for i, n in enumerate(order)}
    masks = [sum(bit[n] for n in s) for s, _ in paths]
    probs = np.array([p for _, p in paths])
    probs = probs / probs.sum()
    dist = {0: 1.0}
    exact = True
    for _ in range(int(batch)):
        new: dict[int, float] = {}
        for m, p in dist.items():
            for o, po in zip(masks, probs):
                key = m | o
                new[key] = new.get(key, 0.0) + p * po
        dist = new
        if len(dist) > MAX_EXACT_UNIONS:
            exact = False
            break
    if exact and len(dist) <= max_scenarios:
        items = sorted(dist.items(), key=lambda kv: -kv[1])
        return [(p, frozenset(n for n in order if m & bit[n])) for m, p in items], "exact"
    rng = np.random.default_rng(seed)
    member = np.array([[bool(m & bit[n]) for n in order] for m in masks])
    draws = rng.choice(len(masks), size=(max_scenarios, int(batch)), p=probs)
    unions = member[draws].any(axis=1)
    rows, counts = np.unique(unions, axis=0, return_counts=True)
    out = [(c / max_scenarios, frozenset(n for n, on in zip(order, row) if on)) for row, c in zip(rows, counts)]
    return sorted(out, key=lambda x: -x[0]), "sampled"


def _scenarios(wl: Workload, paths, order, batch, max_scenarios, seed, routes_now, by_name) -> None:
    """Set ``wl.scenarios`` (stage sets of the batch's path unions) and each stage's ``prob``."""
    unions, method = batch_unions(paths, order, batch, max_scenarios, seed)
    stage_of_part = wl.stages.groupby("part")["stage"].apply(tuple).to_dict()
    scen: dict[tuple, float] = {}
    for p, members in unions:
        st = []
        for part, stage_ids in stage_of_part.items():
            node = part.split("#")[0]
            if node not in members:
                continue
            if not routes_now and (by_name[node].role == "router" or part.endswith("#merge")):
                continue
            st.extend(stage_ids)
        key = tuple(sorted(st))
        scen[key] = scen.get(key, 0.0) + p
    total = sum(scen.values())
    wl.scenarios = sorted(((float(p / total), tuple(int(x) for x in s)) for s, p in scen.items()),
                          key=lambda x: -x[0])
    prob = np.zeros(len(wl.stages))
    for p, s in wl.scenarios:
        prob[list(s)] += p
    wl.stages["prob"] = prob
    wl.summary["scenario_method"] = method
