"""Evaluate populations of systems: one package design x the study's parallel layouts across packages.

Without a ``system`` section a design is one package: the package evaluator's metrics, plus carbon.
With one, each design also chooses pipeline stages P, expert-parallel ranks E and replicas D
(``pipeline``, ``experts``, ``replicas`` genes); every package is evaluated by the package evaluator on
its share of the workload (dse.system.packages) and the shares are composed:

* a stage of the pipeline lasts as long as its slowest rank plus its expert all-to-alls (dispatch and
  combine per MoE layer instance, dse.system.traffic); latency = the stages and the hand-offs between
  them; with m batches in flight (``system.in_flight``) a replica serves ``tokens x min(1 / period,
  m / latency)`` tokens per second, ``period`` its slowest stage; throughput sums the replicas;
* energy per token: the packages' dynamic energy and the cross-package traffic per step over its tokens,
  plus every package's static power over the throughput;
* area, cost, peak power and embodied carbon: the package's times the packages (its board counts in
  carbon; NICs, switches and hosts are not counted);
* fault tolerance: every single package failure (each equally likely). Its replica re-maps onto the
  survivors as a failed chiplet's units do: with E > 1 the failed rank's experts and sequences spread
  over the E - 1 others of its stage, with E = 1 the replica re-splits its layers over P - 1 stages; a
  replica of one package is lost. The replica keeps ``min(1, throughput after / before)``, nothing when
  its memory no longer holds the model; the other replicas are untouched. ``worst_retained_frac``: the
  least kept; ``all_served_frac``: failures after which the replica still serves every unit.
* carbon (dse.system.carbon): energy per token x grid intensity, plus the embodied carbon of every
  package spread over the tokens of its lifetime.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..model.contract import DecodedDesigns, DecodedPackages, PopulationEvaluator
from ..model.metrics import METRICS
from ..model.parallel import map_rows, split_rows
from ..study.space import SYSTEM_AXES, Design
from .carbon import CarbonFactors
from .compose import compose, stage_figures
from .embodied import PackageEmbodied
from .failures import fault_columns, replica_kept
from .hardware import SystemHardware
from .layout import Layout, layout_of
from .metrics import SYSTEM_METRICS, C
from .packages import PackageBank, StagePackages
from .traffic import LayoutTraffic, layout_traffic


def share_runner(X: np.ndarray, figures: np.ndarray):
    """``run(share, rows)``: a package share's metrics for the designs ``rows`` of the decision vectors ``X``
    (their package ``figures`` given). A layout's rows are gathered once for all its shares. The shares
    evaluate serially: a system spreads its designs over the threads (the thread pool is not re-entered)."""
    gathered: dict = {}

    def run(share, rows: np.ndarray) -> np.ndarray:
        if gathered.get("rows") is not rows:
            gathered.update(rows=rows, X=X[rows], figures=figures[rows])
        return share.evaluator.metrics_array(gathered["X"][:, share.genes], False, gathered["figures"])
    return run


class PackageArrays(NamedTuple):
    """What embodied carbon needs of each design's package."""

    chiplets: np.ndarray    # [P] chiplets in the package
    kind: np.ndarray        # [P, S] chiplet kind per slot
    stacks: np.ndarray      # [P, S] HBM stacks per slot
    ddr: np.ndarray         # [P] DDR channels
    variant: np.ndarray     # [P] package variant (dse.model.variants)


