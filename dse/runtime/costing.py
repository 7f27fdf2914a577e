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
from .powered_off import chiplets_off, off_energy_per_token

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
    rows: list[np.ndarray] = [np.full((len(p.table.keys), 3), np.nan) for p in planned]
    extra: list = [None] * len(planned)
    todo: dict[int, list] = {}
    for i, p in enumerate(planned):
        for k, m in enumerate(p.table.mappings):
            if m is not None:
                todo.setdefault(p.variant, []).append((i, k, m))
    cols = [METRICS.index(c) for c in NEEDED]
    for variant, every in todo.items():
        items, same = distinct(every, planned)
        d = population(items, planned)
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
        for (i, k, _), j in zip(every, same):
            rows[i][k] = metrics[j]
            key = planned[i].table.keys[k]
            if serving is None and key.failed:  # chiplets down: those powered off draw nothing (powered_off.py)
                off = chiplets_off(key.failed, key.stacks, d, j)
                if off:
                    rows[i][k, 2] -= off_energy_per_token(ev.tables, d, j, off, intact_s[j])
            if figures is not None:
                if extra[i] is None:
                    extra[i] = np.full((len(planned[i].table.keys), figures.shape[1]), np.nan)
                extra[i][k] = figures[j]
    return [StepFigures(r[:, 0], r[:, 1], r[:, 2], None if serving is None or x is None else serving.record(x))
            for r, x in zip(rows, extra)]


def population(items: list, planned: list[Planned]) -> DecodedDesigns:
    """The kernel arrays of ``items`` ((design index, key index, `SegmentMapping`)): each design's package
    with the segment's mapping and HBM stacks."""
    widths = {m.slots.shape[1] for _, _, m in items}
    if len(widths) == 1:
        slots = np.stack([m.slots for _, _, m in items])
    else:
        slots = np.full((len(items), items[0][2].slots.shape[0], max(widths)), -1, np.int64)
        for j, (_, _, m) in enumerate(items):
            slots[j, :, : m.slots.shape[1]] = m.slots
    first: dict[int, int] = {}      # each design's package rows once, then one gather
    for i, _, _ in items:
        first.setdefault(i, len(first))
    rows = [planned[i].base for i in first]
    pos = np.fromiter((first[i] for i, _, _ in items), np.int64, len(items))
    return DecodedDesigns(*(np.concatenate([r[f] for r in rows])[pos] for f in (0, 1, 2)),
                          np.stack([m.stacks for _, _, m in items]), np.concatenate([r.ddr for r in rows])[pos],
                          slots, np.stack([m.ncopy for _, _, m in items]), np.zeros(len(items), np.int64))


def distinct(items: list, planned: list[Planned]) -> tuple[list, list[int]]:
    """The segments of ``items`` (design index, key index, `SegmentMapping`) with distinct designs (the
    same package and the same arrays: the same step), and each item's index among them; ordered by
    design, mapping version, popularity and what is down (`near`), so that a mapping follows the one it
    differs least from (a failure's re-mapping its intact mapping's): the kernel costs it incrementally
    (dse.model.perf_model.base_passes, ``incremental``)."""
    seen: dict[tuple, int] = {}
    bases: dict[int, bytes] = {}
    narrow: dict = {}               # slots as int16 where every chiplet index fits (fewer bytes to hash)
    keep, index = [], []
    for item in items:
        i, _, m = item
        if i not in bases:
            base = planned[i].base
            bases[i] = b"".join((base.rows.tobytes(), base.cols.tobytes(), base.kind.tobytes(), base.ddr.tobytes()))
            narrow[i] = _as_int16 if int((base.rows * base.cols).max()) < 2 ** 15 else _as_given
        content = (bases[i], m.slots.shape, narrow[i](m.slots).tobytes(), m.ncopy.tobytes(), m.stacks.tobytes(),
                   m.links)
        if content not in seen:
            seen[content] = len(keep)
            keep.append(item)
        index.append(seen[content])
    tails: dict = {}                # `near`'s tail once per segment key (designs share their keys)
    order = sorted(range(len(keep)), key=lambda j: near(keep[j], planned, tails))
    position = np.empty(len(keep), np.int64)
    position[order] = np.arange(len(keep))
    return [keep[j] for j in order], position[index].tolist() if index else []


def _as_int16(slots: np.ndarray) -> np.ndarray:
    """`distinct`'s key of a mapping's slots where every chiplet index of the design fits in int16."""
    return slots.astype(np.int16)


def _as_given(slots: np.ndarray) -> np.ndarray:
    """`distinct`'s key of a mapping's slots where some chiplet index does not fit in int16."""
    return slots


def near(item: tuple, planned: list[Planned], tails: dict | None = None) -> tuple:
    """The order of `distinct`'s segments: design, mapping version, popularity, then the chiplets, links
    and stacks down (their sorted tuples: a failure's mappings after the intact one); ``tails``: the
    tails already built, by key."""
    i, k, _ = item
    key = planned[i].table.keys[k]
    tails = {} if tails is None else tails
    if key not in tails:
        tails[key] = (key.version, bytes(key.popularity), len(key.failed), tuple(sorted(key.failed)),
                      tuple(sorted(key.links)), tuple(sorted(key.stacks)))
    return (i, *tails[key])


def link_slowdown(ev, d: DecodedDesigns, j: int, links: frozenset, intact_s: float) -> float:
    """Latency with the slowest of ``links`` failed over the intact latency ``intact_s``, design ``j`` of
    ``d`` (its record, dse.model.records, for the evaluator's failure report)."""
    design = design_records(d, ev.tables, ev.link, ev.space.mapping, ev.topology, [j])[0]
    report = ev.link_failure_report(design).set_index("failed_link")["latency_s"]
    return max(float(report.get(f"{a}-{b}", report.get(f"{b}-{a}", np.inf))) for a, b in links) / intact_s
