"""Expert popularity over a scenario's windows (dse.runtime.scenario.PopularitySpec), as one
relabelling of each MoE layer's experts per window (dse.runtime.mapping: ``q_w[i] = q[perm_w[i]]``).

``rotate``: at time t the ranks have advanced ``floor(rate_per_s * t)`` experts (mod the layer's
experts): the hot set rotates through the experts at a steady rate. ``random_walk``: in each window each
layer makes Poisson(``rate_per_s * window``) swaps of two experts' popularities drawn uniformly (seeded):
which experts are hot wanders while the popularity shape stays the study's (Zipf, Dirichlet, trace).

A window's popularity is a value (`Popularity`): equal relabellings are equal and hash alike, so every
cache of the runtime keyed by a popularity is keyed by what it is, not by which object holds it."""
from __future__ import annotations

import numpy as np

from .scenario import PopularitySpec


class Popularity(bytes):
    """One relabelling per MoE layer (``layers[g][i]``: the study's expert whose popularity expert i of
    layer g carries), as a hashable value: the relabellings' bytes themselves (so equal popularities are
    equal and hash alike, at the speed of bytes), carrying the layers' arrays. Iterates over its layers'
    arrays, which are never changed."""

    def __new__(cls, layers):
        layers = tuple(np.asarray(p, np.int64) for p in layers)
        self = super().__new__(cls, np.concatenate(layers).astype(np.int32).tobytes() if layers else b"")
        self.layers = layers
        return self

    def __reduce__(self):
        return Popularity, (self.layers,)

    def __iter__(self):
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, g: int) -> np.ndarray:
        return self.layers[g]

    def __bool__(self) -> bool:
        return bool(self.layers)

    @property
    def key(self) -> bytes:
        return bytes(self)

    @classmethod
    def identity(cls, sizes: list[int]) -> "Popularity":
        """The study's own popularity: no expert relabelled."""
        return cls([np.arange(n) for n in sizes])


def window_perms(spec: PopularitySpec, sizes: list[int], starts: list[float],
                 lengths: list[float]) -> list[Popularity]:
    """For each window, each layer's relabelling (``sizes``: experts per layer)."""
    if spec.drift == "rotate":          # one value per shift
        shifts = [int(np.floor(spec.rate_per_s * t + 1e-9)) for t in starts]
        values = {s: Popularity([(np.arange(n) + s) % n for n in sizes]) for s in set(shifts)}
        return [values[s] for s in shifts]
    current = [np.arange(n) for n in sizes]
    if spec.drift == "none":
        return [Popularity(current)] * len(starts)
    rng = np.random.default_rng(spec.seed)
    out = []
    for w, length in enumerate(lengths):
        if w:
            current = [p.copy() for p in current]
            for p in current:
                for _ in range(rng.poisson(spec.rate_per_s * lengths[w - 1])):
                    a, b = rng.choice(len(p), size=2, replace=False)
                    p[a], p[b] = p[b], p[a]
        out.append(Popularity(current))
    return out
