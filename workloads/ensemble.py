"""Ensembles of expert models (EoE): routers, expert LLMs and composers as one `Workload`.

An ensemble is a DAG of nodes (``spec["nodes"]``, edges ``spec["edges"]``):

* expert: a dense or MoE model (preset or config.json path, optional ``tp``);
* router: a small model (``router: {model: gpt2}``: its forward pass plus a linear head over its
  children) or a classifier (``router: {classifier: {in_features: F}}``: one linear layer F x children
  on the pooled prompt). It sends each request to ``top_k`` of its children: edge probabilities (the
  third item of an edge) for top-1, or Plackett-Luce weights for top_k > 1 (draw without replacement);
  without probabilities the router's ``distribution`` rule (uniform, zipf s, dirichlet alpha) gives them.
* composer: ``average`` (representation averaging: the final hidden states of its inputs are averaged
  and one LM head runs) or ``weight_sum`` (weight summation: its input experts' weights are summed into
  one model, which then runs; the inputs hold weights only and do not run themselves).

Sequential aggregation is an edge from an expert (or an ``average`` composer) to an expert: the child
takes its parents' final hidden states (projected if the widths differ) as its input sequence, the
parents' positions concatenated (Mixture-of-Agents: the aggregator's prompt holds every proposer's
output), and its context is the sum of theirs. Only nodes without such a child run an LM head.

Morphologies: ``chain`` (each node at most one parent and one child; edges default to the node order),
``tree`` (one root, every other node one parent), ``graph`` (any DAG). Nodes without parents receive
every request.

Routing happens per request by default (``route_every: request``): routers (and weight-sum merges) run
in the prefill step and the choice holds for the request's decode steps, so a decode step runs no router.
``route_every: token`` runs them in every step.

Scenarios. A request's path is the set of nodes it visits; requests are independent, so for a batch of
B the step runs the union of B paths. ``Workload.scenarios`` lists those unions (as stage sets) with
their probabilities: exact (the distribution of B-fold unions, built by repeated convolution) when it has
at most ``max_scenarios`` distinct sets; otherwise ``max_scenarios`` batches sampled with the seed, each
of weight 1/max_scenarios (duplicates merged), an unbiased Monte-Carlo estimate of any step average.
A stage's ``prob`` is the total probability of the scenarios holding it; ``after`` may name stages of
nodes absent from a scenario, which the scenario's critical path skips.

A member model runs on the requests routed to it: given it runs, ``B v / (1 - (1 - v)^B)`` of them in
expectation (v its per-request visit probability); its operator rows and unit probabilities are those
of that (fractional) batch, conditional on its stages running. Member units are named
``<node>/<unit>`` and carry ``model=<node>``; their ``kv_bytes_per_token`` is scaled by ``v`` (and the
member's context over the study's) so that ``kv_bytes_per_token x batch x context`` is the expected cache.
"""
from __future__ import annotations

import itertools
from dataclasses import fields

import networkx as nx
import numpy as np
import pandas as pd

from .builder import Builder
from .config import load_model
from .errors import WorkloadError
from .precision import bytes_per_element
from .routing import selection_probabilities
from .transformer import (SOFTMAX_FLOPS_PER_ELEMENT, RMSNORM_FLOPS_PER_ELEMENT, TOKEN_ID_BYTES, check_step,
                          extract_transformer)
from .workload import OP_COLUMNS, Workload

MORPHOLOGIES = ("chain", "tree", "graph")
COMPOSERS = ("average", "weight_sum")
ROUTE_EVERY = ("request", "token")
MAX_REQUEST_PATHS = 4096
MAX_EXACT_UNIONS = 4096
NODE_KEYS = {"name", "model", "tp", "router", "composer", "top_k", "distribution", "s", "alpha"}


def _error(msg: str) -> WorkloadError:
    return WorkloadError(f"ensemble: {msg}")


