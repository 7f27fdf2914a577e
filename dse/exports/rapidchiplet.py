"""Export a design to RapidChiplet (spcl/rapidchiplet, the 2025 rewrite): a design JSON and the files
it points to, so RapidChiplet computes area, power, cost, latency and throughput of the package.

How the design maps onto RapidChiplet's inputs:

* chiplets: one chiplet type per (kind, HBM stacks) pair in use, a square die of the study's die area
  (compute die + HBM PHYs, arch.chiplet_area_mm2), four edge PHYs (west 0, north 1, east 2, south 3,
  RapidChiplet's ``4PHY_Edge`` order), power = static + active + peak dynamic + HBM at full bandwidth, and one
  traffic endpoint ("unit") per chiplet;
* placement: row r, column c of the mesh at (c x pitch, r x pitch) mm, pitch = largest die side + a
  0.15 mm gap; topology: east-west and north-south neighbours linked PHY to PHY;
* technologies: each node's wafer cost and defect density (per mm²) from arch/data/technology.yaml,
  wafer radius from the wafer diameter, PHY latency 1 cycle; the package clock is the router clock
  of noc/data/links.yaml, router (internal) latency and link latency in its cycles;
* link width: RapidChiplet counts one bit per data bump per cycle; UCIe lanes run at tens of GT/s, so
  ``bump_pitch`` here is the effective pitch at which its bump-limited width equals the study's link
  bandwidth per network cycle (not a physical pitch);
* routing table: dimension-order (XY) next hops, as the evaluator routes;
* traffic: the design's expected chiplet-to-chiplet traffic (dse.model.traffic) in bits per network cycle
  over one step, so RapidChiplet's aggregate throughput over the offered load is the headroom of the
  busiest link; packaging yield = the study's bonding yield over every die and HBM stack.

HBM stacks and DDR are not RapidChiplet components; they enter through die area, power and yield, and
the study's own description of the design rides along under ``chiplet_dse`` keys RapidChiplet ignores.
Tuple keys are written as RapidChiplet's helpers.encode_key does: ``"__tuple__:" + json.dumps([...])``,
tuple values as ``{"__tuple__": true, "items": [...]}``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

import arch

from .common import ExportContext, write_json, write_readme

TOOL = "RapidChiplet"
TARGET = "(github spcl/rapidchiplet, 2025 rewrite, commit 66e63e5 of May 2025)"
GAP_MM = 0.15                  # spacing between dies, as in RapidChiplet's example placement
PHY_LATENCY_CYCLES = 1
FRACTION_POWER_BUMPS = 0.5     # RapidChiplet example value
PHY_BUMP_SHARE = 0.25 * (1 - 1e-6)   # of the smallest die's bump area per PHY (four PHYs, sum <= 1)
WEST, NORTH, EAST, SOUTH = 0, 1, 2, 3


def encode_key(key) -> str:
    """RapidChiplet's tuple-key encoding (helpers.encode_key)."""
    if isinstance(key, tuple):
        return "__tuple__:" + json.dumps([encode_key(k) for k in key])
    return key


def encode(data):
    """RapidChiplet's JSON encoding of nested dicts with tuple keys and tuple values (helpers.encode_data)."""
    if isinstance(data, dict):
        return {encode_key(k): encode(v) for k, v in data.items()}
    if isinstance(data, list):
        return [encode(v) for v in data]
    if isinstance(data, tuple):
        return {"__tuple__": True, "items": [encode(v) for v in data]}
    return data


def chiplet_types(ctx: ExportContext) -> tuple[dict[str, dict], float]:
    """RapidChiplet chiplet types, one per (kind, HBM stacks) pair of the design, and the bump pitch."""
    t = ctx.prepared.tables
    K = ctx.prepared.package_evaluator.kernel
    d = ctx.design
    pairs = sorted({(k, h) for k, h in zip(d.chiplets, d.hbm_stacks)})
    areas = {p: t.kind_area_mm2[t.kind_names.index(p[0])] + p[1] * K.hbm_phy for p in pairs}
    link_bits = 8.0 * ctx.link_bytes_per_cycle
    smallest = min(areas.values())
    # bumps per PHY for both directions of a link: 2 x link width; smallest die gets PHY_BUMP_SHARE of its bumps
    pitch = math.sqrt(PHY_BUMP_SHARE * smallest * (1 - FRACTION_POWER_BUMPS) / (2 * link_bits + 0.5))
    out = {}
    for (kind, stacks), area in areas.items():
        k = t.kind_names.index(kind)
        side = math.sqrt(area)
        share = (2 * link_bits + 0.5) * pitch**2 / (area * (1 - FRACTION_POWER_BUMPS))
        inset = side * (1 - math.sqrt(FRACTION_POWER_BUMPS)) / 4          # RapidChiplet's 4PHY_Edge inset
        phys = [(inset, side / 2), (side / 2, side - inset), (side - inset, side / 2), (side / 2, inset)]
        power = t.kind_static_w[k] + t.kind_active_w[k] + t.kind_peak_dynamic_w[k] + stacks * K.hbm_bw * K.hbm_e
        out[f"{kind}+hbm{stacks}"] = {
            "dimensions": {"x": side, "y": side}, "type": "compute",
            "phys": [{"x": x, "y": y, "fraction_bump_area": share} for x, y in phys],
            "fraction_power_bumps": FRACTION_POWER_BUMPS, "technology": t.kind_nodes[k], "power": float(power),
            "relay": True, "internal_latency": ctx.router_cycles, "unit_count": 1,
            "chiplet_dse": {"kind": kind, "hbm_stacks": int(stacks), "area_mm2": float(area)}}
    return out, pitch


