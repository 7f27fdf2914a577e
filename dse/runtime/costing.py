"""Every design's distinct segment mappings (dse.runtime.segments: the table of distinct mappings) costed
in one call per package variant: one population call of the package evaluator (`Evaluator.decoded_metrics`,
the contract of dse.model.contract) over the mappings of every design, equal designs costed once, each
design's figures back as a named record (`StepFigures`, one row per key of its table).

A segment with links down takes the latency of the evaluator's single-link-failure report of its design
(`Evaluator.link_failure_report`: routes detoured by minimum hops), the slowest of its links, with p99
scaled alike, and the intact energy per token plus what the detours add (dse.runtime.link_energy: the
step's traffic re-routed around every link down), less the idle power the evaluator charges chiplets that
are down and draw nothing (dse.runtime.powered_off). A serving study's segments also carry its other
steps' figures (dse.runtime.serving_window.ServingFigures), through its phase's evaluator."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..model.contract import DecodedDesigns
from ..model.metrics import METRICS
from ..model.records import design_records
from .link_energy import link_energy_per_token
from .powered_off import chiplets_off, idle_energy_per_token, idle_watts, off_energy_per_token

NEEDED = ("latency_s", "latency_p99_s", "energy_j_per_token")


class StepFigures(NamedTuple):
    """Per key of a segment table: its step's latency and p99 (s) and energy per token (J), NaN where
    nothing survives; ``serving``: a serving study's other figures (else None)."""

    latency_s: np.ndarray
    latency_p99_s: np.ndarray
    energy_j_per_token: np.ndarray
    serving: object = None


class Planned(NamedTuple):
    """One design's segment table, its package variant (index) and kernel arrays."""

    table: object
    variant: int
    base: DecodedDesigns


def cost_segments(planned: list[Planned], planners: dict, serving=None) -> list[StepFigures]:
    """Each design's `StepFigures` (module docstring): one population call per package variant."""
    start = np.concatenate([[0], np.cumsum([len(p.table.keys) for p in planned])]).astype(np.int64)
    flat = np.full((int(start[-1]), 3), np.nan)         # every design's keys, one after another
    rows: list[np.ndarray] = [flat[a:b] for a, b in zip(start[:-1].tolist(), start[1:].tolist())]
    extra: list = [None] * len(planned)
    todo: dict[int, list] = {}
    for i, p in enumerate(planned):
        every = todo.setdefault(p.variant, [])
        every.extend((i, k, m) for k, m in enumerate(p.table.mappings) if m is not None)
    cols = [METRICS.index(c) for c in NEEDED]
    for variant, every in todo.items():
        every = [every[j] for j in ordered(every, planned)]     # the kernel's order, stacked once in it
        arrays = stacked(every)
        order, same = distinct_rows(every, planned, arrays)
        items = [every[j] for j in order]
        d = population(items, planned, arrays, order)
        planner = planners[variant]
        ev = planner.ev
        metrics = ev.decoded_metrics(d, with_faults=False, memory_path=False, incremental=True)[:, cols]
        intact_s = metrics[:, 0].copy()
        for j, (i, k, m) in enumerate(items):
            if m.links:
                metrics[j, :2] *= link_slowdown(ev, d, j, m.links, metrics[j, 0])
                metrics[j, 2] += link_energy_per_token(ev, planner.package_spec, d, j, m.links,
                                                       planner.tables.tokens_per_step)
        figures = serving.figures(variant, ev, d, metrics, intact_s) if serving is not None else None
        design = np.fromiter((i for i, _, _ in every), np.int64, len(every))
        key = np.fromiter((k for _, k, _ in every), np.int64, len(every))
        flat[start[design] + key] = metrics[np.asarray(same, np.int64)]
        if serving is None:
            powered_off(every, same, planned, d, rows, intact_s, ev.tables)
        for (i, k, _), j in zip(every, same) if figures is not None else ():
            if extra[i] is None:
                extra[i] = np.full((len(planned[i].table.keys), figures.shape[1]), np.nan)
            extra[i][k] = figures[j]
    return [StepFigures(r[:, 0], r[:, 1], r[:, 2], None if serving is None or x is None else serving.record(x))
            for r, x in zip(rows, extra)]