class _Node:
    def __init__(self, index: int, raw: dict):
        if not isinstance(raw, dict) or "name" not in raw:
            raise _error(f"nodes[{index}] must be a mapping with a name and one of model, router, composer")
        unknown = set(raw) - NODE_KEYS
        if unknown:
            raise _error(f"nodes[{index}]: unknown key {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(NODE_KEYS))}")
        self.name = str(raw["name"])
        if not self.name or "/" in self.name:
            raise _error(f"nodes[{index}].name {self.name!r} must be non-empty and contain no '/'")
        roles = [r for r in ("model", "router", "composer") if raw.get(r) is not None]
        if len(roles) != 1:
            raise _error(f"node {self.name!r} needs exactly one of model, router, composer (got {roles or 'none'})")
        self.role = {"model": "expert", "router": "router", "composer": "composer"}[roles[0]]
        self.raw = raw
        self.tp = int(raw.get("tp", 1))
        self.top_k = int(raw.get("top_k", 1))
        self.cfg = None
        if self.role == "expert":
            self.cfg = load_model(raw["model"])
        elif self.role == "router":
            r = raw["router"]
            if not isinstance(r, dict) or len([k for k in ("model", "classifier") if k in r]) != 1 or set(r) - {"model", "classifier"}:
                raise _error(f"router {self.name!r}: give router.model (a small LM) or router.classifier "
                             "({in_features: F})")
            if "model" in r:
                self.cfg = load_model(r["model"])
            else:
                c = r["classifier"]
                if not isinstance(c, dict) or not isinstance(c.get("in_features"), int) or c["in_features"] < 1:
                    raise _error(f"router {self.name!r}: classifier.in_features must be a whole number >= 1")
                self.in_features = c["in_features"]
        else:
            if raw["composer"] not in COMPOSERS:
                raise _error(f"composer {self.name!r}: unknown composition {raw['composer']!r}; "
                             f"allowed: {', '.join(COMPOSERS)}")
            self.kind = raw["composer"]


def _parse(spec: dict):
    if not isinstance(spec, dict):
        raise _error("an ensemble is a mapping with nodes, edges, morphology")
    unknown = set(spec) - {"name", "morphology", "nodes", "edges", "route_every"}
    if unknown:
        raise _error(f"unknown key {sorted(unknown)[0]!r}; allowed: name, morphology, nodes, edges, route_every")
    morphology = spec.get("morphology", "graph")
    if morphology not in MORPHOLOGIES:
        raise _error(f"unknown morphology {morphology!r}; allowed: {', '.join(MORPHOLOGIES)}")
    route_every = spec.get("route_every", "request")
    if route_every not in ROUTE_EVERY:
        raise _error(f"unknown route_every {route_every!r}; allowed: {', '.join(ROUTE_EVERY)}")
    raw_nodes = spec.get("nodes") or []
    if not raw_nodes:
        raise _error("nodes is empty; list the experts, routers and composers")
    nodes = [_Node(i, r) for i, r in enumerate(raw_nodes)]
    by_name = {n.name: n for n in nodes}
    if len(by_name) != len(nodes):
        raise _error("node names must be unique")
    raw_edges = spec.get("edges")
    if raw_edges is None:
        if morphology != "chain":
            raise _error(f"morphology {morphology!r} needs edges: [[src, dst], [src, dst, prob], ...]")
        raw_edges = [[a.name, b.name] for a, b in zip(nodes, nodes[1:])]
    g = nx.DiGraph()
    g.add_nodes_from(by_name)
    for i, e in enumerate(raw_edges):
        if not isinstance(e, (list, tuple)) or len(e) not in (2, 3):
            raise _error(f"edges[{i}] must be [src, dst] or [src, dst, probability], got {e!r}")
        src, dst = str(e[0]), str(e[1])
        for end in (src, dst):
            if end not in by_name:
                raise _error(f"edges[{i}] names unknown node {end!r}; nodes: {', '.join(by_name)}")
        if len(e) == 3:
            if by_name[src].role != "router":
                raise _error(f"edges[{i}]: only a router's edges take a probability ({src!r} is an {by_name[src].role})")
            if not isinstance(e[2], (int, float)) or not e[2] >= 0:
                raise _error(f"edges[{i}]: probability must be a number >= 0, got {e[2]!r}")
        g.add_edge(src, dst, prob=None if len(e) == 2 else float(e[2]), order=i)
    if not nx.is_directed_acyclic_graph(g):
        raise _error("edges form a cycle; an ensemble is a DAG")
    _check_morphology(g, morphology)
    for n in nodes:
        kids = list(g.successors(n.name))
        if n.role == "router":
            if not kids:
                raise _error(f"router {n.name!r} has no children")
            if not 1 <= n.top_k <= len(kids):
                raise _error(f"router {n.name!r}: top_k {n.top_k} must be in 1..{len(kids)} (its children)")
        if n.role == "composer":
            parents = list(g.predecessors(n.name))
            if not parents or any(by_name[p].role != "expert" for p in parents):
                raise _error(f"composer {n.name!r} needs one or more expert inputs")
    return nodes, by_name, g, morphology, route_every


