"""Evaluate a population of designs: ``Evaluator(tables, space, ...)(X)`` -> every metric of every design
(dse.model.metrics: what each column is), computed in one Numba call per block of designs
(dse.model.population_kernel; the step model is in dse.model.perf_model).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..study.schema.faults import FaultsSpec
from ..study.schema.package import PackageSpec
from ..study.space import Design, Space
from .contract import DecodedDesigns, DecodedPackages, FaultsWithin, PopulationEvaluator
from .failure_sets import monte_carlo_sets
from .kernel_tables import kernel_tables
from .memory_path import copies_without_memory, needs_memory
from .metric_rows import retained_frac
from .metrics import METRICS, N_KERNEL_METRICS, N_METRICS
from .package_figures import F_MAX_DIE, PACKAGE_COST_PARTS, PACKAGE_FIGURES, cost_part_arrays, package_arrays
from .parallel import cores, map_rows
from .placement import decode_packages, decode_population
from .records import design_arrays, design_records, placement_arrays
from .population_kernel import evaluate_arrays, remapped_design, single_failures
from .routes import RouteTables, build_route_tables, physical_links, shape_index
from .tables import EvalTables
from .workspace import make_workspace

#: bytes of decoded unit slots per block of designs: a large model's population decoded at once (tens of
#: MB) no longer sits in the cache when the kernel reads it back; blocks of this size do.
BLOCK_BYTES = 4 << 20

NO_FIGURES = np.zeros((0, len(PACKAGE_FIGURES)))      # evaluate_arrays computes each design's package figures
NO_LIMITS = np.full(N_KERNEL_METRICS, np.inf)           # every design evaluated gets its failure pass


class Evaluator(PopulationEvaluator):
    """Evaluates decision vectors of one study's space: ``Evaluator(tables, space, ...)(X) -> DataFrame``
    (the contract of dse.model.contract; columns `METRICS`)."""

    def __init__(self, tables: EvalTables, space: Space, package: PackageSpec, max_copies: int,
                 faults: FaultsSpec | None = None):
        self.tables, self.space, self.link, self.topology = tables, space, package.link, package.topology
        self.kernel = kernel_tables(tables, max(space.max_slots, max_copies), space.split, max_copies,
                                    int(space.upper[space.slices["hbm"]].max()),
                                    int(space.upper[space.slices["ddr"]].max()))
        self.max_copies = max_copies
        self.needs_memory = needs_memory(tables)        # [U, K] (dse.model.memory_path)
        self.package = package
        self.threads = cores()          # evaluation threads (dse.model.parallel); 1 for serial
        self.screening = False          # failures at the search's screening fidelity (dse.search.screening)
        self.row_range, self.col_range = package.mesh.rows, package.mesh.cols
        faults = faults or FaultsSpec()
        mc = faults.monte_carlo
        self.mc_sets = monte_carlo_sets(space.max_slots, mc.samples, mc.failures, mc.seed) if mc.samples \
            else np.zeros((space.max_slots + 1, 0, 1), np.int64)
        self.routes: RouteTables = build_route_tables(package, links=faults.links,
                                                      routers_fail=faults.failed_router == "fails",
                                                      mc_sets=self.mc_sets)

    @property
    def columns(self) -> list[str]:
        return METRICS

    def package_evaluators(self) -> list["Evaluator"]:
        return [self]

    def workspace(self, copies: int):
        """Scratch arrays of one evaluation call (a fresh set per call keeps the evaluator thread-safe)."""
        return make_workspace(self.kernel, self.space.max_slots, int(self.routes.n_links.max()), copies)

    def _workspaces(self, copies: int):
        """The intact design's workspace and one for failures evaluated in full (dse.model.failures)."""
        return self.workspace(copies), self.workspace(copies)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        sl = self.space.slices
        return DecodedDesigns(*decode_population(
            self.vectors(X), sl["rows"].start, sl["cols"].start, sl["kind"].start, sl["hbm"].start, sl["ddr"].start,
            sl["place"].start, sl["copies"].start, self.space.max_slots, self.space.n_units, self.max_copies,
            self.kernel.unit_is_expert, self.space.exclusive_experts, self.tables.kind_hbm_phy))

    def decode_packages(self, X: np.ndarray) -> DecodedPackages:
        sl = self.space.slices
        return DecodedPackages(*decode_packages(self.vectors(X), sl["rows"].start, sl["cols"].start, sl["kind"].start,
                                                sl["hbm"].start, sl["ddr"].start, self.space.max_slots,
                                                self.tables.kind_hbm_phy))

    def _shapes(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        (r0, r1), (c0, c1) = self.row_range, self.col_range
        if ((rows < r0) | (rows > r1) | (cols < c0) | (cols > c1)).any():
            raise ValueError(f"mesh shape outside the study's range rows {r0}..{r1}, cols {c0}..{c1}")
        return np.asarray(shape_index(np.asarray(rows), np.asarray(cols), self.row_range, self.col_range), np.int64)

    def _kernel(self, d: DecodedDesigns, with_faults: bool | FaultsWithin, workspaces,
                package: np.ndarray | None = None, memory_path: bool = True, incremental: bool = False) -> np.ndarray:
        """Every metric of the decoded designs ``d``, with the scratch ``workspaces`` of one thread;
        ``with_faults``: a bool or dse.model.contract.FaultsWithin; ``package``: their `package_figures` if
        known; ``memory_path``: count the copies without one (else that column is NaN); ``incremental``:
        dse.model.perf_model.base_passes's (without failures)."""
        limits = with_faults.limits if isinstance(with_faults, FaultsWithin) else NO_LIMITS
        out = evaluate_arrays(self.kernel, self.routes, self._shapes(d.rows, d.cols), d.rows, d.cols, d.kind, d.stacks,
                              d.ddr, d.slots, d.ncopy, self.space.split, d.unplaced, bool(with_faults), self.screening,
                              self.mc_sets, NO_FIGURES if package is None else package, *workspaces,
                              np.asarray(limits, np.float64), incremental and not with_faults)
        die = self._largest_die(d.chiplets, d.kind, d.stacks) if package is None else package[:, F_MAX_DIE]
        missing = self.without_memory(d).sum(axis=1) if memory_path else np.full(len(out), np.nan)
        return np.column_stack([out, die, missing])

    def without_memory(self, d: DecodedDesigns) -> np.ndarray:
        """``[P, S]``: unit copies on each chiplet slot with no memory path (dse.model.memory_path)."""
        return copies_without_memory(d.kind, d.stacks, d.ddr, self.tables.ddr is not None, d.slots, d.ncopy,
                                     self.needs_memory, self.tables.kind_sram_Bps > 0)

    def memory_path_report(self, design: Design) -> dict[int, int]:
        """Chiplet slot -> unit copies there without a memory path, for the slots that have any (what the
        ``units_without_memory`` constraint counts)."""
        per_slot = self.without_memory(design_arrays([design], self.tables, self.space.max_slots,
                                                     self.max_copies))[0]
        return {int(s): int(k) for s, k in enumerate(per_slot) if k > 0}

    def _block(self) -> int:
        """Designs decoded at a time: `BLOCK_BYTES` of unit slots."""
        return max(1, BLOCK_BYTES // (8 * max(self.space.n_units, 1) * self.max_copies))

    def package_figures(self, X: np.ndarray) -> np.ndarray:
        """Silicon area, package area, cost, peak and static power and largest die of each design's package
        (dse.model.package_figures.package_arrays): ``[P, 6]``."""
        d = self.decode_packages(X)
        return package_arrays(self.kernel, d.chiplets, d.kind, d.stacks, d.ddr)

    def metrics_array(self, X: np.ndarray, with_faults: bool | FaultsWithin = True,
                      package: np.ndarray | None = None) -> np.ndarray:
        """Every metric of the decision vectors ``X``; ``with_faults``: a bool or dse.model.contract.
        FaultsWithin; ``package``: their `package_figures` when the caller has them (a system's packages
        are one package design: dse.system.evaluator)."""
        X = self.vectors(X)
        block = self._block()

        def run(r: slice) -> np.ndarray:
            workspaces = self._workspaces(self.max_copies)
            parts = [self._kernel(self.decode(X[a:min(a + block, r.stop)]), with_faults, workspaces,
                                  None if package is None else package[a:min(a + block, r.stop)])
                     for a in range(r.start, r.stop, block)]
            return np.concatenate(parts) if parts else np.zeros((0, N_METRICS))
        return map_rows(run, len(X), self.threads)

    def _largest_die(self, n: np.ndarray, kind: np.ndarray, stacks: np.ndarray) -> np.ndarray:
        """Area of each design's largest die: chiplet kind plus the PHYs of its HBM stacks (a wafer-scale die is
        exempt from the reticle, arch.wafer: not counted)."""
        phy = self.tables.hbm.phy_area_mm2 if self.tables.hbm else 0.0
        die = np.where(self.tables.kind_wafer_kgd_usd[kind] > 0, 0.0, self.tables.kind_area_mm2[kind] + stacks * phy)
        in_package = np.arange(kind.shape[1])[None, :] < np.asarray(n)[:, None]
        return np.where(in_package, die, 0.0).max(axis=1)

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        """Metrics of designs given directly (hand-written or read back), not as decision vectors."""
        return self.decoded_metrics(design_arrays(designs, self.tables, self.space.max_slots, self.max_copies),
                                    with_faults)

    def decoded_metrics(self, d: DecodedDesigns, with_faults: bool = True, memory_path: bool = True,
                        incremental: bool = False) -> np.ndarray:
        """Metrics of designs given as kernel arrays (`design_arrays`, or arrays derived from them: the
        mappings dse.runtime relabels and re-maps without building design records); ``memory_path=False``
        leaves ``units_without_memory`` NaN (dse.runtime's windows: their steps are all it reads);
        ``incremental`` (without failures): a design after one of the same package costs only the stages
        that differ from it (dse.model.perf_model.base_passes: equal figures; dse.runtime orders its
        mappings so)."""
        def run(r: slice) -> np.ndarray:
            return self._kernel(d.take(r), with_faults, self._workspaces(d.slots.shape[2]), memory_path=memory_path,
                                incremental=incremental)
        return map_rows(run, len(d.rows), self.threads)

    def cost_parts(self, designs: list[Design]) -> pd.DataFrame:
        """The parts of each design's package cost (arch.packaging.PACKAGE_COST_PARTS: dies, memory,
        interposer or substrate, bonding, yield loss), one row per design; they sum to its ``cost_usd``."""
        d = design_arrays(designs, self.tables, self.space.max_slots, self.max_copies)
        return pd.DataFrame(cost_part_arrays(self.kernel, d.chiplets, d.kind, d.stacks, d.ddr),
                            columns=list(PACKAGE_COST_PARTS))

    def failure_report(self, design: Design) -> pd.DataFrame:
        """What each single-chiplet failure does to a design: latency after it, throughput kept, served."""
        report = self._single_report(design)
        return report[report["failed_link"] == ""].drop(columns="failed_link").reset_index(drop=True)

    def link_failure_report(self, design: Design) -> pd.DataFrame:
        """The same per physical link ("a-b"), when the study's ``faults.links`` asks for link failures."""
        report = self._single_report(design)
        return report[report["failed_link"] != ""].drop(columns="failed_chiplet").reset_index(drop=True)

    def _single_report(self, design: Design) -> pd.DataFrame:
        d = design_arrays([design], self.tables, self.space.max_slots, self.max_copies)
        n = int(d.chiplets[0])
        sh = self._shapes(d.rows, d.cols)[0]
        res = single_failures(self.kernel, self.routes, sh, n, d.kind[0], d.stacks[0], d.ddr[0], d.slots[0],
                              d.ncopy[0], self.space.split, *self._workspaces(d.slots.shape[2]))
        latency, short = res[-1]
        kept = [float(retained_frac(latency, short, lat, s)) for lat, s in res[:-1]]
        chips = n if n > 1 else 0
        if chips == 0:          # the only chiplet: losing it keeps nothing (fault_tolerance_frac counts 0)
            return pd.DataFrame({"failed_chiplet": [0], "failed_link": [""], "latency_s": [np.inf],
                                 "retained_frac": [0.0], "all_served": [False]})
        links = [f"{a}-{b}" for a, b in physical_links(self.package.network(design.rows, design.cols))] \
            if self.routes.n_phys[sh] else []
        return pd.DataFrame({"failed_chiplet": list(range(chips)) + [-1] * len(links),
                             "failed_link": [""] * chips + links, "latency_s": res[:-1, 0], "retained_frac": kept,
                             "all_served": [k > 0 for k in kept]})

    def remapped_arrays(self, d: DecodedDesigns, failed: list[int],
                        workspace=None) -> tuple[bool, np.ndarray, np.ndarray]:
        """The first design of ``d`` after the chiplets in ``failed`` die and their units move: (whether every
        unit found a chiplet, slots ``[U, C]``, copies ``[U]``); ``workspace``: the caller's `workspace` of
        ``d``'s copies to reuse (one thread), else a fresh one."""
        n = int(d.rows[0] * d.cols[0])
        ok, new_slots, count = remapped_design(self.kernel, n, np.array(sorted(set(failed)), np.int64), d.kind[0],
                                               d.stacks[0], d.slots[0], d.ncopy[0], self.space.split,
                                               workspace or self.workspace(d.slots.shape[2]))
        return bool(ok), new_slots, count

    def remapped(self, design: Design, failed: list[int]) -> Design | None:
        """The design after the chiplets in ``failed`` die and their units move (None: nothing survives)."""
        d = design_arrays([design], self.tables, self.space.max_slots, self.max_copies)
        ok, new_slots, count = self.remapped_arrays(d, failed)
        if not ok:
            return None
        placement = {u: [int(x) for x in new_slots[i, : count[i]]] for i, u in enumerate(self.tables.unit_names)}
        return dataclasses.replace(design, chiplets=list(design.chiplets), hbm_stacks=list(design.hbm_stacks),
                                   placement=placement)

    def designs(self, X: np.ndarray) -> list[Design]:
        """The designs of gene vectors ``X`` (dse.model.records.design_records)."""
        return design_records(self.decode(X), self.tables, self.link, self.space.mapping, self.topology)

    def designs_and_placements(self, X: np.ndarray) -> tuple[list[Design], list]:
        """`designs` and their placements as arrays (dse.model.records.placement_arrays), decoded once."""
        d = self.decode(X)
        return (design_records(d, self.tables, self.link, self.space.mapping, self.topology),
                placement_arrays(d))
