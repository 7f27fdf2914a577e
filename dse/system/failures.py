"""Fault tolerance of a system over single package failures (the model is in dse.system.evaluator).

A failed package's replica re-maps onto its survivors as a failed chiplet's units do: with E > 1 expert
ranks the failed rank's experts and sequences spread over the E - 1 others of its pipeline stage (the
stage evaluated as a split over E - 1 ranks; its all-to-alls among E - 1); with E = 1 the replica
re-splits its layers over P - 1 stages; a replica of one package is lost. The replica keeps
``min(1, throughput after / before)``, nothing when its packages' memory falls shorter than before.
Failures of the packages of one stage are alike (the survivors re-balance whichever rank failed), so
one evaluation per stage (E > 1) or per replica (E = 1) covers them all.
"""
from __future__ import annotations

import numpy as np

from .compose import in_order, replica_rates, stage_figures
from .layout import Layout
from .packages import StagePackages
from .traffic import LayoutTraffic


def replica_kept(ev, layout: Layout, stage: StagePackages, f: dict, rows: np.ndarray, run) -> list[np.ndarray]:
    """Throughput a replica keeps per failure class (every pipeline stage with E > 1, else one class), each
    an array over the designs ``rows``; ``run(share, rows)`` evaluates a package share (see evaluator)."""
    if layout.per_replica == 1:
        return [np.zeros(len(rows))]
    one = Layout(layout.pipeline, layout.experts, 1)
    tokens = float(ev.tables.tokens_per_step)
    before = replica_rates(ev.traffic(one), f["lat"], f["p99"], tokens, ev.bank.in_flight(one.pipeline))[0][2]
    short = in_order(f["short"])
    if layout.experts == 1:
        smaller = Layout(layout.pipeline - 1, 1, 1)
        st = ev.bank.get(smaller.pipeline, 1)
        g = stage_figures([[run(share, rows) for share in row] for row in st.shares], st.rank_tokens)
        cases = [(g, ev.traffic(smaller), smaller)]
    else:
        st = ev.bank.get(layout.pipeline, layout.experts - 1)
        fewer = Layout(layout.pipeline, layout.experts - 1, 1)
        cases = []
        for p in range(layout.pipeline):
            spread = stage_figures([[run(share, rows) for share in st.shares[p]]], st.rank_tokens)
            g = {key: value.copy() for key, value in f.items()}
            for key in ("lat", "p99", "short"):
                g[key][p] = spread[key][0]
            stages = list(ev.traffic(one).stages[0])
            stages[p] = ev.traffic(fewer).stages[0][p]
            cases.append((g, LayoutTraffic(stages=[stages]), one))
    out = []
    for g, traffic, replica in cases:
        throughput = replica_rates(traffic, g["lat"], g["p99"], tokens, ev.bank.in_flight(replica.pipeline))[0][2]
        with np.errstate(divide="ignore", invalid="ignore"):
            kept = np.minimum(throughput / before, 1.0)
        lost = (in_order(g["short"]) > short) | ~np.isfinite(kept) | ~(throughput > 0)
        out.append(np.where(lost, 0.0, kept))
    return out


def fault_columns(kept_replica: list[np.ndarray], replicas: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fault_tolerance_frac, worst_retained_frac, all_served_frac): the system's throughput kept, averaged
    over the failure classes (each holds as many packages), its least, and the share of failures after
    which the replica still serves every unit."""
    kept = np.array([(replicas - 1) / replicas + k / replicas for k in kept_replica])
    served = in_order([(k > 0).astype(float) for k in kept_replica])
    return in_order(kept) / len(kept), kept.min(axis=0), served / len(kept)
