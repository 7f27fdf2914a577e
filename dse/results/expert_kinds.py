"""The report's section on where a design's experts land, and why (issue 55: which accelerator kinds suit
which experts).

For each routed expert of the balanced design: the chiplet kind(s) its copies sit on, and the three figures
that decide it (dse.model.characterize, each unit alone on each kind): its **visit rate** (the probability
a step runs it), its **bytes** (weights and KV cache it must hold) and its **arithmetic intensity** (FLOPs
per byte it reads from memory per step, on the kind it landed on). Beside them, per kind of the library: its
peak FLOP/s, the bandwidth its slot in the design reads at (its HBM stacks', an SRAM-resident kind's SRAM,
or DDR; a kind the design does not use: dse.model.characterize's) and its ridge point, peak / bandwidth
(Williams, Waterman & Patterson, CACM 2009): an expert whose intensity is below a kind's ridge is
memory-bound there, so low-intensity experts gain most from a kind with bandwidth to spare (an
SRAM-resident one, if they fit its SRAM), and high-intensity ones from peak FLOP/s. Shown only for a
package study (no ``system`` section) with routed experts and more than one chiplet kind.

A training study (``workload.phase: train``) holds more per expert than its weights: its gradients and
optimizer state, the training stack's bytes per parameter at the end of the backward pass under the study's
ZeRO stage (dse.training.memory.state_bytes_per_param; one package, so no data-parallel ranks share them):
the bytes column counts them, and the intensity is the forward pass's (backward runs at about the same).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from arch.technology import precision_bytes

from ..model.characterize import characterize
from ..model.tables import UNIT_KINDS

#: about the most experts the section lists: each kind's most visited, an equal share each
MAX_ROWS = 24


def expert_kind_lines(result, prepared, design_id: str, why: str, breakdowns=None) -> list[str]:
    """The section's markdown lines for design ``design_id`` (module docstring); [] where it does not apply.
    ``breakdowns``: the report's (dse.results.breakdowns), whose attribute table the roofline shares.

    Each expert's row is read from the attribute table by position, on arrays: DeepSeek-V3 per layer has
    about 15,000 experts, and a lookup per expert in a table indexed by (unit, kind) took seconds."""
    if prepared.study.system is not None:       # a system's packages hold slices of the model: not shown
        return []
    design = result.designs[design_id]
    p = prepared.for_design(design)
    kinds = [c.name for c in p.study.hardware.library()]
    units = list(p.tables.unit_names)
    expert = UNIT_KINDS.index("expert")
    experts = [u for u, k in zip(units, p.tables.unit_kind) if k == expert] if len(kinds) > 1 else []
    if not experts:
        return []
    table = breakdowns.attributes(p) if breakdowns is not None else characterize(p)
    at = _FirstRows(table)
    held, held_note = _held_per_weight_byte(p.study)
    names, on_names, first = [], [], []
    for unit in experts:
        on = list(dict.fromkeys(design.chiplets[i] for i in design.placement.get(unit, [])))
        if not on:
            continue
        names.append(unit)
        on_names.append(", ".join(on))
        first.append((unit, on[0]))
    first = at(first)
    if not names:
        return []
    here = table.iloc[first]
    weight, kv = here["weight_bytes"].to_numpy(), here["kv_bytes"].to_numpy()
    flops, dram = here["flops"].to_numpy(), here["dram_bytes"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(dram > 0, flops / np.where(dram > 0, dram, 1), np.inf)
    df = pd.DataFrame({"expert": names, "on": on_names, "visit": here["visit_prob"].to_numpy(float),
                       "MB": (weight * held + kv).astype(float) / 1e6, "FLOP/B": intensity.astype(float),
                       "bound": here["bound"].to_numpy(), "fastest alone": here["best_by_latency"].to_numpy()})
    bandwidth = _slot_bandwidth(p, design)
    return section_lines(design_id, why, held_note, df, _kind_figures(table, at, experts, kinds, bandwidth))


def _kind_figures(table: pd.DataFrame, at: _FirstRows, experts: list[str], kinds: list[str],
                  bandwidth: dict[str, float]) -> list[tuple[str, float, float]]:
    """Each kind's (name, peak FLOP/s, bandwidth B/s): its peak from the attribute table ``table``'s row of the
    first expert on it, its bandwidth the design's slot's (``bandwidth``) or else the median over every expert's
    row on it. Only the two columns are gathered, and each expert's rows found by its code (``at.unit_rows``):
    a (unit, kind) pair per expert and kind and the whole table's rows took 0.1 CPU-s for DeepSeek-V3 per layer."""
    codes = at.unit_codes(experts)
    peak, band = table["peak_flops"], table["bandwidth_Bps"]
    figures = []
    for k in kinds:
        rows = at.unit_rows(codes, k)
        figures.append((k, float(peak.iloc[int(rows[0])]),
                        bandwidth.get(k, float(band.iloc[rows].median()))))
    return figures


