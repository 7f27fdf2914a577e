"""Evaluate a population on every core: the designs split into one contiguous chunk per thread, each
chunk through the Numba kernel (compiled ``nogil``) with its own scratch arrays, the rows put back in
order. Each design's metrics depend on that design alone, so the result is the serial one, bit for bit
(tests/test_parallel_eval.py)."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: designs per thread below which one thread does it all (threads cost more than they save)
MIN_CHUNK = 32
THREAD_PREFIX = "dse-eval"


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # not on Linux
        return os.cpu_count() or 1


def split_rows(n: int, threads: int) -> list[slice]:
    """Contiguous slices of ``n`` rows, one per thread (fewer when the chunks would be small)."""
    parts = max(1, min(threads, n // MIN_CHUNK))
    edges = np.linspace(0, n, parts + 1).astype(int)
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def map_rows(run, n: int, threads: int) -> np.ndarray:
    """``run(rows) -> array`` over the population's rows on ``threads`` threads, stacked in order; serially
    when called from one of the pool's own threads (waiting there on the pool could deadlock it)."""
    chunks = split_rows(n, threads)
    if len(chunks) == 1 or threading.current_thread().name.startswith(THREAD_PREFIX):
        return run(chunks[0])
    return np.concatenate(list(_pool(len(chunks)).map(run, chunks)))


_POOLS: dict[int, ThreadPoolExecutor] = {}
if hasattr(os, "register_at_fork"):             # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_POOLS.clear)


def _pool(workers: int) -> ThreadPoolExecutor:
    """One pool per width for the process's life: starting threads on every call cost more than a small
    population's evaluation (a system evaluates a package share per call, 120 calls a population)."""
    if workers not in _POOLS:
        _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=THREAD_PREFIX)
    return _POOLS[workers]