class SystemEvaluator(PopulationEvaluator):
    """The evaluator contract (dse.model.contract) over systems of packages, columns `SYSTEM_METRICS`;
    see the module docstring. ``package`` is the package evaluator it composes."""

    def __init__(self, package, space, factors: CarbonFactors, embodied: list[PackageEmbodied],
                 hardware: SystemHardware | None = None, bank: PackageBank | None = None, study=None):
        self.package, self.space, self.factors, self.embodied = package, space, factors, embodied
        self.hardware, self.bank, self.study = hardware, bank, study
        self.tables = package.tables
        self.traffic_cache: dict[Layout, LayoutTraffic] = {}

    @property
    def columns(self) -> list[str]:
        return SYSTEM_METRICS

    def decode(self, X) -> DecodedDesigns:
        return self.package.decode(X)

    def decode_packages(self, X) -> DecodedPackages:
        return self.package.decode_packages(X)

    def package_evaluators(self) -> list:
        return self.package.package_evaluators()

    # --- layouts ---------------------------------------------------------------------------------------
    @property
    def is_system(self) -> bool:
        return self.hardware is not None

    def layouts_of(self, X: np.ndarray) -> list[Layout]:
        if not self.is_system:
            return [Layout()] * len(X)
        parallel = self.study.system.parallel
        genes = np.column_stack([X[:, self.space.slices[a].start] for a in SYSTEM_AXES])
        choices, which = np.unique(genes, axis=0, return_inverse=True)
        layouts = [Layout(*(getattr(parallel, a)[int(g)] for a, g in zip(SYSTEM_AXES, row))) for row in choices]
        return [layouts[k] for k in np.asarray(which).reshape(-1)]

    def traffic(self, layout: Layout) -> LayoutTraffic:
        if layout not in self.traffic_cache:
            stage = self.bank.get(layout.pipeline, layout.experts)
            self.traffic_cache[layout] = layout_traffic(stage.rank_tables, layout, stage.held, stage.ranks,
                                                        self.hardware)
        return self.traffic_cache[layout]

    # --- evaluation ------------------------------------------------------------------------------------
    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = self.vectors(X)
        if not self.is_system:
            return self._one_package(self.package.metrics_array(X, with_faults), self.decoded_package_arrays(X))
        layouts = self.layouts_of(X)

        def run(r: slice) -> np.ndarray:
            Xr = X[r]
            return self._systems(self.decoded_package_arrays(Xr), layouts[r], with_faults,
                                 share_runner(Xr, self._package_figures(Xr, layouts[r.start])))
        threads = self.package.threads
        if len(split_rows(len(X), threads)) > 1:      # build every share and traffic table before threads read them
            first = {layout: i for i, layout in reversed(list(enumerate(layouts)))}
            for i in sorted(first.values()):
                run(slice(i, i + 1))
        return map_rows(run, len(X), threads)

    def latency_array(self, X: np.ndarray, figures: np.ndarray | None = None) -> np.ndarray:
        """Each design's step latency (s), intact: for a caller that costs the same designs under several
        workloads (dse.serving.package); `step_array`'s latency column."""
        return self.step_array(X, figures)[:, 0]

    def step_array(self, X: np.ndarray, figures: np.ndarray | None = None,
                   columns: tuple[str, ...] = ("latency_s",)) -> np.ndarray:
        """Each design's intact step ``columns`` (of SYSTEM_METRICS' package part): a one-package design
        skips carbon and takes its package ``figures`` (`package_figures`, the same under every workload)
        when given; a system composes its shares as `metrics_array` does."""
        X = self.vectors(X)
        rows = self.metrics_array(X, False) if self.is_system else self.package.metrics_array(X, False, figures)
        return rows[:, [C[c] for c in columns]]

    def package_figures(self, X: np.ndarray) -> np.ndarray | None:
        """A one-package design's package figures (dse.model.package_figures), None for a system."""
        return None if self.is_system else self.package.package_figures(X)

    def _package_figures(self, X: np.ndarray, layout: Layout) -> np.ndarray:
        """Area, cost and power figures of each design's package, computed once for all its package shares
        (every package of a system is the same package design; each share would compute them again)."""
        share = self.bank.get(layout.pipeline, layout.experts).shares[0][0]
        return share.evaluator.package_figures(X[:, share.genes])

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        """Metrics of designs given directly (hand-written or read back), not as decision vectors."""
        arrays = self.package_arrays(designs)
        if not self.is_system:
            return self._one_package(self.package.design_metrics(designs, with_faults), arrays)
        return self._systems(arrays, [layout_of(d) for d in designs], with_faults,
                             lambda share, rows: share.evaluator.design_metrics(
                                 [share.restrict(designs[i]) for i in rows], False))

    def designs(self, X: np.ndarray) -> list[Design]:
        X = self.vectors(X)
        return self._with_layouts(self.package.designs(X), X)

    def designs_and_placements(self, X: np.ndarray) -> tuple[list[Design], list | None]:
        X = self.vectors(X)
        out, placements = self.package.designs_and_placements(X)
        return self._with_layouts(out, X), placements

    def _with_layouts(self, out: list[Design], X: np.ndarray) -> list[Design]:
        """``out`` (the package designs of ``X``) with each one's parallel layout, for a system."""
        if self.is_system:
            for design, layout in zip(out, self.layouts_of(X)):
                design.system = layout.as_dict()
        return out

    # --- one package -----------------------------------------------------------------------------------
    def package_arrays(self, designs: list[Design]) -> PackageArrays:
        """The packages of explicit designs, for their embodied carbon and memory."""
        names = self.tables.kind_names
        width = self.space.max_slots
        kind = np.zeros((len(designs), width), np.int64)
        stacks = np.zeros((len(designs), width), np.int64)
        for i, d in enumerate(designs):
            kind[i, : len(d.chiplets)] = [names.index(k) for k in d.chiplets]
            stacks[i, : len(d.hbm_stacks)] = d.hbm_stacks
        n = np.array([d.rows * d.cols for d in designs], np.int64)
        ddr = np.array([d.ddr_channels for d in designs], np.int64)
        variant = np.array([self.package.variant_for(d) if len(self.embodied) > 1 else 0 for d in designs], np.int64)
        return PackageArrays(n, kind, stacks, ddr, variant)

    def decoded_package_arrays(self, X: np.ndarray) -> PackageArrays:
        """The packages of decision vectors, for their embodied carbon and memory."""
        X = self.vectors(X)
        d = self.decode_packages(X)
        variant = X[:, self.space.slices["variant"].start] if "variant" in self.space.slices \
            else np.zeros(len(X), np.int64)
        return PackageArrays(d.chiplets, d.kind, d.stacks, d.ddr, variant)

    def _embodied_g(self, a: PackageArrays) -> np.ndarray:
        out = np.zeros(len(a.chiplets))
        for v in np.unique(a.variant):
            rows = a.variant == v
            out[rows] = self.embodied[v](a.chiplets[rows], a.kind[rows], a.stacks[rows], a.ddr[rows])
        return out

    def _one_package(self, metrics: np.ndarray, arrays) -> np.ndarray:
        """A one-package study: the package evaluator's metrics, carbon, one package in one node."""
        out = np.zeros((len(metrics), len(SYSTEM_METRICS)))
        out[:, : len(METRICS)] = metrics
        self._carbon(out, self._embodied_g(arrays))
        out[:, C["packages"]] = 1
        out[:, C["nodes"]] = 1
        return out

    def _carbon(self, out: np.ndarray, embodied_g: np.ndarray) -> None:
        operational, embodied = self.factors.per_token(out[:, C["energy_j_per_token"]], embodied_g,
                                                       out[:, C["throughput_tok_s"]])
        out[:, C["carbon_operational_g_per_token"]] = operational
        out[:, C["carbon_embodied_g_per_token"]] = embodied
        out[:, C["carbon_g_per_token"]] = operational + embodied
        out[:, C["embodied_kg"]] = embodied_g / 1000.0

    # --- systems ---------------------------------------------------------------------------------------
    def _systems(self, arrays, layouts: list[Layout], with_faults: bool, run) -> np.ndarray:
        """Every metric of designs (package ``arrays`` for carbon) with their layouts; ``run(share, rows)``
        evaluates one package share for the designs ``rows``."""
        out = np.zeros((len(layouts), len(SYSTEM_METRICS)))
        groups: dict[Layout, list[int]] = {}
        for i, layout in enumerate(layouts):
            groups.setdefault(layout, []).append(i)
        for layout, rows in groups.items():
            rows = np.array(rows)
            stage = self.bank.get(layout.pipeline, layout.experts)
            M = [[run(share, rows) for share in row] for row in stage.shares]
            f = stage_figures(M, stage.rank_tokens)
            out[rows] = self._compose(layout, f, M[0][0])
            if with_faults:
                self._package_failures(layout, stage, M, f, out, rows, run)
        self._carbon(out, self._embodied_g(arrays) * out[:, C["packages"]])
        return out

    def _compose(self, layout: Layout, f: dict, first: np.ndarray) -> np.ndarray:
        return compose(layout, f, first, self.traffic(layout), float(self.tables.tokens_per_step),
                       self.bank.in_flight(layout.pipeline), self.hardware.packages_per_node)

    def _package_failures(self, layout: Layout, stage: StagePackages, M, f: dict, out: np.ndarray,
                          rows: np.ndarray, run) -> None:
        kept = replica_kept(self, layout, stage, f, rows, run)
        out[rows, C["fault_tolerance_frac"]], out[rows, C["worst_retained_frac"]], out[rows, C["all_served_frac"]] = \
            fault_columns(kept, layout.replicas)

    def package_failure_report(self, design: Design) -> pd.DataFrame:
        """What losing each package of a system design does: the packages alike (one row per pipeline stage
        with expert parallelism, one row otherwise) and the fraction of the system's throughput kept."""
        layout = layout_of(design)
        stage = self.bank.get(layout.pipeline, layout.experts)
        rows = np.array([0])

        def run(share, rows_):
            return share.evaluator.design_metrics([share.restrict(design)], False)
        M = [[run(share, rows) for share in row] for row in stage.shares]
        f = stage_figures(M, stage.rank_tokens)
        kept = replica_kept(self, layout, stage, f, rows, run)
        others = (layout.replicas - 1) / layout.replicas
        if layout.per_replica > 1 and layout.experts > 1:
            labels = [f"stage {p}: any of its {layout.experts} ranks" for p in range(layout.pipeline)]
        else:
            labels = [f"any of the {layout.packages} packages"]
        return pd.DataFrame({"failed_package": labels, "replica_kept_frac": [float(k[0]) for k in kept],
                             "retained_frac": [others + float(k[0]) / layout.replicas for k in kept]})
