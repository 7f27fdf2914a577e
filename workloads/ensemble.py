"""Ensembles of expert models (EoE): routers, expert LLMs and composers as one `Workload`.

The spec (nodes, edges, morphologies) is parsed in `ensemble_spec`; request paths and the batch
scenarios in `ensemble_scenarios`. This module builds each node's workload and joins them.

Sequential aggregation is an edge from an expert (or an ``average`` composer) to an expert: the child
takes its parents' final hidden states (projected if the widths differ) as its input sequence, the
parents' positions concatenated (Mixture-of-Agents: the aggregator's prompt holds every proposer's
output), and its context is the sum of theirs. Only nodes without such a child run an LM head.

Routing happens per request by default (``route_every: request``): routers (and weight-sum merges) run
in the prefill step and the choice holds for the request's decode steps, so a decode step runs no router.
``route_every: token`` runs them in every step.

A member model runs on the requests routed to it: given it runs, ``B v / (1 - (1 - v)^B)`` of them in
expectation (v its per-request visit probability); its operator rows and unit probabilities are those
of that (fractional) batch, conditional on its stages running. Member units are named
``<node>/<unit>`` and carry ``model=<node>``; their ``kv_bytes_per_token`` is scaled by ``v`` (and the
member's context over the study's) so that ``kv_bytes_per_token x batch x context`` is the expected cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import networkx as nx
import pandas as pd

from .builder import Builder
from .ensemble_scenarios import _scenarios, request_paths
from .ensemble_spec import _error, _parse
from .precision import bytes_per_element
from .transformer import (SOFTMAX_FLOPS_PER_ELEMENT, RMSNORM_FLOPS_PER_ELEMENT, TOKEN_ID_BYTES, check_step,
                          extract_transformer)
from .workload import OP_COLUMNS, Workload, summarize


def _same_architecture(a, b) -> bool:
    return all(getattr(a, f.name) == getattr(b, f.name) for f in fields(a) if f.name != "name")


def extract_ensemble(spec: dict, phase: str = "decode", batch: int = 1, context: int = 2048,
                     precision: str = "bf16", routing: dict | None = None, per_layer: bool = False,
                     seed: int = 0, max_scenarios: int = 64, kv_precision: str | None = None,
                     fused_attention: bool = False) -> Workload:
    """One step of an ensemble of expert models as a `Workload` (see the module docs and `ensemble_spec`;
    ``kv_precision`` and ``fused_attention`` as in `extract_transformer`)."""
    check_step(phase, batch, context)
    if phase == "train":
        raise _error("an ensemble's members train separately: extract each member's model with phase 'train'")
    if int(batch) != batch:
        raise _error(f"batch must be a whole number of requests, got {batch}")
    if max_scenarios < 1:
        raise _error(f"max_scenarios must be >= 1, got {max_scenarios}")
    nodes, by_name, g, morphology, route_every = _parse(spec)
    wbytes = bytes_per_element(precision)
    q_step = context if phase == "prefill" else 1
    routes_now = route_every == "token" or phase == "prefill"
    weight_sources = _weight_sources(nodes, by_name, g)

    paths = request_paths(nodes, g, seed)
    order = [n.name for n in nodes]
    visit = {name: sum(p for s, p in paths if name in s) for name in order}
    runs = {name: 1.0 - (1.0 - v) ** batch for name, v in visit.items()}
    requests = {name: (batch * v / runs[name] if runs[name] > 0 else 0.0) for name, v in visit.items()}

    j = _Join(g=g, by_name=by_name, weight_sources=weight_sources, phase=phase, context=context,
              precision=precision, wbytes=wbytes, q_step=q_step, routes_now=routes_now, visit=visit, runs=runs,
              requests=requests, member=dict(routing=routing, per_layer=per_layer, kv_precision=kv_precision,
                                             fused_attention=fused_attention))
    for i, name in enumerate(nx.topological_sort(g)):
        _add_node(j, name, seed + i)
    _handoffs(j, max(wbytes, 1.0))

    wl = _assemble(j.parts, g, by_name, j.edges, phase, batch, context, precision, q_step)
    _scenarios(wl, paths, order, batch, max_scenarios, seed, routes_now, by_name)
    ens = g.copy()
    for name in ens:
        ens.nodes[name].update(role=by_name[name].role, visit_prob=float(visit[name]), run_prob=float(runs[name]),
                               requests_if_run=float(requests[name]),
                               model=by_name[name].raw.get("model") or "", weight_source=name in weight_sources)
    wl.ensemble = ens
    wl.summary = _summary(wl, spec, morphology, route_every, j.extra, nodes, visit)
    return wl


def _weight_sources(nodes, by_name, g) -> dict[str, str]:
    """Experts feeding a weight-sum composer (they hand over weights only), each with its composer."""
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
    return weight_sources


@dataclass
class _Join:
    """What building and joining the nodes' workloads shares: the step, the ensemble graph, each node's
    visit and run probabilities and requests if it runs (``member``: extract_transformer's options), and
    what is built so far: each node's output (hidden width, positions per request, context), the parts
    (node -> workload), the units receiving a node's inputs and sending its output, unit -> unit
    hand-offs (bytes), and the summary's sums."""
    g: nx.DiGraph
    by_name: dict
    weight_sources: dict[str, str]
    phase: str
    context: int
    precision: str
    wbytes: float
    q_step: int
    routes_now: bool
    visit: dict[str, float]
    runs: dict[str, float]
    requests: dict[str, float]
    member: dict
    out_shape: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    parts: list[tuple[str, Workload]] = field(default_factory=list)
    entry_unit: dict[str, list[str]] = field(default_factory=dict)
    exit_unit: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[str, str, float]] = field(default_factory=list)
    extra: dict = field(default_factory=lambda: {"total_params": 0.0, "active": 0.0, "kv": 0.0})


