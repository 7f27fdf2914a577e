"""A server's paged KV cache as vLLM V1 keeps it (Kwon et al., SOSP 2023; vLLM's KVCacheManager): blocks of
`BLOCK` tokens allocated as a sequence grows, and with automatic prefix caching the full blocks of a
computed prompt kept under a key of everything before them, shared by every sequence whose prompt
starts the same way.

A block is in use while a running sequence holds it; a cached block no sequence holds stays in the cache,
free to be taken, until a new block needs its room: the least recently freed goes first (LRU; a sequence's
blocks are freed last block first, so a prompt's head outlives its tail, as vLLM frees them). A prompt's
hit is its leading run of keys in the cache, at most all its tokens but one (the last is computed again for
its logits, as vLLM does). The simulator (dse.serving.simulate) counts each sequence's blocks; this
keeps the shared ones and the cache.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..study.schema.serving import BLOCK_TOKENS

#: tokens of a KV cache block (vLLM's default block_size on GPUs)
BLOCK = BLOCK_TOKENS


def blocks(tokens) -> np.ndarray:
    """Blocks that hold ``tokens`` tokens (array or number)."""
    return np.ceil(np.asarray(tokens, float) / BLOCK)


class KvCache:
    """``capacity_tokens`` of KV cache in blocks: ``shared`` (key -> sequences holding it), ``cached``
    (keys no sequence holds, least recently freed first), ``private`` (blocks held by one sequence, keyless);
    with ``caching`` off no block gets a key."""

    def __init__(self, capacity_tokens: float, caching: bool = False):
        self.total = math.floor(capacity_tokens / BLOCK) if math.isfinite(capacity_tokens) else math.inf
        self.caching = caching
        self.shared: dict = {}
        self.cached: OrderedDict = OrderedDict()
        self.private = 0.0
        self.hit_tokens = self.query_tokens = 0.0

    def in_use(self) -> float:
        return len(self.shared) + self.private

    def free(self) -> float:
        """Blocks a sequence may take now (the cached ones evicted as needed)."""
        return self.total - self.in_use()

    def hit(self, keys: list, tokens: float) -> int:
        """Blocks of ``keys`` (a prompt's full blocks, in order) found in the cache, at most those of
        ``tokens`` - 1 tokens."""
        found = 0
        if self.caching:
            limit = min(len(keys), int((tokens - 1) // BLOCK))
            while found < limit and (keys[found] in self.shared or keys[found] in self.cached):
                found += 1
        return found

    def record(self, found: int, tokens: float) -> None:
        """A prompt of ``tokens`` tokens scheduled with ``found`` blocks from the cache (the hit rate's
        counts)."""
        if self.caching:
            self.query_tokens += tokens
            self.hit_tokens += found * BLOCK

    def acquire(self, keys: list) -> None:
        """A sequence takes the cached blocks ``keys``."""
        for key in keys:
            self.cached.pop(key, None)
            self.shared[key] = self.shared.get(key, 0) + 1

    def allocate(self, n: float) -> None:
        """``n`` new private blocks, evicting the least recently freed cached blocks their room needs."""
        self.private += n
        while self.cached and self.total - self.in_use() < len(self.cached):
            self.cached.popitem(last=False)

    def publish(self, keys: list) -> None:
        """A sequence's private blocks ``keys`` (its prompt's full blocks, just computed) get their keys: a
        key already there is shared instead (the duplicate block freed)."""
        for key in keys:
            self.cached.pop(key, None)
            self.shared[key] = self.shared.get(key, 0) + 1
        self.private -= len(keys)

    def release(self, keys: list, private: float) -> None:
        """A sequence frees its ``private`` blocks and its shared ``keys``, last first: a key no one holds
        stays cached (most recently freed)."""
        self.private -= private
        for key in reversed(keys):
            self.shared[key] -= 1
            if not self.shared[key]:
                del self.shared[key]
                self.cached[key] = None

    @property
    def hit_rate(self) -> float:
        """Prompt tokens found in the cache over those looked up (0 with caching off)."""
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


def capacity_tokens(prepared, design, utilization: float = 1.0) -> float:
    """Tokens of KV cache a design holds, as vLLM sizes it at ``--gpu-memory-utilization``: that share of
    its HBM and DDR (the share for weights, activations and KV cache) less the model's weights, over the
    KV bytes of one token (all layers); inf when the model keeps no KV cache. The forward pass's
    activations and CUDA graphs (vLLM profiles them at start-up: about 1-4 GiB a GPU) are not subtracted.
    Raises StudyError (``--design``) when the weights do not fit."""
    from ..errors import StudyError

    t = prepared.tables
    hbm = sum(design.hbm_stacks) * (t.hbm.capacity_bytes if t.hbm else 0.0)
    ddr = design.ddr_channels * (t.ddr.capacity_bytes if t.ddr else 0.0)
    per_token = t.workload.summary.get("kv_cache_bytes_per_token", 0.0)
    free = utilization * (hbm + ddr) - float(t.unit_capacity_bytes.sum())
    if per_token <= 0:
        return math.inf
    if free <= 0:
        raise StudyError("the design's memory does not hold the model's weights: no room for a KV cache",
                         key="--design")
    return free / per_token
