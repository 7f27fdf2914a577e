"""Screening against exact evaluation and against RapidChiplet, side by side on this machine (issue 16).

Issue 7's benchmark (Mixtral-8x7B decode, 16-chiplet package, per-layer expert mapping, every metric with
fault tolerance over every chiplet failure): designs/s of the exact evaluation and of the screening one
(dse.search.screening: a failure's hand-offs keep the intact routes), both on one core (process time, as
bench_evaluate.py), with screening's largest change of fault_tolerance_frac over the population.

RapidChiplet (Iff et al., 2023; spcl/rapidchiplet, the Python version at commit 66e63e5) is timed in the
same process on this benchmark's first design, exported by `dse export --to rapidchiplet`: its area,
power, link, cost, latency and throughput summaries per call, inputs read once, validation off. Give a
checkout of it with ``--rapidchiplet PATH`` (or the RAPIDCHIPLET environment variable); it is never part
of this project. Goals (issue 52): screening at 10x RapidChiplet's rate, exact at 6x. Prints the ratios last."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dse
from dse.exports.common import ExportContext
from dse.exports.rapidchiplet import export
from dse.search.screening import screened

POPULATION = 2000
CALLS = 300
METRICS = {"area_summary": True, "power_summary": True, "link_summary": True, "cost": True, "latency": True,
           "throughput": True, "booksim_simulation": False}


def rate(evaluator, X) -> tuple[float, np.ndarray]:
    evaluator.metrics_array(X[:4])
    best = np.inf
    for _ in range(3):
        start = time.process_time()
        out = evaluator(X)
        best = min(best, time.process_time() - start)
    return len(X) / best, out["fault_tolerance_frac"].to_numpy()


@contextlib.contextmanager
def inside(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def rapidchiplet_rate(checkout: Path, study, prepared, X) -> float:
    """Designs/s of RapidChiplet's in-process evaluation of this benchmark's first design."""
    package = prepared.package_evaluator
    design = package.designs(X[:1])[0]
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    with tempfile.TemporaryDirectory(prefix="dse-bench-rc-") as tmp:
        ctx = ExportContext(design_id="d00000", design=design, study=study, prepared=prepared,
                            metrics=metrics)
        export(ctx, Path(tmp))
        sys.path.insert(0, str(checkout))
        try:
            rc = importlib.import_module("rapidchiplet")
            helpers = importlib.import_module("helpers")
            with inside(Path(tmp)):
                inputs = {"design": helpers.read_json(filename="design.json"), "validate": False, "verbose": False}
                helpers.read_required_inputs(inputs, ["chiplets", "placement", "topology", "packaging",
                                                      "technologies", "routing_table", "traffic_by_chiplet"])
                rc.rapidchiplet(inputs, {}, METRICS, "bench", validate=False)     # warm up
                start = time.process_time()
                for _ in range(CALLS):      # inputs stay read; every call computes its intermediates afresh
                    rc.rapidchiplet(inputs, {}, METRICS, "bench", validate=False)
                seconds = time.process_time() - start
        finally:
            sys.path.remove(str(checkout))
    return CALLS / seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rapidchiplet", default=os.environ.get("RAPIDCHIPLET"),
                        help="a checkout of spcl/rapidchiplet (commit 66e63e5)")
    args = parser.parse_args(argv)
    study = dse.load_study(Path(__file__).with_name("evaluate_mixtral.yaml"))
    prepared = dse.prepare(study)
    space = prepared.space
    X = np.random.default_rng(0).integers(space.lower, space.upper + 1, size=(POPULATION, space.n_var))
    exact, ft_exact = rate(prepared.evaluator, X)
    with screened(prepared.evaluator):
        screening, ft_screened = rate(prepared.evaluator, X)
    error = np.abs(ft_exact - ft_screened)
    error = error[np.isfinite(error)]
    print(f"{prepared.tables.n_units} units, 16 chiplets, {POPULATION} designs, every chiplet failure, one core")
    print(f"exact evaluation: {exact:,.0f} designs/s")
    print(f"screening evaluation: {screening:,.0f} designs/s ({screening / exact:.2f}x); fault_tolerance_frac "
          f"moves by at most {error.max():.2g} (mean {error.mean():.2g})")
    if not args.rapidchiplet:
        print("RapidChiplet: not timed (give --rapidchiplet PATH to a checkout of spcl/rapidchiplet)")
        return
    rc = rapidchiplet_rate(Path(args.rapidchiplet), study, prepared, X)
    print(f"RapidChiplet in-process, same package: {rc:,.0f} designs/s")
    print(f"screening / RapidChiplet: {screening / rc:.1f}x (goal 10x); exact: {exact / rc:.1f}x (goal 6x)")


if __name__ == "__main__":
    main()
