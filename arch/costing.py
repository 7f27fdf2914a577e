"""Time, energy and off-chip traffic of every operator of a workload on every chiplet of a library.

The table does not depend on where operators are mapped, so a study computes it once and a design's
evaluation becomes lookups. Per operator row and chiplet:

* ``time_s``: matrix operators take ``batch x gemm_cycles / f`` on the array (arch.systolic);
  vector operators take ``max(flops, elements) / (lanes x f)`` on the elementwise unit.
* ``energy_j``: MACs x MAC energy (node, precision) + bytes through SRAM x SRAM energy per byte;
  vector FLOPs cost half a BF16 MAC each.
* ``dram_bytes``: weights, KV-cache reads and writes always come from the memory behind the chiplet;
  activations do too when input plus output exceed the chiplet's SRAM (they spill).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .chiplet import Chiplet
from .systolic import DATAFLOW_CODE, cycles_table
from .technology import node as tech_node


@dataclass
class CostTable:
    """Per (operator, chiplet) figures, each of shape (n_ops, n_chiplets)."""

    time_s: np.ndarray
    energy_j: np.ndarray
    dram_bytes: np.ndarray


def op_costs(ops: pd.DataFrame, chiplets: list[Chiplet], precision: str = "bf16") -> CostTable:
    """Cost of every operator row of ``ops`` (workloads OP_COLUMNS) on every chiplet."""
    n, c = len(ops), len(chiplets)
    is_matrix = (ops["engine"].to_numpy() == "matrix")
    M, N, K = (ops[k].to_numpy(float) for k in ("M", "N", "K"))
    batch = ops["batch"].to_numpy(float)
    flops = ops["flops"].to_numpy(float)
    elements = ops["elements"].to_numpy(float)
    weights = ops["weight_bytes"].to_numpy(float)
    act = ops["act_in_bytes"].to_numpy(float) + ops["act_out_bytes"].to_numpy(float)
    kv = ops["kv_read_bytes"].to_numpy(float) + ops["kv_write_bytes"].to_numpy(float)

    rows = np.array([ch.rows for ch in chiplets])
    cols = np.array([ch.cols for ch in chiplets])
    flows = np.array([DATAFLOW_CODE[ch.dataflow] for ch in chiplets])
    freq = np.array([ch.freq_hz for ch in chiplets])
    lanes = np.array([ch.lanes for ch in chiplets], dtype=float)
    sram = np.array([ch.sram_bytes for ch in chiplets])
    nodes = [tech_node(ch.node) for ch in chiplets]
    mac_pj = np.array([nd.mac_energy_pj[precision] for nd in nodes])
    flop_pj = np.array([nd.mac_energy_pj["bf16"] / 2 for nd in nodes])
    sram_pj = np.array([nd.sram_read_pj_per_byte for nd in nodes])

    cycles = np.zeros((n, c))
    if is_matrix.any():
        cycles[is_matrix] = cycles_table(M[is_matrix], N[is_matrix], K[is_matrix], rows, cols, flows) \
            * batch[is_matrix, None]
    vec_cycles = np.maximum(flops, elements)[:, None] / lanes[None, :]
    cycles = np.where(is_matrix[:, None], cycles, vec_cycles)
    time_s = cycles / freq[None, :]

    macs = np.where(is_matrix, M * N * K * batch, 0.0)
    sram_bytes = weights + act + kv
    energy_pj = (macs[:, None] * mac_pj[None, :]
                 + np.where(is_matrix, 0.0, flops)[:, None] * flop_pj[None, :]
                 + sram_bytes[:, None] * sram_pj[None, :])
    spill = np.where(act[:, None] > sram[None, :], act[:, None], 0.0)
    dram = weights[:, None] + kv[:, None] + spill
    return CostTable(time_s=time_s, energy_j=energy_pj * 1e-12, dram_bytes=dram)
