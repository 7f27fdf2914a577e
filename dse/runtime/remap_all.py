"""The evaluator's failure re-mapping (dse.model.population_kernel.remapped_design: surviving replicas take
over, orphans on the survivor with most free HBM) of many designs in one compiled call: the search's
designs of a package variant each re-map their own mapping once per failed set (dse.runtime.derive), and a
call per design paid Numba's dispatch of the kernel's tables and scratch (~160 arrays) each time. Each
design's result is `Evaluator.remapped_arrays`' for it, bit for bit: the same function on the same
arrays, one after another on the same scratch (which it leaves as it found it)."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from ..model.population_kernel import remapped_design


@nb.njit(cache=True)
def remapped_designs(T, n, dead, n_dead, kind, stacks, slots, ncopy, split, W):
    """Per design r: (whether every unit found a chiplet, slots ``[U, C]``, copies ``[U]``) after the
    chiplets ``dead[r, :n_dead[r]]`` (sorted) of its ``n[r]`` die, on its HBM ``stacks[r]``; ``T``, ``split``
    and the scratch ``W``: the package evaluator's (`Evaluator.kernel`, ``space.split``, `workspace`)."""
    ok = np.zeros(n.shape[0], np.bool_)
    out_slots, out_count = np.empty_like(slots), np.empty_like(ncopy)
    for r in range(n.shape[0]):
        good, s, c = remapped_design(T, n[r], dead[r, : n_dead[r]].copy(), kind[r], stacks[r], slots[r], ncopy[r],
                                     split, W)
        ok[r] = good
        out_slots[r] = s
        out_count[r] = c
    return ok, out_slots, out_count


class Request(NamedTuple):
    """A re-mapping to compute: the design's kernel arrays (one design: its package), the slots ``[U, C]``,
    copies ``[U]`` and HBM stacks ``[S]`` to re-map, and the chiplets that failed."""

    base: object
    slots: np.ndarray
    ncopy: np.ndarray
    stacks: np.ndarray
    failed: frozenset


def remap_many(ev, requests: list[Request], workspace) -> list[tuple[bool, np.ndarray, np.ndarray]]:
    """`Evaluator.remapped_arrays` of each `Request`, in one call of `remapped_designs` on the package
    evaluator ``ev``'s ``workspace`` (of the requests' copy width)."""
    if not requests:
        return []
    dead = np.zeros((len(requests), max(1, max(len(q.failed) for q in requests))), np.int64)
    n_dead = np.zeros(len(requests), np.int64)
    for r, q in enumerate(requests):
        chips = sorted(set(q.failed))
        dead[r, : len(chips)] = chips
        n_dead[r] = len(chips)
    n = np.array([int(q.base.rows[0] * q.base.cols[0]) for q in requests], np.int64)
    kind = np.stack([q.base.kind[0] for q in requests])
    stacks, slots = np.stack([q.stacks for q in requests]), np.stack([q.slots for q in requests])
    ncopy = np.stack([q.ncopy for q in requests])
    ok, new_slots, count = remapped_designs(ev.kernel, n, dead, n_dead, kind, stacks, slots, ncopy, ev.space.split,
                                            workspace)
    return [(bool(ok[r]), new_slots[r], count[r]) for r in range(len(requests))]
