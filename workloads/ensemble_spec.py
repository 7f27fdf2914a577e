"""Ensemble specs: the nodes (experts, routers, composers) and the DAG joining them, validated.

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

Morphologies: ``chain`` (each node at most one parent and one child; edges default to the node order),
``tree`` (one root, every other node one parent), ``graph`` (any DAG). Nodes without parents receive
every request.
"""
from __future__ import annotations

import networkx as nx

from .config import load_model
from .errors import WorkloadError

MORPHOLOGIES = ("chain", "tree", "graph")
COMPOSERS = ("average", "weight_sum")
ROUTE_EVERY = ("request", "token")
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
