"""The fastest strategy that fits: every tensor, pipeline and data-parallel degree (and micro-batch and
interleaving) the model, system and batch allow, each costed by `iteration` (Calculon's search, done by
enumeration: a layer's operator costs depend only on tp and the micro-batch, so they are computed once
per pair and reused across pipeline and data-parallel choices). A pp that does not divide the layers
is tried with the balanced uneven split (dse.training.stages), not interleaved."""
from __future__ import annotations

import workloads

from ..errors import StudyError
from .iteration import Iteration, iteration, layer_costs
from .strategy import Strategy, check

MICRO_BATCHES = (1, 2, 4, 8, 16)
MAX_STRATEGIES = 200_000


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(cfg: workloads.ModelConfig, devices: int, global_batch: int, seq: int, base: dict) -> list[Strategy]:
    """Every valid strategy for ``devices`` (``base`` holds the fixed choices: recompute, zero, ...)."""
    ep = base.get("ep", 1)
    check(Strategy(tp=1, pp=1, dp=ep, micro_batch=1, global_batch=ep, seq=seq, **base),
          cfg.layers, cfg.heads, cfg.ffn_width, cfg.experts, None, cfg.kv_heads)       # the fixed choices themselves
    out = []
    for tp in divisors(devices):
        if cfg.heads % tp or cfg.kv_heads % tp or cfg.ffn_width % tp or tp > 64:
            continue
        for pp in divisors(devices // tp):
            if pp > cfg.layers:
                continue
            dp = devices // (tp * pp)
            for b in MICRO_BATCHES:
                if global_batch % (b * dp):
                    continue
                even = cfg.layers % pp == 0          # uneven splits: balanced, not interleaved
                for v in (divisors(cfg.layers // pp) if pp > 1 and even else [1]):
                    s = Strategy(tp=tp, pp=pp, dp=dp, micro_batch=b, global_batch=global_batch, seq=seq,
                                 interleave=v, **base)
                    try:
                        check(s, cfg.layers, cfg.heads, cfg.ffn_width, cfg.experts, devices, cfg.kv_heads)
                    except StudyError:
                        continue
                    out.append(s)
                    if len(out) > MAX_STRATEGIES:
                        raise StudyError(f"more than {MAX_STRATEGIES:,} strategies to try; fix some degrees",
                                         key="--search")
    return out


def fastest(cfg: workloads.ModelConfig, system, devices: int, global_batch: int, seq: int, base: dict
            ) -> tuple[Strategy, Iteration, int]:
    """(strategy, its iteration, strategies tried): the fastest that fits the devices' memory."""
    cache = {}
    best = None
    tried = 0
    for s in candidates(cfg, devices, global_batch, seq, base):
        key = (s.tp, s.micro_batch, s.ep)
        if key not in cache:
            cache[key] = layer_costs(cfg, system, s)
        it = iteration(cfg, system, s, cache[key])
        tried += 1
        if it.fits and (best is None or it.iteration_s < best[1].iteration_s):
            best = (s, it)
    if best is None:
        raise StudyError(f"no strategy of {devices} devices fits the model in {system.memory_bytes / 2**30:.0f} GiB "
                         "per device; add devices, recompute (--recompute full) or ZeRO (--zero 3)", key="--search")
    return best[0], best[1], tried
