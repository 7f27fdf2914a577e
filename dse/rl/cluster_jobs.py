"""The training jobs a cluster receives: a seeded Poisson stream or a trace file.

A job is a model (a workloads preset or HuggingFace config.json), a token budget, a priority (its weight
in the weighted completion time), the nodes it asks for and its arrival time. The stream draws
``jobs`` arrivals of a Poisson process of ``arrival_rate_per_hour`` (exponential gaps; the first job at
0), each job's model uniformly from ``models``, its tokens log-uniformly from ``tokens`` (low, high),
its priority from (1, 2, 4) and the nodes it asks for from (1, 2, 4, 8, 16), each uniformly (inputs of
the benchmark, not fits: Philly's jobs, Jeon et al. ATC'19, span 1 to 128 GPUs, most of them few).

A trace is a CSV readable by pandas.read_csv with columns ``arrival_s, model, tokens, priority, nodes``
(one row a job; times relative to the first arrival). Bad input raises `StudyError` naming the
argument (``trace``, ``jobs``, ...).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import StudyError

TRACE_COLUMNS = ("arrival_s", "model", "tokens", "priority", "nodes")
PRIORITIES = (1.0, 2.0, 4.0)
REQUESTS = (1, 2, 4, 8, 16)
MAX_JOBS = 100_000


@dataclass(frozen=True)
class Job:
    """One training job (SI units: seconds, tokens)."""

    index: int
    model: str
    tokens: float
    priority: float
    nodes: int          # nodes the job asks for (the start of a take action; at least its minimum)
    arrival_s: float


def check_number(value, key: str, whole: bool = False, high: float = math.inf, zero: bool = False) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and \
        math.isfinite(value) and (value >= 0 if zero else value > 0) and value <= high and \
        (not whole or float(value).is_integer())
    if not ok:
        what = "a whole number" if whole else "a finite number"
        raise StudyError(f"must be {what} {'>= 0' if zero else '> 0'}" +
                         (f" and at most {high:,g}" if math.isfinite(high) else "") + f", got {value!r}", key=key)
    return float(value)


def poisson_jobs(models: tuple[str, ...], jobs: int, arrival_rate_per_hour: float, tokens: tuple[float, float],
                 rng: np.random.Generator) -> list[Job]:
    """``jobs`` jobs of a Poisson stream (module docstring)."""
    low, high = tokens
    gaps = rng.exponential(3600.0 / arrival_rate_per_hour, size=jobs)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)
    picks = rng.integers(len(models), size=jobs)
    budget = np.exp(rng.uniform(math.log(low), math.log(high), size=jobs))
    priority = rng.choice(PRIORITIES, size=jobs)
    nodes = rng.choice(REQUESTS, size=jobs)
    return [Job(i, models[picks[i]], float(budget[i]), float(priority[i]), int(nodes[i]), float(arrivals[i]))
            for i in range(jobs)]


def check_stream(models, jobs, arrival_rate_per_hour, tokens) -> tuple:
    """The stream's arguments checked: (models, jobs, rate, (low, high))."""
    if isinstance(models, str) or not isinstance(models, (list, tuple)) or not models or \
            not all(isinstance(m, str) and m for m in models):
        raise StudyError(f"must be a non-empty list of model names, got {models!r}", key="models")
    n = int(check_number(jobs, "jobs", whole=True, high=MAX_JOBS))
    rate = check_number(arrival_rate_per_hour, "arrival_rate_per_hour", high=1e6)
    if not isinstance(tokens, (list, tuple)) or len(tokens) != 2:
        raise StudyError(f"must be (low, high) tokens per job, got {tokens!r}", key="tokens")
    low, high = (check_number(t, "tokens", high=1e18) for t in tokens)
    if low > high:
        raise StudyError(f"low {low:g} is above high {high:g}", key="tokens")
    return tuple(models), n, rate, (low, high)


def read_trace(path) -> list[Job]:
    """The jobs of a trace CSV (module docstring), in arrival order."""
    import pandas as pd

    p = Path(path)
    try:
        frame = pd.read_csv(p)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise StudyError(f"{p}: not a readable CSV ({exc.__class__.__name__})", key="trace") from None
    missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
    if missing:
        raise StudyError(f"{p}: missing column {missing[0]!r}; a trace has {', '.join(TRACE_COLUMNS)}", key="trace")
    if frame.empty or len(frame) > MAX_JOBS:
        raise StudyError(f"{p}: needs 1 to {MAX_JOBS:,} jobs, has {len(frame):,}", key="trace")
    out = []
    for row, r in enumerate(frame.itertuples(index=False), start=2):
        where = f"trace {p.name} line {row}"
        try:
            arrival = check_number(r.arrival_s, "arrival_s", zero=True)
            tokens = check_number(r.tokens, "tokens", high=1e18)
            priority = check_number(r.priority, "priority", high=1e6)
            nodes = int(check_number(r.nodes, "nodes", whole=True, high=1e6))
        except StudyError as exc:
            raise StudyError(f"{where}: {exc.key} {exc.detail}", key="trace") from None
        if not isinstance(r.model, str) or not r.model:
            raise StudyError(f"{where}: model must be a model name, got {r.model!r}", key="trace")
        out.append((arrival, row, r.model, tokens, priority, nodes))
    out.sort()
    start = out[0][0]
    return [Job(i, m, t, pr, n, a - start) for i, (a, _, m, t, pr, n) in enumerate(out)]