def _check_morphology(g: nx.DiGraph, morphology: str) -> None:
    if morphology == "chain":
        bad = [n for n in g if g.in_degree(n) > 1 or g.out_degree(n) > 1]
        if bad or not nx.is_weakly_connected(g):
            raise _error(f"a chain is one path: node {bad[0] if bad else next(iter(g))!r} breaks it")
    elif morphology == "tree":
        roots = [n for n in g if g.in_degree(n) == 0]
        many = [n for n in g if g.in_degree(n) > 1]
        if len(roots) != 1 or many or not nx.is_weakly_connected(g):
            raise _error("a tree has one root and every other node exactly one parent"
                         + (f" (node {many[0]!r} has {g.in_degree(many[0])})" if many else f" (roots: {roots})"))


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


def _same_architecture(a, b) -> bool:
    return all(getattr(a, f.name) == getattr(b, f.name) for f in fields(a) if f.name != "name")


def extract_ensemble(spec: dict, phase: str = "decode", batch: int = 1, context: int = 2048,
                     precision: str = "bf16", routing: dict | None = None, per_layer: bool = False,
                     seed: int = 0, max_scenarios: int = 64) -> Workload:
    """One step of an ensemble of expert models as a `Workload` (module docstring)."""
    check_step(phase, batch, context)
    if int(batch) != batch:
        raise _error(f"batch must be a whole number of requests, got {batch}")
    if max_scenarios < 1:
        raise _error(f"max_scenarios must be >= 1, got {max_scenarios}")
    nodes, by_name, g, morphology, route_every = _parse(spec)
    wbytes = bytes_per_element(precision)
    abytes = max(wbytes, 1.0)
    q_step = context if phase == "prefill" else 1
    routes_now = route_every == "token" or phase == "prefill"

    # weight-sum inputs hold weights only
    weight_sources: dict[str, str] = {}
    for n in nodes:
        if n.role == "composer" and n.kind == "weight_sum":
            parents = list(g.predecessors(n.name))
            for p in parents:
                if any(by_name[c].role != "composer" or by_name[c].kind != "weight_sum" for c in g.successors(p)):
                    raise _error(f"expert {p!r} feeds a weight_sum composer and so cannot feed anything else")
                if not _same_architecture(by_name[p].cfg, by_name[parents[0]].cfg):
                    raise _error(f"weight_sum composer {n.name!r}: inputs {parents[0]!r} and {p!r} differ in "
                                 "architecture; weight summation needs identical shapes")
                weight_sources[p] = n.name

    paths = request_paths(nodes, g, seed)
    order = [n.name for n in nodes]
    visit = {name: sum(p for s, p in paths if name in s) for name in order}
    runs = {name: 1.0 - (1.0 - v) ** batch for name, v in visit.items()}
    requests = {name: (batch * v / runs[name] if runs[name] > 0 else 0.0) for name, v in visit.items()}

    # what each node hands on: (hidden width, positions per request, context) of its output
    out_shape: dict[str, tuple[int, int, int]] = {}
    parts: list[tuple[str, Workload]] = []       # node -> its workload (members, routers, composers)
    entry_unit: dict[str, list[str]] = {}        # node -> units that receive its inputs
    exit_unit: dict[str, list[str]] = {}         # node -> units that send its output
    edges: list[tuple[str, str, float]] = []     # unit -> unit hand-offs (bytes)
    extra_summary = {"total_params": 0.0, "active": 0.0, "kv": 0.0}

    for i, name in enumerate(nx.topological_sort(g)):
        node = by_name[name]
        b_n = requests[name]
        if name in weight_sources or b_n <= 0:
            if node.role == "expert" and name in weight_sources:
                out_shape[name] = (node.cfg.hidden, q_step, context)
            continue
        parents = list(g.predecessors(name))
        hidden_parents = [p for p in parents if by_name[p].role != "router" and p not in weight_sources]
        if hidden_parents:
            widths = {out_shape[p][0] for p in hidden_parents}
            if len(widths) > 1 and node.role != "composer":
                raise _error(f"node {name!r}: inputs {hidden_parents} hand over different hidden widths {sorted(widths)}")
            q_in = sum(out_shape[p][1] for p in hidden_parents) if node.role == "expert" else q_step
            ctx_in = sum(out_shape[p][2] for p in hidden_parents) if node.role == "expert" else context
        else:
            q_in, ctx_in = q_step, context
        feeds_hidden = any(by_name[c].role == "expert" or (by_name[c].role == "composer" and by_name[c].kind == "average")
                           for c in g.successors(name))
        if node.role in ("expert",) or (node.role == "composer" and node.kind == "weight_sum"):
            cfg = node.cfg if node.role == "expert" else by_name[list(g.predecessors(name))[0]].cfg
            width_in = max(out_shape[p][0] for p in hidden_parents) if (hidden_parents and node.role == "expert") else 0
            wl = extract_transformer(cfg, phase=phase, batch=b_n, context=ctx_in, precision=precision,
                                     routing=routing, per_layer=per_layer, seed=seed + i, tp=node.tp,
                                     q_len=q_in if (hidden_parents or phase == "prefill") else 1,
                                     input_width=width_in, lm_head=not feeds_hidden)
            scale = visit[name] * ctx_in / context
            for _, d in wl.graph.nodes(data=True):
                d["kv_bytes_per_token"] *= scale
            extra_summary["active"] += visit[name] * wl.summary["active_params_per_token"]
            extra_summary["kv"] += visit[name] * wl.summary["kv_cache_bytes_per_token"]
            extra_summary["total_params"] += wl.summary["total_params"]
            out_shape[name] = (cfg.hidden, q_in, ctx_in)
            if node.role == "composer":
                merge = _merge_unit(name, [by_name[p] for p in g.predecessors(name)], runs, wbytes, routes_now)
                extra_summary["total_params"] += merge.summary["total_params"]
                extra_summary["total_params"] -= wl.summary["total_params"]   # merged copy is not new params
                parts.append((name + "#merge", merge))
                entry_unit[name + "#merge"] = list(merge.graph.nodes)
                if routes_now:   # the summed weights are written where the merged model's units live
                    for u, d in wl.graph.nodes(data=True):
                        edges.append((f"{name}/merge", f"{name}/{u}", d["weight_bytes"]))
            parts.append((name, wl))
            entry_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "embedding"]
            exit_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "lm_head"]
        elif node.role == "router":
            wl = _router_workload(node, g, phase, b_n, context, q_step, precision,
                                  routing, seed + i, routes_now)
            extra_summary["total_params"] += wl.summary["total_params"]
            if routes_now:
                extra_summary["active"] += visit[name] * wl.summary["active_params_per_token"]
            parts.append((name, wl))
            entry_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["stage"] == 0]
            exit_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "router"]
            out_shape[name] = (0, q_step, context)
        else:   # average composer
            inputs = [by_name[p] for p in g.predecessors(name)]
            hid = {p.cfg.hidden for p in inputs}
            vocab = {p.cfg.vocab for p in inputs}
            if len(hid) > 1 or len(vocab) > 1:
                raise _error(f"average composer {name!r}: inputs must share hidden width and vocabulary "
                             f"(got hidden {sorted(hid)}, vocab {sorted(vocab)})")
            wl = _average_workload(name, inputs, b_n, q_step, context, phase, precision, feeds_hidden)
            extra_summary["total_params"] += wl.summary["total_params"]
            extra_summary["active"] += visit[name] * wl.summary["total_params"]
            parts.append((name, wl))
            entry_unit[name] = exit_unit[name] = list(wl.graph.nodes)
            out_shape[name] = (inputs[0].cfg.hidden, q_step, context)

    # ---- hand-offs between nodes ----
    for src, dst in g.edges:
        if src in weight_sources or dst not in entry_unit:
            continue
        s_node = by_name[src]
        if s_node.role == "router":
            if not routes_now or by_name[dst].role != "expert" or any(
                    by_name[p].role != "router" for p in g.predecessors(dst) if p not in weight_sources):
                continue
            tokens = requests[dst] * q_step
            for u in exit_unit[src]:
                for v in entry_unit[dst]:
                    edges.append((f"{src}/{u}", f"{dst}/{v}", tokens * TOKEN_ID_BYTES / len(entry_unit[dst])))
        else:
            width, q_out, _ = out_shape[src]
            nbytes = requests[src] * q_out * width * abytes
            for u in exit_unit[src]:
                for v in entry_unit[dst]:
                    edges.append((f"{src}/{u}", f"{dst}/{v}", nbytes / max(len(exit_unit[src]), 1)))

    wl = _assemble(parts, g, by_name, edges, phase, batch, context, precision, q_step)
    _scenarios(wl, paths, order, batch, max_scenarios, seed, routes_now, by_name)
    ens = g.copy()
    for name in ens:
        ens.nodes[name].update(role=by_name[name].role, visit_prob=float(visit[name]), run_prob=float(runs[name]),
                               requests_if_run=float(requests[name]),
                               model=by_name[name].raw.get("model") or "", weight_source=name in weight_sources)
    wl.ensemble = ens
    wl.summary = _summary(wl, spec, morphology, route_every, extra_summary, nodes, visit)
    return wl


