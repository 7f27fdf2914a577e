"""Accumulates operator rows (as column arrays) and placement units for one workload.

Rows are appended in chunks of NumPy columns, so a block of hundreds of routed experts is one call
(the per-layer DeepSeek-V3 graph has ~15k expert units). A unit may be split into ``shards``
tensor-parallel pieces (``name.tp0`` ...): its operator rows are given per shard and repeated for each.
"""
from __future__ import annotations

from typing import NamedTuple

import networkx as nx
import numpy as np
import pandas as pd

from .workload import OP_COLUMNS

#: L2 traffic of one scalar atomic add: the 32-byte sector holding it read and written back (the L2 performs
#: global atomics on sectors, 32 B: NVIDIA CUDA C++ Best Practices Guide, "Coalesced access to global memory";
#: Nsight Compute's memory tables count atomic and reduction requests by L2 sector)
ATOMIC_SECTOR_BYTES = 2 * 32.0
_NUMERIC = [c for c in OP_COLUMNS if c not in ("unit", "name", "engine")]
_FLOATS = frozenset(_NUMERIC)                   # the columns `Builder._add` makes by `_column`


class _Filled(NamedTuple):
    """A chunk's column of ``n`` rows holding one number: made into rows by `_joined` with the other chunks'
    (one ``np.repeat`` for all of them, not an array per chunk: DeepSeek-V3 per layer has ~25,000)."""

    value: np.float64
    n: int


def _column(value, n: int):
    """``value`` (a number, or one per row) as a column of ``n`` float rows: a number as `_Filled`, an array
    broadcast."""
    a = np.asarray(value, dtype=float)
    return _Filled(a[()], n) if a.ndim == 0 else np.broadcast_to(a, (n,))


def _rows(column) -> np.ndarray:
    """A chunk's column (`_column`) as its rows."""
    return np.full(column.n, column.value) if isinstance(column, _Filled) else column


def _joined(parts: list) -> np.ndarray:
    """The chunks' columns (`_column`: arrays and `_Filled`) one after another as float rows: the numbers
    repeated at once, the arrays written in their places (the same values as concatenating every chunk's
    rows)."""
    if not any(isinstance(part, _Filled) for part in parts):
        return np.concatenate(parts) if parts else np.zeros(0)
    lengths = [part.n if isinstance(part, _Filled) else len(part) for part in parts]
    out = np.repeat(np.array([part.value if isinstance(part, _Filled) else 0.0 for part in parts], float), lengths)
    start = 0
    for part, n in zip(parts, lengths):
        if not isinstance(part, _Filled):
            out[start:start + n] = part
        start += n
    return out


