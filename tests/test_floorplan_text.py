"""A floorplan's chiplet texts: the units counted by kind (an 8 x 8 floorplan of DeepSeek-V3 per layer
counts 15,000 units) and the one-group test on the unit names, each the same as the plain loops they
replace (docs/performance.md, "Issue 52, eighth round (the floorplans)")."""
from __future__ import annotations

import random
from collections import Counter

from dse.results.plots import _one_group, _units_text


def _counted(units, kinds):
    counts: dict[str, int] = {}
    for u in units:
        counts[kinds[u]] = counts.get(kinds[u], 0) + 1
    return "\n".join(f"{n} x {k}" for k, n in counts.items())


def test_units_counted_by_kind_in_the_order_first_met():
    rng = random.Random(0)
    names = ["embed", "lm_head"] + [f"L{layer}.{k}{i}" for layer in range(8) for k, n in (("e", 20), ("a", 2))
                                    for i in range(n)]
    kinds = {u: "embedding" if u == "embed" else "lm_head" if u == "lm_head" else
             "expert" if ".e" in u else "attention" for u in names}
    for size in (10, 11, 40, len(names)):
        units = rng.sample(names, size)
        counts = list(Counter(kinds[u] for u in units).items())     # as Breakdowns.kind_counts gives them
        assert _units_text(" ".join(units), len(units), counts, one_group=False) == _counted(units, kinds)
    assert _units_text("L0.a0 L0.e1", 2, [], one_group=True) == "a0 e1"     # few: named, not counted


def test_one_group_as_the_set_of_groups():
    cases = [[], ["x", "y"], ["L0.e1", "L0.e2", "embed"], ["L0.e1", "L1.e1"], ["embed", "L0.e1", "x", "L0.a"],
             [".x", ".y"], [".x", "a.y"], ["a.b.c", "a.d"], ["a.b", "b.a", "a.c"]]
    for names in cases:
        assert _one_group(names) == (len({u.split(".", 1)[0] for u in names if "." in u}) <= 1), names
