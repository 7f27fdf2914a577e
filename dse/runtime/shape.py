"""What a scenario holds for every design of one package shape, before any policy acts: each window's
popularity and offered load (`ScenarioView`), the outages and the segment edges they cut (`Shape`), and
the segments a policy that never acts serves (`Shape.template`). Values, built once per shape and kept
by the planner (dse.runtime.plan) under a key of what they depend on (mesh shape, and HBM stacks when the
scenario fails stacks: the random draws are seeded, the same for each design of the shape)."""
from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ..model.routes import physical_links
from ..study.space import Design
from .failures import Down, change_times, down_at, outages
from .mapping import ExpertGroups
from .popularity import window_perms
from .scenario import Scenario
from .segments import Template
from .traces import request_load, trace_perms


class ScenarioView:
    """The scenario per window: ``perms[w]`` its popularity (dse.runtime.popularity.Popularity), its start
    and length (``starts``, ``lengths``, s) and the offered tokens/s of a stretch of time (`offered_at`;
    None: saturating)."""

    def __init__(self, scenario: Scenario, groups: ExpertGroups, phase: str):
        sc = self.scenario = scenario
        if sc.popularity.drift == "trace":
            self.perms = trace_perms(sc.popularity.trace, [n[0].rpartition(".")[0] for n in groups.names],
                                     groups.q, sc.starts(), sc.lengths())
        else:
            self.perms = window_perms(sc.popularity, [len(n) for n in groups.names], sc.starts(), sc.lengths())
        self.load = request_load(sc.load.trace, sc.load.rate, phase, sc.starts(), sc.lengths()) \
            if sc.load.kind == "trace" else None
        self.offers: dict[tuple[float, float], float | None] = {}
        self.starts = np.asarray(sc.starts(), float)        # each window's start and length, s (read only)
        self.lengths = np.asarray(sc.lengths(), float)

    def offered_at(self, a: float, b: float) -> float | None:
        """Offered tokens/s of the segment ``a``..``b`` (at its middle), once per segment."""
        if (a, b) not in self.offers:
            self.offers[a, b] = self.offered(0.5 * (a + b))
        return self.offers[a, b]

    def offered(self, t: float) -> float | None:
        load = self.scenario.load
        if self.load is not None:
            return float(self.load[min(int(t // self.scenario.window_s), len(self.load) - 1)])
        if load.tokens_per_s is None:
            return None
        if load.kind == "diurnal":
            return load.tokens_per_s * (1 + load.amplitude * np.sin(2 * np.pi * t / load.period_s))
        return load.tokens_per_s


def chips_down(down: Down, ddr_channels: int, hbm_stacks) -> frozenset[int]:
    """Chiplets down, and those whose every HBM stack failed in a package without DDR (units forced off)."""
    if ddr_channels or not down.stacks:
        return down.chiplets
    return down.chiplets | {c for c, k in down.stacks if k >= hbm_stacks[c]}


def shape_key(scenario: Scenario, design: Design) -> tuple:
    """What a design's outages depend on: its mesh, and its HBM stacks when the scenario fails stacks."""
    f = scenario.failures
    hbm = bool(f.hbm_mtbf_h) or any(e.component == "hbm" for e in f.events)
    return design.rows, design.cols, tuple(design.hbm_stacks) if hbm else None


class Shape:
    """A package shape's outages through the scenario (dse.runtime.failures): ``downs(t)`` what is down
    at t, ``cuts(w, t0, length)`` window w's segment edges, and ``frames``: each window's (start, length,
    what is down at its start, its segments as (start, end, what is down, offered tokens/s))."""

    def __init__(self, view: ScenarioView, package_spec, design: Design, strict: bool):
        sc = view.scenario
        links = physical_links(package_spec.network(design.rows, design.cols))
        self.outs = outages(sc.failures, design.rows * design.cols, sc.horizon_s, links, design.hbm_stacks, strict)
        self.hbm_stacks = list(design.hbm_stacks)
        self.points = sorted({x for o in self.outs for x in (o.start_s, o.end_s)})
        self.memo: dict[int, Down] = {}         # what is down between two of ``points`` (by how many <= t)
        self.edges: dict[int, list[float]] = {}
        self.templates: dict[bool, Template] = {}
        self.frames = []
        for w, (t0, length) in enumerate(zip(sc.starts(), sc.lengths())):
            e = self.cuts(w, t0, length)
            self.frames.append((t0, length, self.downs(t0), [(a, b, self.downs(a), view.offered_at(a, b))
                                                             for a, b in zip(e[:-1], e[1:])]))

    def downs(self, t: float) -> Down:
        """What is down at ``t``: once per stretch between outages' starts and ends (constant there)."""
        k = bisect_right(self.points, t)
        if k not in self.memo:
            self.memo[k] = down_at(self.outs, t, self.hbm_stacks)
        return self.memo[k]

    def cuts(self, w: int, t0: float, length: float) -> list[float]:
        """Window ``w`` cut where what is down changes: its segments' edges."""
        if w not in self.edges:
            self.edges[w] = sorted({t0, t0 + length, *change_times(self.outs, t0, t0 + length)})
        return self.edges[w]

    def template(self, view: ScenarioView, design: Design) -> Template:
        """The segments of the shape under a policy that never acts (dse.runtime.segments.Template): what
        the planner cuts with no move in flight, keyed by what else a segment's key holds (once per DDR
        or none: what counts as down reads it)."""
        ddr = bool(design.ddr_channels)
        if ddr not in self.templates:
            window, length, offered, index, down, tails, at, downs = [], [], [], [], [], {}, [], {}
            for w, (_, _, _, pieces) in enumerate(self.frames):
                for a, b, now, off in pieces:
                    failed = chips_down(now, design.ddr_channels, design.hbm_stacks)
                    tail = (view.perms[w], failed, now.links, now.stacks)
                    if tail not in tails:
                        tails[tail] = len(tails)
                        at.append((w, now))
                    downs.setdefault(now, len(downs))
                    window.append(w)
                    length.append(b - a)
                    offered.append(np.nan if off is None else off)
                    index.append(tails[tail])
                    down.append(downs[now])
            self.templates[ddr] = Template(
                np.array(window, np.int64), np.array(length), np.array(offered), np.array(index, np.int64),
                np.array(down, np.int64), list(downs), list(tails), at,
                [chips_down(frame[2], design.ddr_channels, design.hbm_stacks) for frame in self.frames])
        return self.templates[ddr]