def _merge_unit(name, inputs, runs, wbytes, routes_now) -> Workload:
    """The weight-sum merge: reads each selected input's weights and accumulates them (2 FLOPs/weight).

    Input i is read when some request of the batch selected it: probability ``runs[i] / runs[composer]``
    given the merge runs (selecting an input implies visiting the composer).
    """
    b = Builder(wbytes, wbytes)
    b.unit("merge", "composer", 0, 1)
    total = 0.0
    for n in inputs:
        params = _model_params(n.cfg)
        total += params
        prob = min(runs[n.name] / runs[name], 1.0) if routes_now and runs[name] > 0 else 0.0
        b.vector(["merge"], f"merge_{n.name}", params, 2, 1, weight_elements=params, prob=prob, params=False)
    b.add_params("merge", total, split=False)
    ops = b.ops()
    ops["expert"], ops["layer"] = -1, -1
    return Workload(name=name, phase="", batch=0, context=0, precision="", tokens_per_step=0, ops=ops,
                    graph=b.graph, stages=pd.DataFrame([dict(stage=0, name="merge", repeat=1, prob=1.0, after=())]),
                    summary=dict(total_params=total))


def _model_params(cfg) -> float:
    return extract_transformer(cfg, phase="decode", batch=1, context=1).summary["total_params"]


