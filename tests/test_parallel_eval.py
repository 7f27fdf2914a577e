"""Evaluation on every core (dse.model.parallel) equals serial evaluation, bit for bit."""
import numpy as np
import pytest
import yaml

import dse
from dse.model.parallel import split_rows


@pytest.mark.parametrize("path", ["studies/quickstart.yaml", "benchmarks/evaluate_mixtral.yaml",
                                  "studies/deepseek_v3_multi_package.yaml"])
def test_threads_give_the_serial_metrics(path):
    data = yaml.safe_load(open(path))
    if path.endswith("quickstart.yaml"):
        data["faults"] = {"monte_carlo": {"samples": 8, "failures": 2, "seed": 3}}   # every failure kind
    prepared = dse.prepare(dse.Study.from_dict(data))
    X = np.random.default_rng(5).integers(prepared.space.lower, prepared.space.upper + 1,
                                          size=(150, prepared.space.n_var))
    package = prepared.package_evaluator
    prepared.evaluator.metrics_array(X[:2])          # a system builds its package shares on first use
    runs = []
    for threads in (1, 3):
        package.threads = threads
        if prepared.system_evaluator.bank is not None:     # a system: every package share too
            for stage in prepared.system_evaluator.bank.cache.values():
                for row in stage.shares:
                    for share in row:
                        share.evaluator.threads = threads
        runs.append(prepared.evaluator.metrics_array(X))
    np.testing.assert_array_equal(runs[0], runs[1])


def test_rows_split_into_contiguous_chunks_covering_all():
    for n, threads in ((10, 4), (1000, 3), (64, 2), (65, 64)):
        chunks = split_rows(n, threads)
        assert chunks[0].start == 0 and chunks[-1].stop == n
        assert all(a.stop == b.start for a, b in zip(chunks, chunks[1:]))
        assert len(chunks) == 1 or min(c.stop - c.start for c in chunks) >= 32


def test_the_thread_pool_survives_a_fork():
    # the pools live for the process; a forked child (multiprocessing's fork) must start its own threads
    import os
    import sys

    from dse.model.parallel import map_rows
    if not hasattr(os, "fork") or sys.platform == "darwin":
        pytest.skip("fork")
    assert map_rows(lambda r: np.arange(r.start, r.stop), 100, 2).sum() == 4950
    pid = os.fork()
    if pid == 0:
        os._exit(0 if map_rows(lambda r: np.arange(r.start, r.stop), 100, 2).sum() == 4950 else 1)
    assert os.waitpid(pid, 0)[1] == 0


def test_a_system_design_alone_gets_the_metrics_it_gets_in_a_population():
    # a population groups its designs by layout; the sums over stages and ranks must not round differently
    # for a group of one design (NumPy sums a contiguous axis pairwise: the last bit of a lone design's
    # energy once differed)
    prepared = dse.prepare(dse.Study.from_dict(yaml.safe_load(open("studies/deepseek_v3_multi_package.yaml"))))
    X = np.random.default_rng(11).integers(prepared.space.lower, prepared.space.upper + 1,
                                           size=(40, prepared.space.n_var))
    together = prepared.evaluator.metrics_array(X)
    alone = np.vstack([prepared.evaluator.metrics_array(X[i:i + 1]) for i in range(len(X))])
    np.testing.assert_array_equal(alone, together)
