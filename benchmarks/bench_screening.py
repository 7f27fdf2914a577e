"""Screening against exact evaluation and against RapidChiplet, side by side on this machine (issue 16).

Issue 7's benchmark (Mixtral-8x7B decode, 16-chiplet package, per-layer expert mapping, every metric with
fault tolerance over every chiplet failure): designs/s of the exact evaluation and of the screening one
(dse.search.screening: a failure's hand-offs keep the intact routes), both on one core (process time, as
bench_evaluate.py), with screening's largest change of fault_tolerance_frac over the population. One core
means one evaluation thread: the evaluator would otherwise split the population over every core
(dse.model.parallel), and process time would add up both threads' work (issue 52's twelfth round: on this
project's 2-core host, two threads took 10-25 % more process time than one for the same designs).

RapidChiplet (Iff et al., 2023; spcl/rapidchiplet, the Python version at commit 66e63e5) is timed in the
same process on this benchmark's first design, exported by `dse export --to rapidchiplet`: its area,
power, link, cost, latency and throughput summaries per call, inputs read once, validation off. Give a
checkout of it with ``--rapidchiplet PATH`` (or the RAPIDCHIPLET environment variable); it is never part
of this project. The three timings (exact, screening, RapidChiplet's `CALLS` calls) are taken in turn,
`ROUNDS` rounds, and each rate is of its least process time: on a shared host whose speed drifts between
runs (issue 52's tenth round: RapidChiplet's rate moved 480-1,040 designs/s between consecutive runs),
the two sides of a ratio see the same spells. Goals (issue 52): screening at 10x RapidChiplet's rate, exact
at 6x. Prints the ratios last."""
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
ROUNDS = 3                       # rounds of the three timings, taken in turn (`least_times`)
METRICS = {"area_summary": True, "power_summary": True, "link_summary": True, "cost": True, "latency": True,
           "throughput": True, "booksim_simulation": False}


def timed(call) -> float:
    """Process time of one call, s."""
    start = time.process_time()
    call()
    return time.process_time() - start


@contextlib.contextmanager
def inside(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def rapidchiplet_calls(checkout: Path, study, prepared, X):
    """A callable that runs RapidChiplet's in-process evaluation of this benchmark's first design `CALLS`
    times (inputs read once, every call computing its intermediates afresh), warmed up once."""
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

                def calls():
                    for _ in range(CALLS):
                        rc.rapidchiplet(inputs, {}, METRICS, "bench", validate=False)
                rc.rapidchiplet(inputs, {}, METRICS, "bench", validate=False)     # warm up
                yield calls
        finally:
            sys.path.remove(str(checkout))


def least_times(evaluator, X, rapidchiplet=None) -> tuple[dict, dict]:
    """The least process time of each of exact evaluation, screening evaluation and (given) RapidChiplet's
    `CALLS` calls over `ROUNDS` rounds that take them in turn, so each sees the same spells of a shared host's
    load; with the fault_tolerance_frac of each evaluation."""
    evaluator.metrics_array(X[:4])          # compiles
    least = {"exact": np.inf, "screening": np.inf, "rapidchiplet": np.inf}
    frac = {}

    def exact():
        frac["exact"] = evaluator(X)["fault_tolerance_frac"].to_numpy()

    def screening():
        with screened(evaluator):
            frac["screening"] = evaluator(X)["fault_tolerance_frac"].to_numpy()
    for _ in range(ROUNDS):
        least["exact"] = min(least["exact"], timed(exact))
        least["screening"] = min(least["screening"], timed(screening))
        if rapidchiplet is not None:
            least["rapidchiplet"] = min(least["rapidchiplet"], timed(rapidchiplet))
    return least, frac


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rapidchiplet", default=os.environ.get("RAPIDCHIPLET"),
                        help="a checkout of spcl/rapidchiplet (commit 66e63e5)")
    args = parser.parse_args(argv)
    study = dse.load_study(Path(__file__).with_name("evaluate_mixtral.yaml"))
    prepared = dse.prepare(study)
    prepared.package_evaluator.threads = 1          # one core, as RapidChiplet's calls
    space = prepared.space
    X = np.random.default_rng(0).integers(space.lower, space.upper + 1, size=(POPULATION, space.n_var))
    with contextlib.ExitStack() as stack:
        rapidchiplet = (stack.enter_context(rapidchiplet_calls(Path(args.rapidchiplet), study, prepared, X))
                        if args.rapidchiplet else None)
        least, frac = least_times(prepared.evaluator, X, rapidchiplet)
    exact, screening = POPULATION / least["exact"], POPULATION / least["screening"]
    error = np.abs(frac["exact"] - frac["screening"])
    error = error[np.isfinite(error)]
    print(f"{prepared.tables.n_units} units, 16 chiplets, {POPULATION} designs, every chiplet failure, one core")
    print(f"exact evaluation: {exact:,.0f} designs/s")
    print(f"screening evaluation: {screening:,.0f} designs/s ({screening / exact:.2f}x); fault_tolerance_frac "
          f"moves by at most {error.max():.2g} (mean {error.mean():.2g})")
    if rapidchiplet is None:
        print("RapidChiplet: not timed (give --rapidchiplet PATH to a checkout of spcl/rapidchiplet)")
        return
    rc = CALLS / least["rapidchiplet"]
    print(f"RapidChiplet in-process, same package: {rc:,.0f} designs/s")
    print(f"screening / RapidChiplet: {screening / rc:.1f}x (goal 10x); exact: {exact / rc:.1f}x (goal 6x)")
    print(f"(least process time of {ROUNDS} rounds, each timing exact, screening and RapidChiplet in turn)")


if __name__ == "__main__":
    main()