def powered_off(every: list, same: list[int], planned: list[Planned], d: DecodedDesigns, rows: list[np.ndarray],
                intact_s: np.ndarray, tables) -> None:
    """Each item of ``every`` (design index, key index, mapping; ``same``: its row of ``d``) with chiplets
    down: the energy per token of those powered off (dse.runtime.powered_off, they draw nothing) taken
    off its design's ``rows``; a single chiplet off, all at once (`idle_energy_per_token` element by
    element, the same figure as `off_energy_per_token`)."""
    one, at = [], []
    for (i, k, _), j in zip(every, same):
        key = planned[i].table.keys[k]
        off = chiplets_off(key.failed, key.stacks, d, j) if key.failed else []
        if len(off) == 1:
            one.append((i, k))
            at.append((j, off[0]))
        elif off:
            rows[i][k, 2] -= off_energy_per_token(tables, d, j, off, intact_s[j])
    if one:
        j, chip = np.array(at, np.int64).T
        energy = idle_energy_per_token(tables, idle_watts(tables, d.kind[j, chip]), intact_s[j]).tolist()
        for (i, k), e in zip(one, energy):
            rows[i][k, 2] -= e


class Stacked(NamedTuple):
    """The `SegmentMapping` arrays of a list of items stacked: slots ``[N, U, C]`` (-1 padded to the widest),
    copies ``[N, U]``, HBM stacks ``[N, S]``, and each one's own slot width."""

    slots: np.ndarray
    ncopy: np.ndarray
    stacks: np.ndarray
    widths: list


def stacked(items: list) -> Stacked:
    """``items``' (design index, key index, `SegmentMapping`) arrays as one `Stacked` (arrays of one shape
    joined along their first axis and reshaped: one copy, without `np.stack`'s per-array steps)."""
    if not items:
        return Stacked(np.zeros((0, 0, 0), np.int64), np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64), [])
    widths = [m.slots.shape[1] for _, _, m in items]
    n, units = len(items), items[0][2].slots.shape[0]
    if len(set(widths)) == 1:
        slots = np.concatenate([m.slots for _, _, m in items]).reshape(n, units, widths[0])
    else:
        slots = np.full((n, units, max(widths)), -1, np.int64)
        for j, (_, _, m) in enumerate(items):
            slots[j, :, : m.slots.shape[1]] = m.slots
    return Stacked(slots, joined([m.ncopy for _, _, m in items]), joined([m.stacks for _, _, m in items]), widths)


def joined(arrays: list) -> np.ndarray:
    """``arrays`` (1-D) as rows ``[N, K]``: joined and reshaped when all have one length, else `np.stack`
    (which names the mismatch)."""
    size = arrays[0].shape[0]
    if all(a.shape[0] == size for a in arrays):
        return np.concatenate(arrays).reshape(len(arrays), size)
    return np.stack(arrays)


def population(items: list, planned: list[Planned], arrays: Stacked | None = None,
               rows: list[int] | None = None) -> DecodedDesigns:
    """The kernel arrays of ``items`` ((design index, key index, `SegmentMapping`)): each design's package
    with the segment's mapping and HBM stacks (``arrays``: the items' `stacked` arrays are rows ``rows`` of
    these, ascending, when the caller has them; all of them: taken as they are, not copied)."""
    if arrays is None:
        arrays, rows = stacked(items), list(range(len(items)))
    every = len(rows) == len(arrays.widths)
    take = np.asarray(rows, np.int64)
    width = max((arrays.widths[j] for j in rows), default=0)
    slots = arrays.slots if every else arrays.slots[take]
    if slots.shape[2] != width:
        slots = np.ascontiguousarray(slots[:, :, :width])
    first: dict[int, int] = {}      # each design's package rows once, then one gather
    for i, _, _ in items:
        first.setdefault(i, len(first))
    base = [planned[i].base for i in first]
    pos = np.fromiter((first[i] for i, _, _ in items), np.int64, len(items))
    return DecodedDesigns(*(np.concatenate([r[f] for r in base])[pos] for f in (0, 1, 2)),
                          arrays.stacks if every else arrays.stacks[take], np.concatenate([r.ddr for r in base])[pos],
                          slots, arrays.ncopy if every else arrays.ncopy[take],
                          np.zeros(len(items), np.int64))


def distinct(items: list, planned: list[Planned]) -> tuple[list, list[int]]:
    """The segments of ``items`` (design index, key index, `SegmentMapping`) with distinct designs, in
    `ordered`'s order, and each item's index among them."""
    perm = ordered(items, planned)
    inside = [items[j] for j in perm]
    first, index = distinct_rows(inside, planned, stacked(inside))
    at = [0] * len(items)
    for pos, j in enumerate(perm):
        at[j] = index[pos]
    return [inside[j] for j in first], at


