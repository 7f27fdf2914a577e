"""Request workloads for serving: prompt and output lengths and arrival times.

Lengths are fixed, uniform over ``[low, high]`` or lognormal (``median``, ``sigma``), or read from a
public trace: the Azure LLM inference trace CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``; its
timestamps are the arrivals unless a rate is given) or ShareGPT-style JSON length pairs (a list of
``{"input_len": I, "output_len": O}`` or of ``[I, O]``, as vLLM's benchmark_serving tokenises them).
Arrivals are Poisson at ``rate`` requests/s, or all at time 0 for a fixed concurrency (the simulator
then keeps at most that many in flight). Everything is drawn from one seeded generator.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import StudyError

MAX_REQUESTS = 1_000_000
MAX_TOKENS = 10_000_000


@dataclass(frozen=True)
class Requests:
    """``n`` requests as arrays: arrival time (s), prompt tokens, output tokens; optionally which of the
    distinct prompts each is (``prompt_id``: equal ids, equal prompts; None: all differ) and which shared
    prefix of ``prefix_len`` tokens its prompt starts with (``prefix_id``; None: none)."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    prompt_id: np.ndarray | None = None
    prefix_id: np.ndarray | None = None
    prefix_len: int = 0

    def __len__(self) -> int:
        return len(self.arrival_s)


