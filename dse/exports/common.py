"""What every exporter starts from: one design of a results folder with its study, tables and metrics."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from noc import router_freq_hz

from ..errors import StudyError
from ..model.traffic import chiplet_traffic
from ..results.folder import design_path, read_design, read_study_file
from ..study.space import Design
from ..study.spec import Study
from ..system.prepare import prepare


@dataclass
class ExportContext:
    """A design ready to export: the design, its study and prepared models, its metrics and traffic."""

    design_id: str
    design: Design
    study: Study
    prepared: object                 # dse.model.prepare.Prepared
    metrics: pd.Series               # dse.model.metrics.METRICS of the design's package under its study
    system: object | None = None     # the study's system-level Prepared when the design is a system of packages

    @property
    def n(self) -> int:
        return self.design.rows * self.design.cols

    @property
    def noc_freq_hz(self) -> float:
        """Clock of the package network: the router clock of noc/data/links.yaml."""
        return router_freq_hz()

    @property
    def router_cycles(self) -> int:
        return self.cycles(self.prepared.tables.link.router_latency_s)

    @property
    def link_cycles(self) -> int:
        """PHY-to-PHY latency of one link in network cycles."""
        return self.cycles(self.prepared.tables.link.latency_s)

    def cycles(self, seconds: float) -> int:
        """A latency in network cycles, rounded, at least 1."""
        return max(1, int(round(seconds * self.noc_freq_hz)))

    @property
    def link_bytes_per_cycle(self) -> float:
        return self.prepared.tables.link.bandwidth_Bps / self.noc_freq_hz

    def traffic_bytes(self) -> np.ndarray:
        """Expected bytes per step between chiplets (dse.model.traffic)."""
        return chiplet_traffic(self.design, self.prepared.tables)

    def network(self):
        """(topology, routes) of the design's package network (dse.model.traffic.package_routes)."""
        if getattr(self, "_network", None) is None:
            from ..model.traffic import package_routes
            self._network = package_routes(self.design, self.study.hardware.package)
        return self._network

    def require_grid(self, tool: str) -> None:
        """Exports that place links by compass direction need a mesh."""
        topology = self.study.hardware.package.topology
        if topology != "mesh":
            raise StudyError(f"the {tool} export writes mesh packages; this study's package is a {topology}",
                             key="hardware.package.topology")

    def links(self) -> list[tuple[int, int]]:
        """Directed links of the package network between chiplet slots."""
        topology, _ = self.network()
        return list(zip(topology.link_src.tolist(), topology.link_dst.tolist()))

    def next_hop(self, src: int, dst: int) -> int:
        """Next chiplet on the route the evaluator takes from src to dst."""
        topology, routes = self.network()
        first = routes.route_links[routes.route_ptr[src * self.n + dst]]
        return int(topology.link_dst[first])

    def units_on(self, slot: int) -> list[str]:
        return [u for u in self.prepared.tables.unit_names if slot in self.design.placement.get(u, [])]


def load_context(results_dir: str | Path, design_id: str) -> ExportContext:
    """The context of design ``design_id`` of a results folder (the design re-evaluated under its study).

    Only ``study.yaml`` and ``designs/<id>.yaml`` are read: a hand-written design dropped into
    ``designs/`` exports like a searched one."""

    folder = Path(results_dir)
    design = read_design(design_path(folder, design_id))
    study = read_study_file(folder)
    prepared = prepare(study)
    missing = [u for u in prepared.tables.unit_names if u not in design.placement]
    if missing:
        raise StudyError(f"the design places no copy of unit {missing[0]!r} of the study's workload",
                         key="placement", source=str(design_path(folder, design_id)))
    system = prepared if design.system else None
    prepared = prepared.for_design(design)          # the design's package variant (dse.model.variants), or for a
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]     # system its first package
    return ExportContext(design_id=design_id, design=design, study=prepared.study, prepared=prepared,
                         metrics=metrics, system=system)


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def write_readme(out: Path, tool: str, target: str, body: list[str]) -> Path:
    """README.md of an export; its first line names the tool version the files target."""
    text = [f"Targets: {tool} {target}", "", *body, ""]
    path = out / "README.md"
    path.write_text("\n".join(text))
    return path
