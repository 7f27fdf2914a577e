"""Compose a system's metrics from its packages' own (dse.model.metrics.METRICS of each package share)
and the cross-package traffic of its layout (dse.system.traffic); the model is in dse.system.evaluator.

Per pipeline stage: the slowest expert-parallel rank, and the sums over ranks of energies, memory
shortfall, unit copies without memory and bytes. Per replica: latency = sum over stages of (slowest
rank + all-to-alls) + the hand-offs between stages; ``period`` = the slowest stage (or hand-off); with
m batches in flight a replica serves ``tokens x min(1 / period, m / latency)`` tokens per second
(``tokens``: a replica's step, the batch in decode, batch x prompt in prefill).
"""
from __future__ import annotations

from functools import reduce

import numpy as np

from ..model.metrics import METRICS
from .layout import Layout
from .metrics import SYSTEM_METRICS, C
from .traffic import LayoutTraffic

COLUMN = {name: i for i, name in enumerate(METRICS)}


def in_order(parts) -> np.ndarray:
    """The sum over the first axis (stages, ranks, replicas) of per-design arrays, one part after another:
    a design's figures then never depend on how many designs are evaluated with it (NumPy sums an axis
    pairwise when it is contiguous, as it is for a single design, and in order otherwise)."""
    return reduce(np.add, parts)


def stage_figures(M: list[list[np.ndarray]], tokens: float) -> dict[str, np.ndarray]:
    """Per pipeline stage (axis 0) and design (axis 1), from ``M[stage][rank]`` (metric arrays of the
    package shares, each serving ``tokens`` per step): the slowest rank and the ranks' sums."""
    def slowest(name: str) -> np.ndarray:
        return np.array([np.max([m[:, COLUMN[name]] for m in row], axis=0) for row in M])

    def total(name: str, scale: float = 1.0) -> np.ndarray:
        return np.array([in_order([m[:, COLUMN[name]] * scale for m in row]) for row in M])

    def static_w(m: np.ndarray) -> np.ndarray:
        latency = m[:, COLUMN["latency_s"]]
        ok = np.isfinite(latency) & (latency > 0)
        return np.where(ok, m[:, COLUMN["energy_static_j_per_token"]] * tokens / np.where(ok, latency, 1.0), 0.0)
    return dict(lat=slowest("latency_s"), p99=slowest("latency_p99_s"),
                static_w=np.array([in_order([static_w(m) for m in row]) for row in M]),
                compute=total("energy_compute_j_per_token", tokens), dram_e=total("energy_dram_j_per_token", tokens),
                net_e=total("energy_network_j_per_token", tokens), short=total("capacity_short_bytes"),
                unplaced=total("unplaced_experts"), no_memory=total("units_without_memory"), dram=total("dram_bytes"),
                hops=total("net_byte_hops"))


def replica_rates(traffic: LayoutTraffic, lat: np.ndarray, p99: np.ndarray, tokens: float,
                  in_flight: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per replica: (latency, p99 latency, throughput) over designs (see module docstring)."""
    out = []
    for stages in traffic.stages:
        t = lat + np.array([s.time_s for s in stages])[:, None]
        send = np.array([s.send_s for s in stages])[:, None]
        latency = in_order(t) + send.sum()
        tail = in_order(p99) + sum(s.time_s + s.send_s for s in stages)
        period = np.maximum(t, send).max(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            throughput = tokens * np.minimum(1.0 / period, in_flight / latency)
        out.append((latency, tail, throughput))
    return out


def compose(layout: Layout, f: dict, first: np.ndarray, traffic: LayoutTraffic, tokens: float, in_flight: int,
            packages_per_node: int) -> np.ndarray:
    """Every metric of a layout's designs (dse.system.evaluator.SYSTEM_METRICS, fault tolerance left 0) from
    its stage figures ``f`` and the first package's own metrics ``first`` (identical hardware)."""
    replicas = replica_rates(traffic, f["lat"], f["p99"], tokens, in_flight)
    out = np.zeros((f["lat"].shape[1], len(SYSTEM_METRICS)))
    throughput = in_order([r[2] for r in replicas])
    comm_e = np.mean([sum(s.energy_j for s in stages) for stages in traffic.stages])
    static_w = layout.replicas * in_order(f["static_w"])
    with np.errstate(divide="ignore", invalid="ignore"):
        e_static = static_w / throughput
    e_compute = in_order(f["compute"]) / tokens
    e_dram = in_order(f["dram_e"]) / tokens
    e_net = (in_order(f["net_e"]) + comm_e) / tokens
    out[:, C["latency_s"]] = np.max([r[0] for r in replicas], axis=0)
    out[:, C["latency_p99_s"]] = np.max([r[1] for r in replicas], axis=0)
    out[:, C["throughput_tok_s"]] = throughput
    out[:, C["energy_j_per_token"]] = e_compute + e_dram + e_net + e_static
    out[:, C["energy_compute_j_per_token"]] = e_compute
    out[:, C["energy_dram_j_per_token"]] = e_dram
    out[:, C["energy_network_j_per_token"]] = e_net
    out[:, C["energy_static_j_per_token"]] = e_static
    for name in ("area_mm2", "package_area_mm2", "cost_usd", "peak_power_w"):
        out[:, C[name]] = layout.packages * first[:, C[name]]
    out[:, C["max_die_mm2"]] = first[:, C["max_die_mm2"]]
    out[:, C["capacity_short_bytes"]] = in_order(f["short"])
    out[:, C["unplaced_experts"]] = in_order(f["unplaced"])
    out[:, C["units_without_memory"]] = in_order(f["no_memory"])
    out[:, C["dram_bytes"]] = in_order(f["dram"])
    out[:, C["net_byte_hops"]] = in_order(f["hops"]) + sum(s.byte_hops for s in traffic.stages[0])
    out[:, C["mc_retained_frac"]] = np.nan
    out[:, C["mc_survival_frac"]] = np.nan
    out[:, C["packages"]] = layout.packages
    out[:, C["nodes"]] = layout.nodes(packages_per_node)
    out[:, C["comm_fabric_s"]] = sum(s.fabric_s for s in traffic.stages[0])
    out[:, C["comm_network_s"]] = sum(s.network_s for s in traffic.stages[0])
    return out
