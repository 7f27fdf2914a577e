"""Parallel evaluation of each generation on a Dask cluster.

The evaluator (numpy tables and the study's space; 10-30 kB pickled) is scattered once to every
worker; each generation's population is cut into one contiguous chunk per worker thread, the chunks
are evaluated with ``client.map`` and their metrics put back together in order. A design's metrics
do not depend on which other designs share its chunk, so the result equals a serial run's exactly.

``workers=N`` starts a LocalCluster of N single-threaded worker processes on the loopback interface;
``scheduler="tcp://host:8786"`` uses a running cluster, whose workers need this package installed.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pandas as pd

from ..errors import StudyError
from ..model.metrics import METRICS

#: how long to try reaching a scheduler given by address
CONNECT_TIMEOUT = "10s"


def evaluate_chunk(evaluator, X: np.ndarray) -> np.ndarray:
    """The task a worker runs: metrics of a block of decision vectors."""
    return evaluator(X)[list(getattr(evaluator, "metric_names", METRICS))].to_numpy()


class DaskEngine:
    """``engine(X) -> metrics DataFrame``, evaluated on a Dask cluster (see module docstring)."""

    def __init__(self, client, evaluator):
        self.client = client
        self.remote = client.scatter(evaluator, broadcast=True)
        self.chunks = max(1, sum(client.nthreads().values()))
        self.metric_names = list(getattr(evaluator, "metric_names", METRICS))

    def __call__(self, X: np.ndarray) -> pd.DataFrame:
        blocks = [b for b in np.array_split(X, min(self.chunks, len(X))) if len(b)]
        futures = self.client.map(evaluate_chunk, [self.remote] * len(blocks), blocks)
        return pd.DataFrame(np.vstack(self.client.gather(futures)), columns=self.metric_names)


@contextmanager
def evaluation_engine(evaluator, workers: int | None = None, scheduler: str | None = None) -> Iterator:
    """The engine to evaluate with: ``evaluator`` itself, or a `DaskEngine` on a local or remote cluster."""
    if not workers and not scheduler:
        yield evaluator
        return
    if workers is not None and workers < 1:
        raise StudyError(f"--workers must be at least 1, got {workers}")
    from distributed import Client, LocalCluster

    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
            client = Client(cluster)
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise StudyError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        yield DaskEngine(client, evaluator)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