class _FirstRows:
    """Each (unit, chiplet) pair's first row of the attribute table ``table`` (a unit has one row per
    precision it may take), a `KeyError` for a pair it lacks. The table's pairs are coded on arrays
    (``pd.factorize`` of each column, the first row of each code by one reversed assignment): DeepSeek-V3
    per layer has about 60,000 rows."""

    def __init__(self, table: pd.DataFrame):
        unit_code, self.units = pd.factorize(table["unit"])
        kind_code, kinds = pd.factorize(table["chiplet"])
        self.n_kinds = max(len(kinds), 1)
        row = np.flatnonzero((unit_code >= 0) & (kind_code >= 0))     # rows naming both
        keys = unit_code[row].astype(np.int64) * self.n_kinds + kind_code[row]
        self.first = np.full(len(self.units) * self.n_kinds, -1, np.int64)
        self.first[keys[::-1]] = row[::-1]
        self.first_list = self.first.tolist()
        self.unit_at = {u: i for i, u in enumerate(self.units.tolist())}
        self.kind_at = {k: i for i, k in enumerate(kinds.tolist())}

    def __call__(self, pairs: list[tuple[str, str]]) -> list[int]:
        """The first row of each (unit, chiplet) pair."""
        unit_at, kind_at, first, n_kinds = self.unit_at, self.kind_at, self.first_list, self.n_kinds
        out = [first[unit_at[u] * n_kinds + kind_at[k]] if u in unit_at and k in kind_at else -1
               for u, k in pairs]
        if -1 in out:
            raise KeyError(pairs[out.index(-1)])
        return out

    def unit_codes(self, names: list[str]) -> np.ndarray:
        """Each unit's code (a `KeyError` for a unit the table lacks)."""
        return np.array([self.unit_at[u] for u in names], np.int64)

    def unit_rows(self, codes: np.ndarray, kind: str) -> np.ndarray:
        """The first rows of the pairs (unit, ``kind``) of the units coded ``codes`` (`unit_codes`), on arrays."""
        out = self.first[codes * self.n_kinds + self.kind_at[kind]]
        if (out < 0).any():
            raise KeyError((self.units[int(codes[np.argmax(out < 0)])], kind))
        return out


def section_lines(design_id: str, why: str, held_note: str, df: pd.DataFrame, figures: list[tuple]) -> list[str]:
    """The section's markdown from its experts' table ``df`` (columns expert, on: the kinds it sits on joined by
    ", ", visit, MB, FLOP/B, bound, fastest alone; one row per placed expert) and each kind's (name, peak FLOP/s,
    bandwidth B/s): every kind's most visited experts (`MAX_ROWS` in all), then the kinds' ridge points."""
    df = df.sort_values("visit", ascending=False, kind="stable")
    shown = df.groupby("on", sort=False).head(max(MAX_ROWS // df["on"].nunique(), 1))   # every kind's hottest
    lines = [f"## Where the experts land: `{design_id}` ({why})", "",
             "Each routed expert's kind in this design, with what decides it: how often a step visits it, the "
             "bytes it must hold and its FLOPs per byte read (on the kind it landed on). Below a kind's ridge "
             "point an expert is memory-bound there." + held_note, "",
             "| expert | on | visit rate | bytes [MB] | FLOP/B | bound there | fastest alone |",
             "|---|---|---|---|---|---|---|"]
    for r in shown.itertuples(index=False):
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:,.1f} | {r[4]:,.1f} | {r[5]} | {r[6]} |")
    if len(df) > len(shown):
        lines.append(f"| ({len(df) - len(shown)} less visited experts not shown) | | | | | | |")
    lines += ["", "| kind | peak [TFLOP/s] | bandwidth [TB/s] | ridge [FLOP/B] | experts here | mean visit rate |",
              "|---|---|---|---|---|---|"]
    on_codes, on_values = pd.factorize(df["on"])          # a few distinct kind lists among ~15,000 experts
    on_sets = [set(on.split(", ")) for on in on_values.tolist()]
    for k, peak, bw in figures:
        here_k = df[np.array([k in names_on for names_on in on_sets], bool)[on_codes]]
        mean = f"{here_k['visit'].mean():.3f}" if len(here_k) else "-"
        lines.append(f"| {k} | {peak / 1e12:,.0f} | {bw / 1e12:,.2f} | {peak / bw:,.0f} | {len(here_k)} | {mean} |")
    return lines + [""]


def _held_per_weight_byte(study) -> tuple[float, str]:
    """Bytes an expert holds per byte of its weights, and the sentence saying so: 1 when serving; in training,
    the stack's weights, gradients and optimizer state per parameter (module docstring) over its weights'."""
    if study.workload.phase != "train":
        return 1.0, ""
    from ..training.memory import state_bytes_per_param
    from ..training.package import STACK
    per_param = state_bytes_per_param(STACK, study.training.zero, 1)[1]
    weight = precision_bytes(study.workload.precision)
    return per_param / weight, (f" Training: the bytes count each expert's weights, gradients and optimizer "
                                f"state, {per_param:g} bytes a parameter (ZeRO-{study.training.zero}, one "
                                f"package), {per_param / weight:g} x its {weight:g}-byte weights.")


def _slot_bandwidth(p, design) -> dict[str, float]:
    """Kind -> the bandwidth its first slot in ``design`` reads its units at (dse.model.copy_cost.local_memory:
    its HBM stacks', else an SRAM-resident kind's SRAM, else the package's DDR), at the kind's
    ``mem_efficiency``; kinds the design does not use are left out (the caller takes characterize's)."""
    T = p.package_evaluator.kernel
    names = list(p.tables.kind_names)
    out: dict[str, float] = {}
    for slot, name in enumerate(design.chiplets):
        k = names.index(name)
        if name in out:
            continue
        stacks = design.hbm_stacks[slot]
        bw = stacks * T.hbm_bw if stacks > 0 else (T.kind_sram_bw[k] or design.ddr_channels * T.ddr_bw)
        out[name] = float(bw * T.kind_mem_eff[k])
    return out
