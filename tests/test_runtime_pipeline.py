"""The runtime as a pipeline of values (issue 48, docs/runtime.md): popularities are values, the one
reducer's windows and totals by hand, and the shape of dse/runtime (no identity-keyed caches, no
unwrapping, small modules)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dse.runtime.failures import Down
from dse.runtime.mapping import ExpertGroups, Relabel
from dse.runtime.move_price import MoveCost
from dse.runtime.popularity import Popularity
from dse.runtime.segments import SegmentTable
from dse.runtime.totals import Served, reduce_timeline

RUNTIME = Path(__file__).resolve().parents[1] / "dse" / "runtime"
UP = Down(frozenset(), frozenset(), ())


def test_a_popularity_is_a_value():
    """Two relabellings built apart are one key: what is remembered per popularity is found again."""
    a = Popularity([np.array([1, 0, 2]), np.array([0, 1])])
    b = Popularity([np.array([1, 0, 2]), np.array([0, 1])])
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Popularity([np.array([0, 1, 2]), np.array([0, 1])])
    groups = ExpertGroups(names=[["L.e0", "L.e1", "L.e2"], ["M.e0", "M.e1"]],
                          q=[np.array([0.5, 0.3, 0.2]), np.array([0.6, 0.4])], weight_bytes=[np.ones(3), np.ones(2)],
                          units=[np.arange(3), np.arange(3, 5)])
    assert groups.load(a) is groups.load(b)
    assert groups.load(a).tolist() == [0.3, 0.5, 0.2, 0.6, 0.4]
    relabel = Relabel(groups)
    assert relabel.dst(a) is relabel.dst(b)


def table(offered: float) -> SegmentTable:
    """Two windows of 60 s. Window 0: one segment of key 0 for 20 s, then key 1 for 40 s of which 10 s
    stall; window 1: key 0 for 30 s, then nothing survives (key 2) for 30 s; a move of 5 J in window 0."""
    move = MoveCost(1e9, 10.0, 5.0, 3)
    return SegmentTable(keys=["a", "b", "c"], mappings=[object(), object(), None], selected=np.array([1.0, 0.5, 0.0]),
                        window=np.array([0, 0, 1, 1]), length_s=np.array([20.0, 40.0, 30.0, 30.0]),
                        serve_s=np.array([20.0, 30.0, 30.0, 30.0]), offered_tps=np.full(4, offered),
                        key=np.array([0, 1, 0, 2]), down=np.zeros(4, np.int64), downs=[UP],
                        t_s=np.array([0.0, 60.0]), window_s=np.array([60.0, 60.0]),
                        moves=[move, MoveCost(0.0, 0.0, 0.0, 0)], move_bytes=np.array([1e9, 0.0]),
                        move_energy_j=np.array([5.0, 0.0]), imbalance=np.array([1.5, 1.2]))


def test_one_reducer_by_hand():
    """Key 0 serves 100 tokens/s at 1 s latency (p99 2 s), 0.1 J/token; key 1 50 tokens/s at 2 s (p99
    3 s), 0.2 J/token. Saturating: window 0 serves 20 x 100 + 30 x 50 x 0.5 = 2,750 tokens of 20 x 100 +
    40 x 50 = 4,000 it could take; window 1 30 x 100 = 3,000 of 3,000 (nothing is offered to the dead
    segment). Energy 2,000 x 0.1 + 750 x 0.2 + 3,000 x 0.1 + 5 = 655 J. Offered 60 tokens/s: window 0
    serves min(2,000, 1,200) + min(750, 2,400) = 1,950 of 3,600, window 1 1,800 of 3,600."""
    served = Served(row=np.array([0, 1, 0, -1]), rate_tps=np.array([100.0, 50.0]),
                    energy_j_per_token=np.array([0.1, 0.2]), latency_s=np.array([1.0, 2.0]),
                    p99_s=np.array([2.0, 3.0]), ms={})
    windows, totals = reduce_timeline(table(np.nan), served)
    assert [w["tokens_per_s"] for w in windows] == pytest.approx([2750 / 60, 3000 / 60])
    assert [w["served_frac"] for w in windows] == pytest.approx([2750 / 4000, 1.0])
    assert windows[0]["latency_s"] == pytest.approx((20 * 1 + 40 * 2) / 60)      # time-weighted
    assert windows[1]["latency_s"] == pytest.approx(1.0)
    assert (windows[0]["migrations"], windows[0]["migration_s"], windows[0]["imbalance"]) == (3, 10.0, 1.5)
    assert totals["tokens_served"] == pytest.approx(5750)
    assert totals["availability"] == pytest.approx(5750 / 7000)
    assert totals["energy_j_per_token"] == pytest.approx(655 / 5750)
    assert totals["mean_latency_s"] == pytest.approx((2000 * 1 + 750 * 2 + 3000 * 1) / 5750)   # token-weighted
    assert totals["p99_latency_s"] == 3.0           # the 750 tokens at p99 3 s lie above the 99th percentile
    assert (totals["migration_bytes"], totals["migration_energy_j"]) == (1e9, 5.0)
    windows, totals = reduce_timeline(table(60.0), served)
    assert [w["tokens_per_s"] for w in windows] == pytest.approx([1950 / 60, 1800 / 60])
    assert [w["served_frac"] for w in windows] == pytest.approx([1950 / 3600, 1800 / 3600])
    assert totals["availability"] == pytest.approx(3750 / 7200)


def test_runtime_has_no_identity_caches_no_unwrapping_and_small_modules():
    """Issue 48's done-when: no `id(`, `hasattr(` or `.inner` in dse/runtime, no module over 300 lines."""
    for path in RUNTIME.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"id\(|hasattr\(|\.inner\b", text), path.name
        assert len(text.splitlines()) <= 300, path.name
