"""Component failures over a scenario: chiplets, package links and HBM stacks, from explicit events and
from random failures at each component's MTBF, each repaired after its repair time.

Random failures: each component (every chiplet of the design, every physical link of its package
network, every HBM stack of every chiplet) fails after an exponential time of mean ``<component>_mtbf_h``
(a constant failure rate, the usual model of a component's useful life, e.g. JEDEC JEP122's failure-rate
figures), is repaired ``repair_h`` later and may fail again; drawn from ``seed`` (chiplets first, then
links, then stacks, so adding a component kind leaves the others' draws). An outage is a (component,
what, start, end) record, end ``inf`` when never repaired: ``what`` is a chiplet slot, a link (a, b)
with a < b, or an HBM stack (chiplet, stack index)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..errors import StudyError
from .scenario import FailuresSpec

HOUR = 3600.0


class Outage(NamedTuple):
    component: str          # "chiplet", "link" or "hbm"
    what: object            # chiplet slot, (a, b) link, (chiplet, stack) HBM stack
    start_s: float
    end_s: float


class Down(NamedTuple):
    """What is down at one time: chiplets, links (a, b), and HBM stacks lost per chiplet."""

    chiplets: frozenset
    links: frozenset
    stacks: tuple           # ((chiplet, stacks lost), ...) sorted


def events_of(spec: FailuresSpec, chiplets: int, links: list[tuple[int, int]], stacks: list[int],
              strict: bool = True) -> list:
    """The explicit events that name a component of the design. ``strict`` (one design, `dse timeline`):
    any other is a `StudyError` naming the event's key; otherwise (a search over designs of several
    sizes) an event naming a component a design lacks does not happen to it."""
    out = []
    for i, e in enumerate(spec.events):
        problem, key = None, f"failures.events.{i}.chiplet"
        if e.chiplet is not None and e.chiplet >= chiplets:
            problem = f"chiplet {e.chiplet} is not in the design (slots 0..{chiplets - 1})"
        elif e.component == "link" and tuple(sorted(e.link)) not in links:
            problem, key = (f"link {list(e.link)} is not a link of the design's package network ({len(links)} "
                            f"links, e.g. {list(links[0]) if links else 'none'})"), f"failures.events.{i}.link"
        elif e.component == "hbm" and e.stack >= stacks[e.chiplet]:
            problem, key = f"chiplet {e.chiplet} has {stacks[e.chiplet]} HBM stacks in the design", \
                f"failures.events.{i}.stack"
        if problem and strict:
            raise StudyError(problem, key=key)
        if not problem:
            out.append(e)
    return out


def random_outages(rng, mtbf_h: float, repair: float, horizon_s: float, component: str, items) -> list[Outage]:
    """Exponential failures of each of ``items`` at ``mtbf_h``, each repaired ``repair`` s later."""
    out = []
    for what in items:
        t = rng.exponential(mtbf_h * HOUR)
        while t < horizon_s:
            out.append(Outage(component, what, t, t + repair))
            t += repair + rng.exponential(mtbf_h * HOUR)
    return out


def outages(spec: FailuresSpec, chiplets: int, horizon_s: float, links: list[tuple[int, int]] = (),
            stacks: list[int] = (), strict: bool = True) -> list[Outage]:
    """Every outage within the horizon, explicit (`events_of`) and random, by start time (``links``: the
    package's physical links; ``stacks``: HBM stacks per chiplet)."""
    stacks = list(stacks) or [0] * chiplets
    out = []
    for e in events_of(spec, chiplets, list(links), stacks, strict):
        end = e.t_s + e.repair_s if e.repair_s else math.inf
        what = tuple(sorted(e.link)) if e.component == "link" else \
            ((e.chiplet, e.stack) if e.component == "hbm" else e.chiplet)
        out.append(Outage(e.component, what, e.t_s, end))
    rng = np.random.default_rng(spec.seed)
    repair = spec.repair_h * HOUR if spec.repair_h else math.inf
    every_stack = [(c, k) for c in range(chiplets) for k in range(stacks[c])]
    for mtbf, component, items in ((spec.chiplet_mtbf_h, "chiplet", range(chiplets)),
                                   (spec.link_mtbf_h, "link", links), (spec.hbm_mtbf_h, "hbm", every_stack)):
        if mtbf:
            out += random_outages(rng, mtbf, repair, horizon_s, component, items)
    return sorted(out, key=lambda o: (o.start_s, o.component, str(o.what)))


def down_at(outs: list[Outage], t: float, stacks: list[int] = ()) -> Down:
    """What is down at time ``t``; HBM stacks lost per chiplet at most the chiplet's stacks."""
    chips, links, stacks_down = set(), set(), set()
    for o in outs:
        if o.start_s <= t < o.end_s:
            (chips if o.component == "chiplet" else links if o.component == "link" else stacks_down).add(o.what)
    lost: dict[int, int] = {}
    for c, _ in stacks_down:            # each stack once, however many outages name it
        lost[c] = lost.get(c, 0) + 1
    if stacks:
        lost = {c: min(k, stacks[c]) for c, k in lost.items()}
    return Down(frozenset(chips), frozenset(links), tuple(sorted(lost.items())))


def change_times(outs: list[Outage], t0: float, t1: float) -> list[float]:
    """Times in ``(t0, t1)`` where what is down changes."""
    return sorted({x for o in outs for x in (o.start_s, o.end_s) if t0 < x < t1})


@lru_cache(maxsize=4096)
def names(down: Down) -> tuple[str, ...]:
    """What is down, in words (the timeline's ``failed_components``)."""
    return tuple([f"chiplet {c}" for c in sorted(down.chiplets)] + [f"link {a}-{b}" for a, b in sorted(down.links)] + \
        [f"hbm {c} x{k}" for c, k in down.stacks])