def ordered(items: list, planned: list[Planned]) -> list[int]:
    """``items`` (design index, key index, `SegmentMapping`) ordered by design, mapping version, popularity
    and what is down (`near`; ties in their order), so that a mapping follows the one it differs least
    from (a failure's re-mapping its intact mapping's): the kernel costs it incrementally
    (dse.model.perf_model.base_passes, ``incremental``), as indices into ``items``."""
    tails: dict = {}                # `near`'s tail once per segment key (designs share their keys)
    keys = [planned[i].table.keys[k] for i, k, _ in items]
    for key in keys:
        if key not in tails:
            tails[key] = near_tail(key)
    rank = {key: r for r, key in enumerate(sorted(tails, key=tails.__getitem__))}
    return np.lexsort((np.fromiter((rank[k] for k in keys), np.int64, len(keys)),
                       np.fromiter((i for i, _, _ in items), np.int64, len(keys)))).tolist()


def distinct_rows(items: list, planned: list[Planned], arrays: Stacked) -> tuple[list[int], list[int]]:
    """The items (design index, key index, `SegmentMapping`) with distinct designs (the same package and
    the same arrays: the same step), the first of each in ``items``' order, as ascending indices into
    ``items`` (``arrays``: their `stacked` arrays), and each item's index among them."""
    package: dict[bytes, int] = {}  # each design's package (its rows, columns, kinds, DDR) by value
    of: dict[int, int] = {}
    for i in dict.fromkeys(i for i, _, _ in items):
        base = planned[i].base
        same = b"".join((base.rows.tobytes(), base.cols.tobytes(), base.kind.tobytes(), base.ddr.tobytes()))
        of[i] = package.setdefault(same, len(package))
    links: dict[frozenset, int] = {}
    n = len(items)
    if not n:
        return [], []
    head = np.array([(of[i], arrays.widths[j], links.setdefault(m.links, len(links)))
                     for j, (i, _, m) in enumerate(items)], np.int64)
    # each item's content (package, width, links, slots -1 padded, copies, stacks) as rows of 8-byte
    # words, and its fingerprint (the words weighted and summed modulo 2^64, array by array): rows with the
    # same fingerprint are compared whole, so equal rows are found exactly (all fingerprints distinct:
    # all rows are)
    parts = [head, arrays.slots.reshape(n, -1), arrays.ncopy.reshape(n, -1), arrays.stacks.reshape(n, -1)]
    parts = [a if a.dtype == np.int64 else a.astype(np.int64) for a in parts]
    f = np.zeros(n, np.int64)
    for a in parts:
        f += a @ (np.arange(1, a.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(np.int64)
    prints = f.tolist()
    if len(set(prints)) == n:
        first, index = list(range(n)), list(range(n))
    else:
        seen: dict[int, list[int]] = {}
        first, index = [], []
        for j, fp in enumerate(prints):
            at = next((a for a in seen.get(fp, ()) if all(np.array_equal(x[first[a]], x[j]) for x in parts)), None)
            if at is None:
                at = len(first)
                first.append(j)
                seen.setdefault(fp, []).append(at)
            index.append(at)
    return first, index


def near(item: tuple, planned: list[Planned], tails: dict | None = None) -> tuple:
    """The order of `distinct`'s segments: design, mapping version, popularity, then the chiplets, links
    and stacks down (their sorted tuples: a failure's mappings after the intact one); ``tails``: the
    tails already built, by key."""
    i, k, _ = item
    key = planned[i].table.keys[k]
    tails = {} if tails is None else tails
    if key not in tails:
        tails[key] = near_tail(key)
    return (i, *tails[key])


def near_tail(key) -> tuple:
    """`near`'s order after the design: a segment key's version, popularity, and the chiplets, links and
    stacks down."""
    return (key.version, bytes(key.popularity), len(key.failed), tuple(sorted(key.failed)),
            tuple(sorted(key.links)), tuple(sorted(key.stacks)))


def link_slowdown(ev, d: DecodedDesigns, j: int, links: frozenset, intact_s: float) -> float:
    """Latency with the slowest of ``links`` failed over the intact latency ``intact_s``, design ``j`` of
    ``d`` (its record, dse.model.records, for the evaluator's failure report)."""
    design = design_records(d, ev.tables, ev.link, ev.space.mapping, ev.topology, [j])[0]
    report = ev.link_failure_report(design).set_index("failed_link")["latency_s"]
    return max(float(report.get(f"{a}-{b}", report.get(f"{b}-{a}", np.inf))) for a, b in links) / intact_s
