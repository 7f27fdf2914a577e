"""A scenario's popularity and offered load from files (docs/runtime.md).

Popularity from a routing trace with time stamps: the JSONL routing trace the study's ``routing: trace``
reads (workloads.routing.RoutingTrace: rows ``{layer, token, experts, weights}``) with a ``t`` field, the
row's time in seconds from the trace's start. Each window counts, per MoE layer group of the study (a
group ``L<a>-<b>`` sums layers a..b), how often each expert was chosen by the rows of that window, and
ranks the experts by it; the window's popularity is the study's popularity shape carried by that ranking
(the k-th most chosen expert of the window gets the study's k-th largest selection probability: the same
relabelling as synthetic drift, dse.runtime.mapping, so the study's evaluator prices every window
unchanged). A window without rows for a group keeps the last ranking (the study's own order at first).

Offered load from a request trace: the files `dse serve --dataset` reads (dse.serving.requests.from_file:
an Azure LLM inference trace CSV with time stamps, or a JSON of length pairs arriving at ``rate``); each
window is offered the tokens of the requests arriving in it (prompt tokens for a prefill study, output
tokens for a decode study) over the window's length."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from workloads.errors import WorkloadError
from workloads.routing import distinct_indices, trace_rows

from ..errors import StudyError
from ..serving.requests import from_file
from .popularity import Popularity

GROUP = re.compile(r"L(\d+)(?:-(\d+))?$")


def group_layers(group_names: list[str], key: str) -> list[range]:
    """The model layers each expert group (``L<a>`` or ``L<a>-<b>``) covers."""
    out = []
    for name in group_names:
        m = GROUP.match(name)
        if not m:
            raise StudyError(f"expert group {name!r} is not a range of model layers (L<a> or L<a>-<b>); a routing "
                             "trace follows one model's layers", key=key)
        a = int(m.group(1))
        out.append(range(a, int(m.group(2) or a) + 1))
    return out


def read_rows(path: str | Path, key: str):
    """(t, layer, experts) of every row, checked strictly; a `StudyError` naming ``key`` and the line."""
    try:
        lines = trace_rows(path)
    except WorkloadError as exc:
        raise StudyError(str(exc), key=key) from None
    rows = []
    for n, row in lines:
        where = f"line {n}"
        if not {"t", "layer", "experts"} <= set(row):
            raise StudyError(f"{where}: a row is a JSON object with t (s), layer and experts", key=key)
        t, layer, experts = row["t"], row["layer"], row["experts"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise StudyError(f"{where}: t must be a finite number of seconds >= 0, got {t!r}"[:200], key=key)
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise StudyError(f"{where}: layer must be a whole number, got {layer!r}"[:200], key=key)
        if not distinct_indices(experts):
            raise StudyError(f"{where}: experts must be distinct expert indices >= 0, got {experts!r}"[:200], key=key)
        rows.append((float(t), layer, experts))
    if not rows:
        raise StudyError("the routing trace has no rows", key=key)
    return rows


def trace_perms(path: str | Path, group_names: list[str], q: list[np.ndarray], starts: list[float],
                lengths: list[float], key: str = "popularity.trace") -> list[Popularity]:
    """Each window's relabelling of each group's experts from a time-stamped routing trace (module
    docstring)."""
    layers = group_layers(group_names, key)
    owner = {l: g for g, r in enumerate(layers) for l in r}
    sizes = [len(x) for x in q]
    counts = np.zeros((len(starts), len(q), max(sizes, default=0)))
    edges = np.asarray(starts + [starts[-1] + lengths[-1]])
    for n, (t, layer, experts) in enumerate(read_rows(path, key), start=1):
        if layer not in owner:
            raise StudyError(f"row {n}: layer {layer} is not a MoE layer of the study's groups", key=key)
        g = owner[layer]
        if max(experts) >= sizes[g]:
            raise StudyError(f"row {n}: expert {max(experts)} of layer {layer}; it has {sizes[g]}", key=key)
        w = int(np.searchsorted(edges, t, side="right")) - 1
        if 0 <= w < len(starts):
            counts[w, g, experts] += 1
    rank_of_q = [np.argsort(-x, kind="stable") for x in q]     # the study's experts, most popular first
    current = [np.arange(s) for s in sizes]
    out = []
    for w in range(len(starts)):
        now = []
        for g, size in enumerate(sizes):
            c = counts[w, g, :size]
            if c.sum() > 0:
                order = np.argsort(-c, kind="stable")       # this window's experts, most chosen first
                perm = np.empty(size, np.int64)
                perm[order] = rank_of_q[g]                  # q_w[order[k]] = q[rank_of_q[k]]
                current[g] = perm
            now.append(current[g])
        out.append(Popularity(now))
    return out


def request_load(path: str | Path, rate: float | None, phase: str, starts: list[float],
                 lengths: list[float], key: str = "load.trace") -> np.ndarray:
    """Tokens/s offered in each window by the requests of a request trace (module docstring)."""
    try:
        requests = from_file(path, None, rate)
    except StudyError as exc:
        raise StudyError(exc.detail, key=key) from None
    tokens = requests.prompt if phase == "prefill" else requests.output
    edges = np.asarray(starts + [starts[-1] + lengths[-1]])
    per = np.bincount(np.searchsorted(edges, requests.arrival_s, side="right") - 1,
                      weights=tokens, minlength=len(starts) + 1)
    return per[: len(starts)] / np.asarray(lengths)