def _add_node(j: _Join, name: str, seed: int) -> None:
    """Node ``name``'s workload (an expert or weight-sum composer, a router, an average composer), from
    the shape its parents hand over; a node no request reaches, or a weight source, has none."""
    node, g, by_name = j.by_name[name], j.g, j.by_name
    b_n = j.requests[name]
    if name in j.weight_sources or b_n <= 0:
        if node.role == "expert" and name in j.weight_sources:
            j.out_shape[name] = (node.cfg.hidden, j.q_step, j.context)
        return
    parents = list(g.predecessors(name))
    hidden_parents = [p for p in parents if by_name[p].role != "router" and p not in j.weight_sources]
    if hidden_parents:
        widths = {j.out_shape[p][0] for p in hidden_parents}
        if len(widths) > 1 and node.role != "composer":
            raise _error(f"node {name!r}: inputs {hidden_parents} hand over different hidden widths {sorted(widths)}")
        q_in = sum(j.out_shape[p][1] for p in hidden_parents) if node.role == "expert" else j.q_step
        ctx_in = sum(j.out_shape[p][2] for p in hidden_parents) if node.role == "expert" else j.context
    else:
        q_in, ctx_in = j.q_step, j.context
    feeds_hidden = any(by_name[c].role == "expert" or (by_name[c].role == "composer" and by_name[c].kind == "average")
                       for c in g.successors(name))
    if node.role in ("expert",) or (node.role == "composer" and node.kind == "weight_sum"):
        _add_member(j, name, hidden_parents, q_in, ctx_in, feeds_hidden, seed)
    elif node.role == "router":
        wl = _router_workload(node, g, j.phase, b_n, j.context, j.q_step, j.precision, j.member["routing"], seed,
                              j.routes_now, j.member["fused_attention"])
        j.extra["total_params"] += wl.summary["total_params"]
        if j.routes_now:
            j.extra["active"] += j.visit[name] * wl.summary["active_params_per_token"]
        j.parts.append((name, wl))
        j.entry_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["stage"] == 0]
        j.exit_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "router"]
        j.out_shape[name] = (0, j.q_step, j.context)
    else:   # average composer
        inputs = [by_name[p] for p in g.predecessors(name)]
        hid = {p.cfg.hidden for p in inputs}
        vocab = {p.cfg.vocab for p in inputs}
        if len(hid) > 1 or len(vocab) > 1:
            raise _error(f"average composer {name!r}: inputs must share hidden width and vocabulary "
                         f"(got hidden {sorted(hid)}, vocab {sorted(vocab)})")
        wl = _average_workload(name, inputs, b_n, j.q_step, j.context, j.phase, j.precision, feeds_hidden)
        j.extra["total_params"] += wl.summary["total_params"]
        j.extra["active"] += j.visit[name] * wl.summary["total_params"]
        j.parts.append((name, wl))
        j.entry_unit[name] = j.exit_unit[name] = list(wl.graph.nodes)
        j.out_shape[name] = (inputs[0].cfg.hidden, j.q_step, j.context)


