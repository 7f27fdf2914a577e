"""Evaluate populations of systems: one package design x the study's parallel layouts across packages.

Without a ``system`` section a design is one package: the package evaluator's metrics, plus carbon.
With one, each design also chooses pipeline stages P, expert-parallel ranks E and replicas D
(``pipeline``, ``experts``, ``replicas`` genes); every package is evaluated by the package evaluator on
its share of the workload (dse.system.packages) and the shares are composed:

* a stage of the pipeline lasts as long as its slowest rank plus its expert all-to-alls (dispatch and
  combine per MoE layer instance, dse.system.traffic); latency = the stages and the hand-offs between
  them; with m batches in flight (``system.in_flight``) a replica serves ``batch x min(1 / period,
  m / latency)`` tokens per second, ``period`` its slowest stage; throughput sums the replicas;
* energy per token: the packages' dynamic energy and the cross-package traffic per step over the batch,
  plus every package's static power over the throughput;
* area, cost, peak power and embodied carbon: the package's times the packages (NICs, switches, hosts
  and boards are not counted);
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

import numpy as np
import pandas as pd

from ..model.evaluator import METRICS
from ..study.space import SYSTEM_AXES, Design
from .carbon import CarbonFactors
from .embodied import PackageEmbodied
from .hardware import SystemHardware
from .layout import Layout
from .packages import PackageBank, StagePackages
from .traffic import LayoutTraffic, layout_traffic

SYSTEM_METRICS = METRICS + ["carbon_g_per_token", "carbon_operational_g_per_token", "carbon_embodied_g_per_token",
                            "embodied_kg", "packages", "nodes", "comm_fabric_s", "comm_network_s"]
C = {name: i for i, name in enumerate(SYSTEM_METRICS)}


class SystemEvaluator:
    """The evaluator interface (``__call__``, ``metrics_array``, ``evaluate_designs``, ``designs``) over
    systems of packages; see the module docstring."""

    def __init__(self, package, space, factors: CarbonFactors, embodied: list[PackageEmbodied],
                 hardware: SystemHardware | None = None, bank: PackageBank | None = None, study=None):
        self.package, self.space, self.factors, self.embodied = package, space, factors, embodied
        self.hardware, self.bank, self.study = hardware, bank, study
        self.traffic_cache: dict[Layout, LayoutTraffic] = {}

    # --- the parts of the package evaluator every caller used -------------------------------------------
    def __getattr__(self, name: str):
        """Anything else is the package evaluator's (routes, kernel, failure reports, variant labels, ...)."""
        package = self.__dict__.get("package")
        if package is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(package, name)

    @property
    def tables(self):
        return self.package.tables

    @property
    def max_copies(self) -> int:
        return self.package.max_copies

    @property
    def metric_names(self) -> list[str]:
        return SYSTEM_METRICS

    def decode(self, X):
        return self.package.decode(X)

    def variant_for(self, design: Design) -> int:
        return self.package.variant_for(design)

    # --- layouts ---------------------------------------------------------------------------------------
    @property
    def is_system(self) -> bool:
        return self.hardware is not None

    def layouts_of(self, X: np.ndarray) -> list[Layout]:
        if not self.is_system:
            return [Layout()] * len(X)
        parallel = self.study.system.parallel
        idx = [X[:, self.space.slices[a].start] for a in SYSTEM_AXES]
        return [Layout(*(getattr(parallel, a)[int(i[k])] for a, i in zip(SYSTEM_AXES, idx))) for k in range(len(X))]

    def traffic(self, layout: Layout) -> LayoutTraffic:
        if layout not in self.traffic_cache:
            stage = self.bank.get(layout.pipeline, layout.experts)
            self.traffic_cache[layout] = layout_traffic(stage.rank_tables, layout, stage.held, stage.ranks,
                                                        self.hardware)
        return self.traffic_cache[layout]

    # --- evaluation ------------------------------------------------------------------------------------
    def __call__(self, X: np.ndarray, with_faults: bool = True) -> pd.DataFrame:
        return pd.DataFrame(self.metrics_array(X, with_faults), columns=SYSTEM_METRICS)

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)
        if not self.is_system:
            return self._one_package(X, self.package.metrics_array(X, with_faults))
        return self._systems(X, self.layouts_of(X), with_faults,
                             lambda share, rows: share.evaluator.metrics_array(X[rows][:, share.genes], False))

    def evaluate_designs(self, designs: list[Design], with_faults: bool = True) -> pd.DataFrame:
        """Metrics of designs given directly (hand-written or read back), not as decision vectors."""
        X = self._package_arrays(designs)
        if not self.is_system:
            out = self._one_package(X, self.package.evaluate_designs(designs, with_faults).to_numpy(), designs)
        else:
            layouts = [Layout(**{a: int((d.system or {}).get(a, 1)) for a in SYSTEM_AXES}) for d in designs]
            out = self._systems(X, layouts, with_faults, lambda share, rows: share.evaluator.evaluate_designs(
                [share.restrict(designs[i]) for i in rows], False).to_numpy())
        return pd.DataFrame(out, columns=SYSTEM_METRICS)

    def designs(self, X: np.ndarray) -> list[Design]:
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)
        out = self.package.designs(X)
        if self.is_system:
            for design, layout in zip(out, self.layouts_of(X)):
                design.system = layout.as_dict()
        return out

    # --- one package -----------------------------------------------------------------------------------
    def _package_arrays(self, designs: list[Design]):
        """(n, kind, stacks, ddr, variant) of explicit designs, for their embodied carbon."""
        names = self.tables.kind_names
        width = self.space.max_slots
        kind = np.zeros((len(designs), width), np.int64)
        stacks = np.zeros((len(designs), width), np.int64)
        for i, d in enumerate(designs):
            kind[i, : len(d.chiplets)] = [names.index(k) for k in d.chiplets]
            stacks[i, : len(d.hbm_stacks)] = d.hbm_stacks
        n = np.array([d.rows * d.cols for d in designs], np.int64)
        ddr = np.array([d.ddr_channels for d in designs], np.int64)
        variant = np.array([self.variant_for(d) if len(self.embodied) > 1 else 0 for d in designs], np.int64)
        return n, kind, stacks, ddr, variant

    def _decoded(self, X: np.ndarray):
        rows, cols, kind, stacks, ddr, *_ = self.decode(X)
        variant = X[:, self.space.slices["variant"].start] if "variant" in self.space.slices \
            else np.zeros(len(X), np.int64)
        return rows * cols, kind, stacks, ddr, variant

    def _embodied_g(self, arrays) -> np.ndarray:
        n, kind, stacks, ddr, variant = arrays
        out = np.zeros(len(n))
        for v in np.unique(variant):
            rows = variant == v
            out[rows] = self.embodied[v](n[rows], kind[rows], stacks[rows], ddr[rows])
        return out

    def _one_package(self, X, metrics: np.ndarray, designs=None) -> np.ndarray:
        arrays = X if designs is not None else self._decoded(X)
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
    def _systems(self, X, layouts: list[Layout], with_faults: bool, run) -> np.ndarray:
        """Every metric of designs with their layouts; ``run(share, rows)`` evaluates one package share."""
        arrays = X if not isinstance(X, np.ndarray) else self._decoded(X)
        out = np.zeros((len(layouts), len(SYSTEM_METRICS)))
        groups: dict[Layout, list[int]] = {}
        for i, layout in enumerate(layouts):
            groups.setdefault(layout, []).append(i)
        for layout, rows in groups.items():
            rows = np.array(rows)
            stage = self.bank.get(layout.pipeline, layout.experts)
            M = [[run(share, rows) for share in row] for row in stage.shares]
            f = self._stage_figures(stage, M)
            out[rows] = self._compose(layout, f, M[0][0])
            if with_faults:
                self._package_failures(layout, stage, M, f, out, rows, run)
        self._carbon(out, self._embodied_g(arrays) * out[:, C["packages"]])
        return out

    def _stage_figures(self, stage: StagePackages, M: list[list[np.ndarray]]) -> dict[str, np.ndarray]:
        """Per pipeline stage (axis 0) and design (axis 1): its slowest rank and its ranks' sums."""
        tokens = stage.rank_tokens
        i = {m: METRICS.index(m) for m in METRICS}
        lat = np.array([np.max([m[:, i["latency_s"]] for m in row], axis=0) for row in M])
        p99 = np.array([np.max([m[:, i["latency_p99_s"]] for m in row], axis=0) for row in M])

        def total(name: str, scale=1.0) -> np.ndarray:
            return np.array([np.sum([m[:, i[name]] * scale for m in row], axis=0) for row in M])
        static_w = np.array([np.sum([m[:, i["energy_static_j_per_token"]] * tokens / m[:, i["latency_s"]]
                                     for m in row], axis=0) for row in M])
        return dict(lat=lat, p99=p99, static_w=static_w,
                    compute=total("energy_compute_j_per_token", tokens), dram_e=total("energy_dram_j_per_token", tokens),
                    net_e=total("energy_network_j_per_token", tokens), short=total("capacity_short_bytes"),
                    unplaced=total("unplaced_experts"), dram=total("dram_bytes"), hops=total("net_byte_hops"))

    def _replica(self, layout: Layout, traffic: LayoutTraffic, lat: np.ndarray, p99: np.ndarray):
        """Per replica class: (latency, p99, throughput) arrays over designs."""
        batch = float(self.study.workload.batch)
        m = self.bank.in_flight(layout.pipeline)
        out = []
        for stages in traffic.stages:
            t = lat + np.array([s.time_s for s in stages])[:, None]
            send = np.array([s.send_s for s in stages])[:, None]
            latency = t.sum(axis=0) + send.sum()
            tail = p99.sum(axis=0) + sum(s.time_s + s.send_s for s in stages)
            period = np.maximum(t, send).max(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                throughput = batch * np.minimum(1.0 / period, m / latency)
            out.append((latency, tail, throughput))
        return out

    def _compose(self, layout: Layout, f: dict, first: np.ndarray) -> np.ndarray:
        """Every metric of a layout's designs from its stage figures and first package's own metrics."""
        traffic = self.traffic(layout)
        replicas = self._replica(layout, traffic, f["lat"], f["p99"])
        n_designs = f["lat"].shape[1]
        out = np.zeros((n_designs, len(SYSTEM_METRICS)))
        batch = float(self.study.workload.batch)
        latency = np.max([r[0] for r in replicas], axis=0)
        throughput = np.sum([r[2] for r in replicas], axis=0)
        comm_e = np.mean([sum(s.energy_j for s in stages) for stages in traffic.stages])
        static_w = layout.replicas * f["static_w"].sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            e_static = static_w / throughput
        e_compute = f["compute"].sum(axis=0) / batch
        e_dram = f["dram_e"].sum(axis=0) / batch
        e_net = (f["net_e"].sum(axis=0) + comm_e) / batch
        out[:, C["latency_s"]] = latency
        out[:, C["latency_p99_s"]] = np.max([r[1] for r in replicas], axis=0)
        out[:, C["throughput_tok_s"]] = throughput
        out[:, C["energy_j_per_token"]] = e_compute + e_dram + e_net + e_static
        out[:, C["energy_compute_j_per_token"]] = e_compute
        out[:, C["energy_dram_j_per_token"]] = e_dram
        out[:, C["energy_network_j_per_token"]] = e_net
        out[:, C["energy_static_j_per_token"]] = e_static
        for name in ("area_mm2", "package_area_mm2", "cost_usd", "power_w"):
            out[:, C[name]] = layout.packages * first[:, C[name]]
        out[:, C["max_die_mm2"]] = first[:, C["max_die_mm2"]]
        out[:, C["capacity_short_bytes"]] = f["short"].sum(axis=0)
        out[:, C["unplaced_experts"]] = f["unplaced"].sum(axis=0)
        out[:, C["dram_bytes"]] = f["dram"].sum(axis=0)
        out[:, C["net_byte_hops"]] = f["hops"].sum(axis=0) + sum(s.byte_hops for s in traffic.stages[0])
        out[:, C["mc_retained_frac"]] = np.nan
        out[:, C["mc_survival_frac"]] = np.nan
        out[:, C["packages"]] = layout.packages
        out[:, C["nodes"]] = layout.nodes(self.hardware.packages_per_node)
        out[:, C["comm_fabric_s"]] = sum(s.fabric_s for s in traffic.stages[0])
        out[:, C["comm_network_s"]] = sum(s.network_s for s in traffic.stages[0])
        return out

    def _package_failures(self, layout: Layout, stage: StagePackages, M, f: dict, out: np.ndarray,
                          rows: np.ndarray, run) -> None:
        """Fault tolerance over single package failures (module docstring), into ``out[rows]``."""
        one = Layout(layout.pipeline, layout.experts, 1)
        before = self._replica(one, self.traffic(one), f["lat"], f["p99"])[0][2]
        short = f["short"].sum(axis=0)
        others = (layout.replicas - 1) / layout.replicas
        if layout.per_replica == 1:
            kept_replica = [np.zeros(len(rows))]
        elif layout.experts > 1:
            kept_replica = [self._after(layout, stage, f, rows, run, p, before, short) for p in range(layout.pipeline)]
        else:
            kept_replica = [self._after(layout, stage, f, rows, run, None, before, short)]
        kept = np.array([others + k / layout.replicas for k in kept_replica])
        out[rows, C["fault_tolerance_frac"]] = kept.mean(axis=0)
        out[rows, C["worst_retained_frac"]] = kept.min(axis=0)
        out[rows, C["all_served_frac"]] = np.mean([k > 0 for k in kept_replica], axis=0)

    def _after(self, layout: Layout, stage: StagePackages, f: dict, rows, run, failed_stage, before,
               short) -> np.ndarray:
        """Throughput one replica keeps after losing a package of ``failed_stage`` (expert-parallel: that
        stage re-spread over one rank fewer) or, without expert parallelism, any package (``None``: the
        layers re-split over one stage fewer)."""
        if failed_stage is None:
            smaller = Layout(layout.pipeline - 1, 1, 1)
            st = self.bank.get(smaller.pipeline, 1)
            g = self._stage_figures(st, [[run(share, rows) for share in row] for row in st.shares])
            traffic, replica = self.traffic(smaller), smaller
        else:
            st = self.bank.get(layout.pipeline, layout.experts - 1)
            fewer = self._stage_figures(st, [[run(share, rows) for share in st.shares[failed_stage]]])
            g = {key: value.copy() for key, value in f.items()}
            for key in ("lat", "p99", "short"):
                g[key][failed_stage] = fewer[key][0]
            replica = Layout(layout.pipeline, layout.experts, 1)
            traffic = self._mixed_traffic(replica, Layout(layout.pipeline, layout.experts - 1, 1), failed_stage)
        _, _, throughput = self._replica(replica, traffic, g["lat"], g["p99"])[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            kept = np.minimum(throughput / before, 1.0)
        lost = (g["short"].sum(axis=0) > short) | ~np.isfinite(kept) | ~(throughput > 0)
        return np.where(lost, 0.0, kept)

    def _mixed_traffic(self, layout: Layout, smaller: Layout, failed_stage: int) -> LayoutTraffic:
        """The layout's own cross-package costs with the failed stage's all-to-alls among one rank fewer."""
        stages = list(self.traffic(layout).stages[0])
        stages[failed_stage] = self.traffic(smaller).stages[0][failed_stage]
        return LayoutTraffic(stages=[stages])
