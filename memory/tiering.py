"""Hot/cold tiering of experts between a chiplet's HBM and the package's shared DDR.

Per step of decode, each of T tokens selects expert j with probability q_j (independently), so the
expert's weights w_j are read if any token selects it: expected bytes read per step

    r_j = w_j (1 - (1 - q_j)^T)                                        (`selection_read_bytes`)

Hot experts (highest r_j / w_j) live in HBM, the rest in DDR: `memory.placement.place_by_density`
gives the fractions (optimal for DDR traffic, see there). The cold bytes C = sum_j r_j x cold_j are then
either

* read directly from DDR while computing (`direct_cost`): time C / B_ddr (+ hot bytes H / B_hbm, summed,
  or the larger of the two when HBM and DDR reads overlap), energy C e_ddr + H e_hbm; or
* fetched on demand into an HBM staging buffer and read from there (`on_demand_cost`), with a predictor
  that prefetches the experts of the next layer in the shadow of the current one (Pre-gated MoE, Hwang
  et al., ISCA'24; MoE-Infinity, Xue et al., 2024). With prediction accuracy a and a per-step window
  ``hide_s`` of other work to hide behind, the prefetch moves C bytes (the predicted set, a fraction a
  of it right), the mispredicted (1 - a) C are fetched again on demand, and compute reads all C from HBM:

      time   = max(0, C / B_ddr - hide_s) + (1 - a) C / B_ddr + (C + H) / B_hbm
      energy = (2 - a) C (e_ddr + e_hbm) + (C + H) e_hbm           (an HBM write costs as a read)
      staging HBM = 2 C / windows   (double-buffered, one fetch window = one layer instance)

All inputs are expected bytes per step; bandwidths are sustained (`memory.effective_bandwidth_Bps`).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .placement import place_by_density


@nb.njit(cache=True)
def selection_read_bytes(weight_bytes: np.ndarray, selection_prob: np.ndarray, tokens: float) -> np.ndarray:
    """Expected weight bytes read per step: ``w (1 - (1 - q)^tokens)`` for each expert."""
    out = np.empty(weight_bytes.shape[0])
    for j in range(weight_bytes.shape[0]):
        q = min(max(selection_prob[j], 0.0), 1.0)
        out[j] = weight_bytes[j] * (1.0 - (1.0 - q) ** tokens)
    return out


@nb.njit(cache=True)
def direct_cost(hot_bytes: float, cold_bytes: float, hbm_bw_Bps: float, ddr_bw_Bps: float, hbm_e_j_per_byte: float,
                ddr_e_j_per_byte: float, overlap: bool):
    """(time_s, energy_j) of reading hot bytes from HBM and cold bytes straight from DDR."""
    t_hbm = hot_bytes / hbm_bw_Bps if hot_bytes > 0.0 else 0.0
    t_ddr = cold_bytes / ddr_bw_Bps if cold_bytes > 0.0 else 0.0
    time = max(t_hbm, t_ddr) if overlap else t_hbm + t_ddr
    return time, hot_bytes * hbm_e_j_per_byte + cold_bytes * ddr_e_j_per_byte


@nb.njit(cache=True)
def on_demand_cost(hot_bytes: float, cold_bytes: float, hbm_bw_Bps: float, ddr_bw_Bps: float,
                   hbm_e_j_per_byte: float, ddr_e_j_per_byte: float, hide_s: float, accuracy: float,
                   windows: float):
    """(time_s, energy_j, staging_bytes) of prefetching cold bytes into HBM and computing from there."""
    fetch = cold_bytes / ddr_bw_Bps if cold_bytes > 0.0 else 0.0
    exposed = max(fetch - hide_s, 0.0) + (1.0 - accuracy) * fetch
    time = exposed + (cold_bytes + hot_bytes) / hbm_bw_Bps
    energy = (2.0 - accuracy) * cold_bytes * (ddr_e_j_per_byte + hbm_e_j_per_byte) \
        + (cold_bytes + hot_bytes) * hbm_e_j_per_byte
    return time, energy, 2.0 * cold_bytes / max(windows, 1.0)


@nb.njit(cache=True)
def tiered_chiplets(seg_start: np.ndarray, size: np.ndarray, read: np.ndarray, hbm_capacity: np.ndarray,
                    hbm_bw_Bps: np.ndarray, ddr_bw_Bps: float, hbm_e_j_per_byte: float, ddr_e_j_per_byte: float,
                    hide_s: np.ndarray, accuracy: float, windows: float, overlap: bool) -> np.ndarray:
    """Hot-first placement and its expected cost for S chiplets (items ``seg_start[s]:seg_start[s+1]``).

    Returns out[S, 7]: hot bytes read, cold bytes read, overflow bytes stored in DDR, direct time_s,
    direct energy_j, on-demand time_s, on-demand energy_j (per step). The on-demand staging buffer is
    taken from the HBM first: its capacity for resident items is ``hbm_capacity - staging``, where the
    staging need is that of the direct placement (one fixed-point step).
    """
    S = seg_start.shape[0] - 1
    out = np.zeros((S, 7))
    cap = np.empty(1)
    for s in range(S):
        a, b = seg_start[s], seg_start[s + 1]
        if b == a:
            continue
        cap[0] = hbm_capacity[s]
        frac = place_by_density(size[a:b], read[a:b], cap)
        hot = 0.0
        cold = 0.0
        spill = 0.0
        for j in range(b - a):
            hot += read[a + j] * frac[j, 0]
            cold += read[a + j] * frac[j, 1]
            spill += size[a + j] * frac[j, 1]
        out[s, 0] = hot
        out[s, 1] = cold
        out[s, 2] = spill
        out[s, 3], out[s, 4] = direct_cost(hot, cold, hbm_bw_Bps[s], ddr_bw_Bps, hbm_e_j_per_byte,
                                           ddr_e_j_per_byte, overlap)
        staging = 2.0 * cold / max(windows, 1.0)
        cap[0] = max(hbm_capacity[s] - staging, 0.0)
        frac = place_by_density(size[a:b], read[a:b], cap)
        hot_f = 0.0
        cold_f = 0.0
        for j in range(b - a):
            hot_f += read[a + j] * frac[j, 0]
            cold_f += read[a + j] * frac[j, 1]
        t, e, _ = on_demand_cost(hot_f, cold_f, hbm_bw_Bps[s], ddr_bw_Bps, hbm_e_j_per_byte, ddr_e_j_per_byte,
                                 hide_s[s], accuracy, windows)
        out[s, 5] = t
        out[s, 6] = e
    return out