def lengths(spec, n: int, rng: np.random.Generator, key: str) -> np.ndarray:
    """``n`` token counts from a length spec: a number, ``{uniform: [low, high]}`` or
    ``{lognormal: {median: M, sigma: S}}``; at least 1 each."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        values = np.full(n, float(spec))
    elif isinstance(spec, dict) and set(spec) == {"uniform"}:
        low, high = spec["uniform"]
        values = rng.integers(int(low), int(high) + 1, size=n).astype(float)
    elif isinstance(spec, dict) and set(spec) == {"lognormal"}:
        p = spec["lognormal"]
        values = np.round(rng.lognormal(math.log(p["median"]), p["sigma"], size=n))
    else:
        raise StudyError("a length is a number of tokens, {uniform: [low, high]} or "
                         "{lognormal: {median: M, sigma: S}}", key=key)
    if not np.isfinite(values).all() or values.min() < 1 or values.max() > MAX_TOKENS:
        raise StudyError(f"lengths must be 1 to {MAX_TOKENS:,} tokens", key=key)
    return np.maximum(values, 1.0)


def arrivals(n: int, rate: float | None, rng: np.random.Generator) -> np.ndarray:
    """Poisson arrivals at ``rate`` requests/s (exponential gaps), or all at 0 (``rate`` None, or inf: vLLM's
    benchmark_serving sends every request at once then)."""
    if rate is None or rate == math.inf:
        return np.zeros(n)
    if not (math.isfinite(rate) and rate > 0):
        raise StudyError(f"must be a positive number of requests per second, or inf, got {rate}",
                         key="--request-rate")
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def synthetic(n: int, prompt, output, rate: float | None, seed: int = 0) -> Requests:
    if not 1 <= n <= MAX_REQUESTS:
        raise StudyError(f"must be 1 to {MAX_REQUESTS:,} requests, got {n}", key="--num-prompts")
    rng = np.random.default_rng(seed)
    return Requests(arrival_s=arrivals(n, rate, rng), prompt=lengths(prompt, n, rng, "--input-len"),
                    output=lengths(output, n, rng, "--output-len"))


def shared_prefixes(r: Requests, prefix_len: int = 0, num_prefixes: int = 1,
                    num_distinct: int | None = None) -> Requests:
    """``r`` with a prefix structure (vLLM benchmark_serving's prefix-repetition and a finite prompt set):
    request i repeats distinct prompt i mod ``num_distinct`` (its lengths too), and distinct prompt m
    starts with shared prefix m mod ``num_prefixes`` of ``prefix_len`` tokens."""
    n = len(r)
    if num_distinct is not None and not 1 <= num_distinct <= MAX_REQUESTS:
        raise StudyError(f"must be 1 to {MAX_REQUESTS:,} prompts, got {num_distinct}", key="--num-distinct-prompts")
    if not 1 <= num_prefixes <= MAX_REQUESTS:
        raise StudyError(f"must be 1 to {MAX_REQUESTS:,} prefixes, got {num_prefixes}", key="--num-prefixes")
    prompt_id = np.arange(n) % num_distinct if num_distinct else np.arange(n)
    prompt, output = r.prompt[prompt_id], r.output[prompt_id]
    if not 0 <= prefix_len <= prompt.min():
        raise StudyError(f"must be 0 to the shortest prompt's {int(prompt.min()):,} tokens, got {prefix_len}",
                         key="--prefix-len")
    return Requests(arrival_s=r.arrival_s, prompt=prompt, output=output, prompt_id=prompt_id,
                    prefix_id=prompt_id % num_prefixes if prefix_len else None, prefix_len=int(prefix_len))


def from_file(path: str | Path, n: int | None, rate: float | None, seed: int = 0) -> Requests:
    """Requests of an Azure LLM inference trace (CSV) or a ShareGPT-style JSON of length pairs."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"cannot read {path}: {exc.__class__.__name__}", key="--dataset") from None
    if path.suffix == ".csv":
        times, prompt, output = _azure(text, path)
    elif path.suffix == ".json":
        prompt, output = _pairs(text, path)
        times = None
    else:
        raise StudyError(f"{path}: a dataset is an Azure trace .csv or a .json of length pairs", key="--dataset")
    count = len(prompt) if n is None else min(n, len(prompt))
    if count < 1 or count > MAX_REQUESTS:
        raise StudyError(f"{path}: needs 1 to {MAX_REQUESTS:,} requests, has {len(prompt)}", key="--dataset")
    rng = np.random.default_rng(seed)
    if rate is not None or times is None:
        arrival = arrivals(count, rate, rng)
    else:
        arrival = np.asarray(times[:count]) - times[0]
    return Requests(arrival_s=arrival, prompt=np.asarray(prompt[:count], float), output=np.asarray(output[:count], float))


def _azure(text: str, path: Path):
    from datetime import datetime
    rows = list(csv.DictReader(text.splitlines()))
    need = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
    if not rows or not need <= set(rows[0]):
        raise StudyError(f"{path}: an Azure trace has the columns {', '.join(sorted(need))}", key="--dataset")
    times, prompt, output = [], [], []
    for i, r in enumerate(rows):
        try:
            stamp = r["TIMESTAMP"].strip()
            t = datetime.fromisoformat(stamp[:26]).timestamp() if not stamp.replace(".", "").isdigit() else float(stamp)
            p, o = int(r["ContextTokens"]), int(r["GeneratedTokens"])
        except ValueError:
            raise StudyError(f"{path}: row {i + 2} is not a timestamp and two token counts", key="--dataset") from None
        if not (1 <= p <= MAX_TOKENS and 1 <= o <= MAX_TOKENS):
            raise StudyError(f"{path}: row {i + 2}: token counts must be 1 to {MAX_TOKENS:,}", key="--dataset")
        times.append(t)
        prompt.append(p)
        output.append(o)
    return np.array(times), prompt, output


def _pairs(text: str, path: Path):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyError(f"{path}: not valid JSON ({exc.msg})", key="--dataset") from None
    prompt, output = [], []
    for i, item in enumerate(data if isinstance(data, list) else []):
        pair = (item.get("input_len"), item.get("output_len")) if isinstance(item, dict) else \
            (tuple(item) if isinstance(item, list) and len(item) == 2 else (None, None))
        if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_TOKENS for v in pair):
            raise StudyError(f"{path}: item {i} is not an input and an output length of 1 to {MAX_TOKENS:,} tokens",
                             key="--dataset")
        prompt.append(pair[0])
        output.append(pair[1])
    if not prompt:
        raise StudyError(f"{path}: a JSON list of {{input_len, output_len}} or [input, output] pairs", key="--dataset")
    return prompt, output