def _router_workload(node, g, phase, b_n, context, q_step, precision, routing, seed, routes_now) -> Workload:
    n_children = g.out_degree(node.name)
    wbytes = bytes_per_element(precision)
    if node.cfg is not None:   # a small LM: its forward pass, then a linear head over the children
        wl = extract_transformer(node.cfg, phase=phase, batch=max(b_n, 1e-9), context=context,
                                 precision=precision, routing=routing, seed=seed, lm_head=False)
        head = next(u for u, d in wl.graph.nodes(data=True) if d["kind"] == "lm_head")
        wl.graph.nodes[head]["kind"] = "router"
        h = node.cfg.hidden
        extra = _head_rows(head, b_n, h, n_children, wbytes)
        wl.ops = pd.concat([wl.ops, extra], ignore_index=True)
        wl.graph.nodes[head]["params"] += h * n_children
        wl.graph.nodes[head]["weight_bytes"] += h * n_children * wbytes
        wl.summary["total_params"] += h * n_children
        wl.summary["active_params_per_token"] += h * n_children
        return wl
    b = Builder(wbytes, max(wbytes, 1.0))
    b.unit("classifier", "router", 0, 1, tokens=b_n)
    b.gemm(["classifier"], "router_head", b_n, node.in_features, n_children, 1, tokens=b_n)
    b.vector(["classifier"], "router_softmax", b_n * n_children, SOFTMAX_FLOPS_PER_ELEMENT, 1, tokens=b_n)
    ops = b.ops()
    ops["expert"], ops["layer"] = -1, -1
    params = node.in_features * n_children
    return Workload(name=node.name, phase=phase, batch=b_n, context=context, precision=precision,
                    tokens_per_step=b_n, ops=ops, graph=b.graph,
                    stages=pd.DataFrame([dict(stage=0, name="router", repeat=1, prob=1.0, after=())]),
                    summary=dict(total_params=float(params), active_params_per_token=float(params)))


def _head_rows(unit, rows, h, n, wbytes) -> pd.DataFrame:
    b = Builder(wbytes, max(wbytes, 1.0))
    b.unit(unit, "router", 0, 1)
    b.gemm([unit], "router_head", rows, h, n, 1, tokens=rows)
    b.vector([unit], "router_softmax", rows * n, SOFTMAX_FLOPS_PER_ELEMENT, 1, tokens=rows)
    ops = b.ops()
    ops["expert"], ops["layer"] = -1, -1
    return ops


