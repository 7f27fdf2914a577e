"""Issue 52, eleventh round: the experts' section's kind figures and per-kind counts on arrays
(dse.results.expert_kinds) give what the per-pair lookups and the per-row kind sets gave."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dse.results.expert_kinds import _FirstRows, _kind_figures, section_lines

KINDS = ["h100-like", "groq-lpu-like", "tpu-v6e-like"]


def _table(rng, n_units: int) -> pd.DataFrame:
    """An attribute table like characterize's: rows per (unit, kind), some pairs twice (two precisions),
    some missing, shuffled; figures random."""
    rows = []
    for u in range(n_units):
        for k in KINDS:
            for _ in range(int(rng.integers(1, 3))):
                rows.append((f"L{u // 8}.e{u % 8}", k))
    rng.shuffle(rows)
    df = pd.DataFrame(rows, columns=["unit", "chiplet"])
    df["peak_flops"] = rng.uniform(1e14, 1e15, len(df))
    df["bandwidth_Bps"] = rng.uniform(1e11, 1e13, len(df))
    return df


def _old_figures(table, at, experts, kinds, bandwidth):
    """The figures as they were read: a (unit, kind) pair per expert and kind, the whole rows taken."""
    figures = []
    for k in kinds:
        of_k = table.iloc[at([(u, k) for u in experts])]
        figures.append((k, float(of_k["peak_flops"].iloc[0]), bandwidth.get(k, float(of_k["bandwidth_Bps"].median()))))
    return figures


@pytest.mark.parametrize("seed", range(6))
def test_kind_figures_match_the_per_pair_lookup(seed):
    rng = np.random.default_rng(seed)
    table = _table(rng, int(rng.integers(3, 60)))
    at = _FirstRows(table)
    units = list(dict.fromkeys(table["unit"]))
    experts = [units[i] for i in rng.permutation(len(units))[: int(rng.integers(1, len(units) + 1))]]
    bandwidth = {KINDS[0]: 2e12} if seed % 2 else {}
    assert _kind_figures(table, at, experts, KINDS, bandwidth) == _old_figures(table, at, experts, KINDS, bandwidth)


def test_kind_figures_name_a_missing_pair():
    rng = np.random.default_rng(7)
    table = _table(rng, 5)
    table = table[~((table["unit"] == "L0.e3") & (table["chiplet"] == KINDS[1]))].reset_index(drop=True)
    at = _FirstRows(table)
    with pytest.raises(KeyError, match="L0.e3"):
        _kind_figures(table, at, ["L0.e1", "L0.e3"], KINDS, {})
    with pytest.raises(KeyError):
        _kind_figures(table, at, ["L0.e1", "nope"], KINDS, {})


def _old_kind_rows(df, figures):
    """The kinds' table rows as `section_lines` wrote them: a set of kinds per expert row."""
    df = df.sort_values("visit", ascending=False, kind="stable")
    on_sets = [set(on.split(", ")) for on in df["on"]]
    lines = []
    for k, peak, bw in figures:
        here_k = df[[k in names_on for names_on in on_sets]]
        mean = f"{here_k['visit'].mean():.3f}" if len(here_k) else "-"
        lines.append(f"| {k} | {peak / 1e12:,.0f} | {bw / 1e12:,.2f} | {peak / bw:,.0f} | {len(here_k)} | {mean} |")
    return lines


@pytest.mark.parametrize("seed", range(6))
def test_section_lines_count_each_kind_as_the_per_row_sets(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    choices = ["h100-like", "groq-lpu-like", "h100-like, groq-lpu-like", "groq-lpu-like, tpu-v6e-like"]
    df = pd.DataFrame({"expert": [f"e{i}" for i in range(n)], "on": [choices[i] for i in rng.integers(0, 4, n)],
                       "visit": rng.uniform(0, 1, n).round(2), "MB": rng.uniform(1, 100, n),
                       "FLOP/B": rng.uniform(1, 100, n), "bound": "memory", "fastest alone": "h100-like"})
    figures = [(k, float(rng.uniform(1e14, 1e15)), float(rng.uniform(1e11, 1e13))) for k in KINDS]
    lines = section_lines("d0", "hand-made", "", df, figures)
    assert lines[-1 - len(KINDS):-1] == _old_kind_rows(df, figures)