def export(ctx: ExportContext, out: Path) -> list[Path]:
    ctx.require_grid("RapidChiplet")
    d = ctx.design
    t = ctx.prepared.tables
    K = ctx.prepared.package_evaluator.kernel
    n, cols = ctx.n, d.cols
    types, bump_pitch = chiplet_types(ctx)
    type_of = [f"{k}+hbm{h}" for k, h in zip(d.chiplets, d.hbm_stacks)]
    pitch = max(v["dimensions"]["x"] for v in types.values()) + GAP_MM
    nodes = sorted(set(t.kind_nodes[t.kind_names.index(k)] for k in d.chiplets))
    technologies = {nd: {"phy_latency": PHY_LATENCY_CYCLES, "wafer_radius": arch.technology.wafer_diameter_mm() / 2,
                         "wafer_cost": arch.node(nd).wafer_cost_usd,
                         "defect_density": arch.node(nd).defect_density_per_cm2 / 100.0} for nd in nodes}
    placement = {"chiplets": [{"position": {"x": (s % cols) * pitch, "y": (s // cols) * pitch}, "rotation": 0,
                               "name": type_of[s], "chiplet_dse": {"slot": s, "units": ctx.units_on(s)}}
                              for s in range(n)],
                 "interposer_routers": []}
    topology = []
    for a, b in sorted(ctx.links()):
        if a < b:        # one RapidChiplet link per chiplet pair; PHYs by direction (same row: east-west)
            east_west = a // cols == b // cols
            topology.append({"ep1": {"type": "chiplet", "outer_id": a, "inner_id": EAST if east_west else NORTH},
                             "ep2": {"type": "chiplet", "outer_id": b, "inner_id": WEST if east_west else SOUTH}})
    n_stacks = int(sum(d.hbm_stacks[:n]))
    packaging = {"link_routing": "manhattan", "link_latency_type": "constant",
                 "link_latency": max(ctx.link_cycles - 2 * PHY_LATENCY_CYCLES, 0),
                 "link_power_type": "constant",
                 "link_power": float(t.link.energy_j_per_byte * t.link.bandwidth_Bps),
                 "packaging_yield": float(K.bond_yield ** (n + n_stacks)), "bump_pitch": bump_pitch,
                 "non_data_wires": 0, "is_active": False, "latency_irouter": 0, "power_irouter": 0,
                 "has_interposer": False}
    table = {("chiplet", i): {("chiplet", j): (None if i == j else ("chiplet", ctx.next_hop(i, j)))
                              for j in range(n)} for i in range(n)}
    traffic = ctx.traffic_bytes()
    cycles_per_step = float(ctx.metrics["latency_s"]) * ctx.noc_freq_hz
    rate = traffic * 8.0 / cycles_per_step                      # bits per network cycle
    by_chiplet = {(i, j): float(rate[i, j]) for i in range(n) for j in range(n) if rate[i, j] > 0}
    by_unit = {((i, 0), (j, 0)): v for (i, j), v in by_chiplet.items()}
    booksim_config = {"mode": "traffic", "precision": 0.001, "saturation_factor": 5, "num_vcs": 4,
                      "vc_buf_size": 8, "packet_size": 1, "injection_rate_uses_flits": 1, "sample_period": 1000,
                      "warmup_periods": 1, "sim_count": 1, "router_latency": ctx.router_cycles}
    files = {"technologies": technologies, "chiplets": types, "placement": placement, "topology": topology,
             "packaging": packaging, "routing_table": {"type": "default", "table": table},
             "traffic_by_chiplet": by_chiplet, "traffic_by_unit": by_unit, "booksim_config": booksim_config}
    written = [write_json(out / f"{name}.json", encode(data)) for name, data in files.items()]
    design_file = {"design_name": ctx.design_id, **{name: f"{name}.json" for name in files}, "trace": "none",
                   "chiplet_dse": {"design_id": ctx.design_id, "study": ctx.study.name, "rows": d.rows,
                                   "cols": d.cols, "ddr_channels": d.ddr_channels, "link": d.link,
                                   "mapping": d.mapping, "noc_freq_hz": ctx.noc_freq_hz,
                                   "step_latency_s": float(ctx.metrics["latency_s"]),
                                   "traffic_unit": "bits per network cycle, averaged over one step"}}
    written.append(write_json(out / "design.json", design_file))
    offered = sum(by_chiplet.values())
    written.append(write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`: {d.rows} x {d.cols} chiplets, "
        f"{ctx.noc_freq_hz / 1e9:g} GHz network clock, offered load {offered:.4g} bits/cycle.",
        "",
        "Run from this folder (paths in design.json are relative to it):",
        "",
        "    mkdir -p results",
        f"    python3 PATH/TO/rapidchiplet/rapidchiplet.py -df design.json -rf {ctx.design_id} -as -ps -c -l -t",
        "",
        f"Results land in results/{ctx.design_id}.json. `throughput.aggregate_throughput` is the load at which "
        "the busiest link saturates; divided into the offered load above it gives that link's utilisation.",
        "See the docstring of dse/exports/rapidchiplet.py for how each field was derived."]))
    return written
