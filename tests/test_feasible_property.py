"""Issue 34's property over every bundled study (inference, serving, training, systems of packages): a
design the search calls feasible (constraint_matrix <= 0, as `dse run` judges) can run. Its step is
finite and under an hour (a training iteration under a day), it fits its memory, and every unit is
placed with a memory path for each copy that holds weights (its chiplet's HBM or the package's DDR),
checked here from the design itself rather than from the constraint columns."""
import functools
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import dse
from dse.model.objectives import constraint_matrix

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="dse-hypothesis-"))     # its caches go to /tmp, not the checkout

STUDIES = sorted(str(p) for p in Path("studies").glob("*.yaml"))
POPULATION = 32             # random decision vectors per example, evaluated as one population
HOUR, DAY = 3600.0, 86400.0


@functools.lru_cache(maxsize=None)
def _prepared(path: str):
    return dse.prepare(dse.load_study(path))


def _broken(prepared, design: dse.Design) -> list[str]:
    """What keeps ``design`` from running, judged from the design (empty: nothing)."""
    t = prepared.tables
    has_ddr = t.ddr is not None and design.ddr_channels > 0
    out = []
    for unit, weights in zip(t.unit_names, t.unit_capacity_bytes):
        slots = design.placement.get(unit, [])
        if not slots:
            out.append(f"{unit} has no chiplet")
        elif weights > 0:
            resident = [t.kind_sram_Bps[t.kind_names.index(design.chiplets[s])] > 0 for s in slots]  # its SRAM
            out += [f"{unit} on slot {s} has no memory" for s, r in zip(slots, resident)
                    if design.hbm_stacks[s] == 0 and not has_ddr and not r]
    return out


def test_every_bundled_study_is_covered():
    assert {"quickstart.yaml", "serve_llama2_7b.yaml", "train_llama2_7b.yaml",
            "deepseek_v3_multi_package.yaml"} <= {Path(p).name for p in STUDIES}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: Path(p).stem)
@settings(max_examples=2, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_feasible_design_can_run(path, seed):
    prepared = _prepared(path)
    space, study = prepared.space, prepared.study
    X = np.random.default_rng(seed).integers(space.lower, space.upper + 1, size=(POPULATION, len(space.lower)))
    metrics = prepared.evaluator(X)
    feasible = np.flatnonzero((constraint_matrix(metrics, study) <= 0).all(axis=1))
    limit = DAY if study.workload.phase == "train" else HOUR
    designs = prepared.evaluator.designs(X[feasible])
    for i, design in zip(feasible, designs):
        row = metrics.iloc[i]
        step = float(row["latency_s"])
        assert math.isfinite(step) and 0 < step < limit, f"feasible design {design.to_dict()} takes {step:.3g} s"
        assert row["capacity_short_bytes"] == 0 and row["unplaced_experts"] == 0
        assert not _broken(prepared, design), (_broken(prepared, design), design.to_dict())