class Builder:
    """Operator rows and unit graph of one workload; ``wbytes`` / ``abytes`` bytes per weight / activation."""

    def __init__(self, wbytes: float, abytes: float, shards: int = 1):
        self.wbytes, self.abytes, self.shards = wbytes, abytes, shards
        self.chunks: list[dict] = []
        self.graph = nx.DiGraph()
        self.logical: dict[str, list[str]] = {}       # logical unit -> its shard names
        self.logical_params: dict[str, float] = {}    # logical unit -> parameters of all its layers

    # ---- units ---------------------------------------------------------------------------------
    def names(self, unit: str, sharded: bool) -> list[str]:
        if sharded and self.shards > 1:
            return [f"{unit}.tp{i}" for i in range(self.shards)]
        return [unit]

    def unit(self, unit: str, kind: str, stage: int, layers: int, sharded: bool = False, expert: int = -1,
             kv_bytes_per_token: float = 0.0, prob: float = 1.0, selection_prob: float = 1.0,
             tokens: float = 0.0) -> list[str]:
        """Add a unit (or its shards); parameters are filled in from its operators by `finish_params`."""
        names = self.names(unit, sharded)
        for name in names:
            self.graph.add_node(name, kind=kind, stage=stage, layers=layers, expert=expert, params=0.0,
                                weight_bytes=0.0, kv_bytes_per_token=kv_bytes_per_token, prob=prob,
                                selection_prob=selection_prob, tokens=tokens, logical=unit, shards=len(names))
        self.logical[unit] = names
        self.logical_params.setdefault(unit, 0.0)
        return names

    def expert_units(self, names: list[str], kind: str, stage: int, layers: int, experts: np.ndarray,
                     prob: np.ndarray, selection_prob: np.ndarray, tokens: np.ndarray, params_each: float,
                     shards: int = 1):
        """Many units at once (routed experts of one layer group), each whole or in ``shards`` pieces
        (``name.tp0`` ...) holding 1/shards of its weights."""
        pieces = (lambda n: [n]) if shards == 1 else (lambda n: [f"{n}.tp{i}" for i in range(shards)])
        self.graph.add_nodes_from(
            (piece, dict(kind=kind, stage=stage, layers=layers, expert=int(e), params=params_each * layers / shards,
                         weight_bytes=params_each * layers * self.wbytes / shards, kv_bytes_per_token=0.0,
                         prob=float(p), selection_prob=float(q), tokens=float(t), logical=n, shards=shards))
            for n, e, p, q, t in zip(names, experts, prob, selection_prob, tokens) for piece in pieces(n))
        for n in names:
            self.logical[n] = pieces(n)
            self.logical_params[n] = params_each * layers

    def add_params(self, unit: str, params_per_layer: float, split: bool):
        """Parameters stored by a logical unit besides its operators' weights (e.g. the embedding table)."""
        names = self.logical[unit]
        per_shard = params_per_layer / len(names) if split else params_per_layer
        for n in names:
            layers = self.graph.nodes[n]["layers"]
            self.graph.nodes[n]["params"] += per_shard * layers
            self.graph.nodes[n]["weight_bytes"] += per_shard * layers * self.wbytes
        self.logical_params[unit] += params_per_layer * self.graph.nodes[names[0]]["layers"]

    # ---- operators -----------------------------------------------------------------------------
    def _add(self, units, name, engine, layers, split_weights, count_params, **cols):
        units = list(units) if isinstance(units, (list, tuple, np.ndarray)) else [units]
        n = len(units)
        row = {k: _column(v, n) for k, v in cols.items()}
        row["layers"] = _column(layers, n)
        row["unit"] = np.array(units, dtype=object)
        row["name"] = np.full(n, name, dtype=object)
        row["engine"] = np.full(n, engine, dtype=object)
        self.chunks.append(row)
        # stored parameters: weights an operator reads are parameters of its unit (all layers)
        welems = _rows(row["weight_bytes"]) / self.wbytes if count_params else None
        if count_params and welems.any():
            for u, w in zip(units, welems):
                node = self.graph.nodes[u]
                node["params"] += w * node["layers"]
                node["weight_bytes"] += w * node["layers"] * self.wbytes
                logical = node["logical"]
                shards = node["shards"]
                # a split weight is 1/shards of the logical one; a replicated one is one copy
                share = w * node["layers"] * (shards if split_weights else 1) / shards
                self.logical_params[logical] += share

    def gemm(self, unit, name, M, K, N, layers, batch=1.0, weights=True, bias=False, prob=1.0, tokens=None,
             kv_read=0.0, kv_write=0.0, useful=1.0, split=True, params=True, per_instance_weights=False,
             a_on_chip=False, out_on_chip=False):
        """A GEMM (M x K) @ (K x N) x batch; ``weights``: the K x N operand is a parameter matrix.

        ``useful`` scales FLOPs, not the shape (causal attention: the array runs the full tiles, the
        useful work is the unmasked part). ``split``: the weights are split across TP shards;
        ``params``: the weights it reads are parameters its unit stores (False: counted elsewhere);
        ``per_instance_weights``: each of the ``batch`` instances has its own K x N matrix (MLA's
        per-head absorbed projections) rather than sharing one. ``a_on_chip`` / ``out_on_chip``: the
        M x K operand / the output never leaves the kernel (fused attention's probabilities and scores).
        """
        M, K, N, batch = (np.asarray(x, dtype=float) for x in (M, K, N, batch))
        wb = (K * N + (N if bias else 0)) * self.wbytes if weights else 0.0
        if weights and per_instance_weights:
            wb = wb * batch
        act_in = (0.0 if a_on_chip else M * K * batch * self.abytes) + \
            (0.0 if weights or kv_read else K * N * batch * self.abytes)
        self._add(unit, name, "matrix", layers, split, params, M=M, N=N, K=K, batch=batch, elements=0.0,
                  flops=2.0 * M * N * K * batch * useful, weight_bytes=wb, act_in_bytes=act_in,
                  act_out_bytes=0.0 if out_on_chip else M * N * batch * self.abytes, kv_read_bytes=kv_read,
                  kv_write_bytes=kv_write, prob=prob, tokens=M if tokens is None else tokens, atomic_bytes=0.0)

    def vector(self, unit, name, elements, flops_per_element, layers, weight_elements=0.0, prob=1.0,
               tokens=0.0, reads_per_element=1.0, split=False, params=True, on_chip=False, out_elements=None,
               atomics=0.0):
        """An elementwise operator over ``elements``; ``on_chip``: its input and output never leave the
        kernel (fused attention's softmax); ``out_elements``: elements it writes when not ``elements`` (a
        reduction, a broadcast copy); ``atomics``: scalar atomic adds it issues, each serviced at the L2
        as one 32-byte sector read and written (``atomic_bytes`` = 64 B each, arch.costing)."""
        elements = np.asarray(elements, dtype=float)
        moved = 0.0 if on_chip else 1.0
        self._add(unit, name, "vector", layers, split, params, M=0.0, N=0.0, K=0.0, batch=1.0, elements=elements,
                  flops=elements * flops_per_element, weight_bytes=np.asarray(weight_elements) * self.wbytes,
                  act_in_bytes=moved * elements * reads_per_element * self.abytes,
                  act_out_bytes=moved * (elements if out_elements is None else np.asarray(out_elements, float))
                  * self.abytes, kv_read_bytes=0.0, kv_write_bytes=0.0, prob=prob,
                  tokens=tokens, atomic_bytes=np.asarray(atomics, dtype=float) * ATOMIC_SECTOR_BYTES)

    def ops(self) -> pd.DataFrame:
        if not self.chunks:
            return pd.DataFrame(columns=OP_COLUMNS)
        data = {c: _joined([ch[c] for ch in self.chunks]) if c in _FLOATS else
                np.concatenate([ch[c] for ch in self.chunks]) for c in OP_COLUMNS}
        df = pd.DataFrame(data, columns=OP_COLUMNS)
        df[_NUMERIC] = df[_NUMERIC].astype(float)
        return df

    # ---- hand-offs -----------------------------------------------------------------------------
    def connect(self, src: str, dst: str, payload_bytes: float, repeat: int):
        """Edges carrying ``payload_bytes`` (the full activation) from logical ``src`` to logical ``dst``.

        Shards of ``src`` hold partial sums: into an unsharded unit each sends its partial (the reduce
        happens at the destination); into shards of the same degree t the hand-off is a reduce-scatter
        plus all-gather, 2 X / t between every pair (a ring all-reduce's volume when shard i of both
        stages share a chiplet). An unsharded source sends the whole payload to every shard.
        """
        self.connect_many([(src, dst, payload_bytes)], repeat)

    def connect_many(self, links: list[tuple[str, str, float]], repeat: int):
        """`connect` for many (src, dst, payload_bytes) links at once."""
        edges = []
        for src, dst, payload_bytes in links:
            a, b = self.logical[src], self.logical[dst]
            share = 2.0 * payload_bytes / len(b) if len(a) > 1 and len(b) > 1 else payload_bytes
            attrs = {"bytes": float(share), "repeat": int(repeat)}
            edges.extend((u, v, attrs) for u in a for v in b)
        self.graph.add_edges_from(edges)