def _average_workload(name, inputs, b_n, q_step, context, phase, precision, feeds_hidden) -> Workload:
    """Representation averaging: weighted mean of the inputs' final hidden states, then one LM head."""
    cfg = inputs[0].cfg
    h = cfg.hidden
    wbytes = bytes_per_element(precision)
    b = Builder(wbytes, max(wbytes, 1.0))
    b.unit("average", "composer", 0, 1, tokens=b_n * q_step)
    T = b_n * q_step
    b.vector(["average"], "average", T * h * len(inputs), 2, 1, tokens=T)
    if not feeds_hidden:
        b.vector(["average"], "final_norm", b_n * h, RMSNORM_FLOPS_PER_ELEMENT, 1, weight_elements=h, tokens=b_n)
        b.gemm(["average"], "lm_head", b_n, h, cfg.vocab, 1, tokens=b_n)
    ops = b.ops()
    ops["expert"], ops["layer"] = -1, -1
    params = b.graph.nodes["average"]["params"]
    return Workload(name=name, phase=phase, batch=b_n, context=context, precision=precision, tokens_per_step=T,
                    ops=ops, graph=b.graph,
                    stages=pd.DataFrame([dict(stage=0, name="average", repeat=1, prob=1.0, after=())]),
                    summary=dict(total_params=float(params)))


def _assemble(parts, g, by_name, edges, phase, batch, context, precision, q_step) -> Workload:
    """Concatenate the parts' units (prefixed ``<node>/``), stages (offset, DAG between nodes) and edges."""
    graph = nx.DiGraph()
    frames, stages = [], []
    first_stage: dict[str, int] = {}
    last_stage: dict[str, int] = {}
    for part, wl in parts:
        node = part.split("#")[0]
        prefix = f"{node}/"
        offset = len(stages)
        for u, d in wl.graph.nodes(data=True):
            d = dict(d)
            d["stage"] += offset
            d["model"] = node
            d["logical"] = prefix + d.get("logical", u)
            d.setdefault("tokens", 0.0)
            d.setdefault("first_layer", -1)
            graph.add_node(prefix + u, **d)
        for a, c, d in wl.graph.edges(data=True):
            graph.add_edge(prefix + a, prefix + c, **d)
        ops = wl.ops.copy()
        ops["unit"] = prefix + ops["unit"].astype(str)
        frames.append(ops)
        for _, st in wl.stages.iterrows():
            stages.append(dict(stage=int(st["stage"]) + offset, name=prefix + str(st["name"]),
                               repeat=int(st["repeat"]), prob=1.0,
                               after=tuple(int(a) + offset for a in st["after"]), node=node, part=part))
        first_stage.setdefault(part, offset)
        last_stage[part] = len(stages) - 1
    # the first stage of a node waits for the last stage of each parent node (and its own merge)
    for part in first_stage:
        node = part.split("#")[0]
        preds = []
        if part == node and f"{node}#merge" in last_stage:
            preds.append(last_stage[f"{node}#merge"])
        for p in g.predecessors(node):
            if p in last_stage:
                preds.append(last_stage[p])
        if part.endswith("#merge"):   # the merge follows the routers that picked its inputs
            preds = [last_stage[r] for p in g.predecessors(node) for r in g.predecessors(p) if r in last_stage]
        s = first_stage[part]
        stages[s]["after"] = tuple(sorted(set(stages[s]["after"]) | set(preds)))
    for a, c, nbytes in edges:
        graph.add_edge(a, c, bytes=float(nbytes), repeat=1)
    ops = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=OP_COLUMNS)
    T = batch * q_step
    return Workload(name="ensemble", phase=phase, batch=batch, context=context, precision=precision,
                    tokens_per_step=int(T), ops=ops, graph=graph, stages=pd.DataFrame(stages))


def _scenarios(wl: Workload, paths, order, batch, max_scenarios, seed, routes_now, by_name) -> None:
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


def _summary(wl, spec, morphology, route_every, extra, nodes, visit) -> dict:
    from .transformer import summarize
    method = wl.summary.get("scenario_method", "exact")
    logical = {}
    s = summarize(wl, None, logical, 0.0)
    s.update(model=spec.get("name", "ensemble"), model_type="ensemble", morphology=morphology,
             route_every=route_every, total_params=float(extra["total_params"]),
             active_params_per_token=float(extra["active"]), kv_cache_bytes_per_token=float(extra["kv"]),
             experts=sum(1 for n in nodes if n.role == "expert"),
             routers=sum(1 for n in nodes if n.role == "router"),
             composers=sum(1 for n in nodes if n.role == "composer"),
             visit_prob={n.name: float(visit[n.name]) for n in nodes},
             scenarios=len(wl.scenarios), scenario_method=method)
    return s