def _add_member(j: _Join, name: str, hidden_parents: list[str], q_in: int, ctx_in: int, feeds_hidden: bool,
                seed: int) -> None:
    """An expert model (or a weight-sum composer's merged model, with its merge unit) on the requests routed
    to it, fed its parents' hidden states if any; its KV cache scaled to the expected cache."""
    node, g, by_name = j.by_name[name], j.g, j.by_name
    cfg = node.cfg if node.role == "expert" else by_name[list(g.predecessors(name))[0]].cfg
    width_in = max(j.out_shape[p][0] for p in hidden_parents) if (hidden_parents and node.role == "expert") else 0
    wl = extract_transformer(cfg, phase=j.phase, batch=j.requests[name], context=ctx_in, precision=j.precision,
                             routing=j.member["routing"], per_layer=j.member["per_layer"], seed=seed, tp=node.tp,
                             q_len=q_in if (hidden_parents or j.phase == "prefill") else 1,
                             input_width=width_in, lm_head=not feeds_hidden, kv_precision=j.member["kv_precision"],
                             fused_attention=j.member["fused_attention"])
    scale = j.visit[name] * ctx_in / j.context
    for _, d in wl.graph.nodes(data=True):
        d["kv_bytes_per_token"] *= scale
    j.extra["active"] += j.visit[name] * wl.summary["active_params_per_token"]
    j.extra["kv"] += j.visit[name] * wl.summary["kv_cache_bytes_per_token"]
    j.extra["total_params"] += wl.summary["total_params"]
    j.out_shape[name] = (cfg.hidden, q_in, ctx_in)
    if node.role == "composer":
        merge = _merge_unit(name, [by_name[p] for p in g.predecessors(name)], j.runs, j.wbytes, j.routes_now)
        j.extra["total_params"] += merge.summary["total_params"]
        j.extra["total_params"] -= wl.summary["total_params"]   # merged copy is not new params
        j.parts.append((name + "#merge", merge))
        j.entry_unit[name + "#merge"] = list(merge.graph.nodes)
        if j.routes_now:   # the summed weights are written where the merged model's units live
            for u, d in wl.graph.nodes(data=True):
                j.edges.append((f"{name}/merge", f"{name}/{u}", d["weight_bytes"]))
    j.parts.append((name, wl))
    j.entry_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "embedding"]
    j.exit_unit[name] = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "lm_head"]


def _handoffs(j: _Join, abytes: float) -> None:
    """Hand-offs between nodes: token ids from a router to the experts it alone feeds (when it routes in
    this step), hidden states from the other nodes, spread over the sending and receiving units."""
    by_name = j.by_name
    for src, dst in j.g.edges:
        if src in j.weight_sources or dst not in j.entry_unit:
            continue
        s_node = by_name[src]
        if s_node.role == "router":
            if not j.routes_now or by_name[dst].role != "expert" or any(
                    by_name[p].role != "router" for p in j.g.predecessors(dst) if p not in j.weight_sources):
                continue
            tokens = j.requests[dst] * j.q_step
            for u in j.exit_unit[src]:
                for v in j.entry_unit[dst]:
                    j.edges.append((f"{src}/{u}", f"{dst}/{v}", tokens * TOKEN_ID_BYTES / len(j.entry_unit[dst])))
        else:
            width, q_out, _ = j.out_shape[src]
            nbytes = j.requests[src] * q_out * width * abytes
            for u in j.exit_unit[src]:
                for v in j.entry_unit[dst]:
                    j.edges.append((f"{src}/{u}", f"{dst}/{v}", nbytes / max(len(j.exit_unit[src]), 1)))


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


def _router_workload(node, g, phase, b_n, context, q_step, precision, routing, seed, routes_now,
                     fused_attention=False) -> Workload:
    n_children = g.out_degree(node.name)
    wbytes = bytes_per_element(precision)
    if node.cfg is not None:   # a small LM: its forward pass, then a linear head over the children
        wl = extract_transformer(node.cfg, phase=phase, batch=max(b_n, 1e-9), context=context,
                                 precision=precision, routing=routing, seed=seed, lm_head=False,
                                 fused_attention=fused_attention)
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


def _summary(wl, spec, morphology, route_every, extra, nodes, visit) -> dict:
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
