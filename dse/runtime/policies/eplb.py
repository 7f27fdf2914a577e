"""Load-balanced expert placement after DeepSeek's EPLB (github.com/deepseek-ai/EPLB, the algorithm as its
README describes it; no code taken): per MoE layer, *replicate* the hottest experts into the layer's copy
budget (each extra copy to the expert with the highest load per copy), then *pack* the copies onto the
chiplets by load (heaviest first onto the least loaded chiplet with room, a chiplet holding at most
ceil(copies / chiplets) of the layer and never two copies of one expert). Neighbours stay close: a layer's
copies stay on the live chiplets that already hold the layer (near its attention and its hand-offs).
Packed bins are then matched to those chiplets to keep as many copies where they are as possible, so a
rebalance moves only what it must."""
from __future__ import annotations

import math

import numpy as np

from ..mapping import ExpertGroups


def replicate(load: np.ndarray, copies: int, cap: int) -> np.ndarray:
    """Copies of each expert: one each, the rest one at a time to the highest load per copy (at most
    ``cap`` each)."""
    r = np.ones(len(load), np.int64)
    for _ in range(max(0, min(copies, cap * len(load)) - len(load))):
        per = np.where(r < cap, load / r, -np.inf)
        r[int(np.argmax(per))] += 1
    return r


def pack(load: np.ndarray, r: np.ndarray, bins: int) -> list[list[int]]:
    """Each bin's experts: copies heaviest first onto the least loaded bin with room (balanced packing)."""
    room = math.ceil(int(r.sum()) / bins)
    items = sorted(((load[e] / r[e], e) for e in range(len(load)) for _ in range(r[e])), reverse=True)
    content: list[list[int]] = [[] for _ in range(bins)]
    weight = np.zeros(bins)
    for w, e in items:
        ok = [b for b in range(bins) if len(content[b]) < room and e not in content[b]] or \
            [b for b in range(bins) if e not in content[b]]
        b = min(ok, key=lambda b: (weight[b], len(content[b])))
        content[b].append(e)
        weight[b] += w
    return content


def match(content: list[list[int]], chiplets: list[int], held: dict[int, set[int]]) -> dict[int, int]:
    """Bin -> chiplet, greedily by the copies already in place (``held``: chiplet -> experts it holds)."""
    pairs = sorted(((len(set(c) & held.get(s, set())), b, s) for b, c in enumerate(content)
                    for s in chiplets), reverse=True)
    out, used = {}, set()
    for _, b, s in pairs:
        if b not in out and s not in used:
            out[b] = s
            used.add(s)
    return out


def rebalance(placement: dict[str, list[int]], groups: ExpertGroups, observed: list[np.ndarray],
              failed: frozenset[int], max_copies: int, home: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """The placement re-packed from the observed popularity (module docstring); non-expert units stay.
    ``home``: the design's own placement, whose chiplets a layer may also return to (once repaired)."""
    out = {u: list(s) for u, s in placement.items()}
    for names, q, perm in zip(groups.names, groups.q, observed):
        chips = sorted({s for n in names for s in placement[n] + (home or {}).get(n, []) if s not in failed})
        if not chips:
            continue
        load = q[perm]
        copies = sum(len(placement[n]) for n in names)
        r = replicate(load, copies, min(max_copies, len(chips)))
        content = pack(load, r, len(chips))
        held: dict[int, set[int]] = {}
        for e, n in enumerate(names):
            for s in placement[n]:
                held.setdefault(s, set()).add(e)
        where = match(content, chips, held)
        new = {n: [] for n in names}
        for b, experts in enumerate(content):
            for e in experts:
                new[names[e]].append(where[b])
        for e, n in enumerate(names):       # copies already in place keep their order (no move)
            keep = [s for s in placement[n] if s in new[n]]
            out[n] = keep + [s for s in new[n] if s not in keep]
    return out
