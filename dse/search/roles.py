"""The role encoding (``search.encoding: role``): one placement per role shared by every layer, plus
sparse per-layer deviations.

A per-layer study repeats each layer's units: DeepSeek-V3 per layer has 58 MoE layers of 256 routed
experts (14,972 placement units, twice as many genes). Its layers differ in which experts are hot, not
in how hot: every layer draws the same popularity shape (dse.model.tables' ``unit_selection``, a Zipf
law over a per-layer permutation). So a *role* is a unit's part in its layer: for routed experts the
r-th most selected expert of its layer (ties by index), for other per-layer units their name after the
layer (``L7.attn`` -> ``attn``); a unit in no layer (``embed``, ``lm_head``) is a role of its own. A
placement of the roles balanced in one layer is balanced in all.

Genotype, every gene an inclusive integer range (the search varies these; the evaluator still sees the
space's genes, built by `RoleEncoding.decode`):

===================  ==================  ====================================================
genes                range               meaning
===================  ==================  ====================================================
package genes        the space's         every gene of the space but ``place`` and ``copies``
place[role]          0 .. S_max-1        primary slot of every unit of the role
copies[role]         the space's         copies of every unit of the role
deviation[d].unit    0 .. M              the d-th deviating unit among the M units of shared
                                         roles; M: no deviation
deviation[d].slot    0 .. S_max-1        that unit's primary slot instead of its role's
===================  ==================  ====================================================

``D = 2 x S_max`` deviations (later ones win on one unit). `RoleEncoding.encode` folds a unit-gene
vector into a genotype: each role takes its units' most common slot and copies, and the D units that
differ and work the most become deviations (the rest follow their role: encoding is lossy when more
than D units deviate).
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ..model.tables import UNIT_KINDS

EXPERT = UNIT_KINDS.index("expert")
_LAYER = re.compile(r"L(\d+)\.(.+)")
#: deviations per chiplet slot of the largest mesh
DEVIATIONS_PER_SLOT = 2


def unit_roles(tables) -> tuple[np.ndarray, list[str]]:
    """Role index of every unit of ``tables`` (dse.model.tables.EvalTables) and the roles' names
    (module docstring)."""
    keys: list[str] = []
    for u, name in enumerate(tables.unit_names):
        match = _LAYER.fullmatch(name)
        keys.append(match.group(2) if match else name)
    experts: dict[str, list[int]] = defaultdict(list)
    for u, kind in enumerate(tables.unit_kind):
        if kind == EXPERT:
            experts[tables.unit_names[u].rpartition(".")[0]].append(u)
    for units in experts.values():
        q = np.asarray(tables.unit_selection, float)[units]
        for rank, i in enumerate(np.argsort(-q, kind="stable")):
            keys[units[i]] = f"expert#{rank}"
    names = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(names)}
    return np.array([index[k] for k in keys], np.int64), names


class RoleEncoding:
    """Genotype <-> the space's genes (module docstring). Built from the study's space and tables."""

    def __init__(self, space, tables):
        self.space_vars = space.n_var
        place, copies = space.slices["place"], space.slices["copies"]
        self.place = np.arange(place.start, place.stop)
        self.copies = np.arange(copies.start, copies.stop)
        keep = np.ones(space.n_var, bool)
        keep[self.place] = keep[self.copies] = False
        self.fixed = np.flatnonzero(keep)
        self.role, roles = unit_roles(tables)
        R = len(roles)
        size = np.bincount(self.role, minlength=R)
        self.deviable = np.flatnonzero(size[self.role] > 1)           # units of shared roles
        M = len(self.deviable)
        self.n_dev = min(M, DEVIATIONS_PER_SLOT * space.max_slots)
        first = np.zeros(R, np.int64)
        first[self.role[::-1]] = np.arange(len(self.role))[::-1]         # a unit of each role
        lo, hi = np.asarray(space.lower), np.asarray(space.upper)
        self.names = ([space.names[i] for i in self.fixed] + [f"place[{r}]" for r in roles]
                      + [f"copies[{r}]" for r in roles]
                      + [f"deviation[{d}].{part}" for d in range(self.n_dev) for part in ("unit", "slot")])
        self.lower = np.concatenate([lo[self.fixed], lo[self.place][first], lo[self.copies][first],
                                     np.tile([0, 0], self.n_dev)]).astype(np.int64)
        self.upper = np.concatenate([hi[self.fixed], hi[self.place][first], hi[self.copies][first],
                                     np.tile([M, space.max_slots - 1], self.n_dev)]).astype(np.int64)
        nf = len(self.fixed)
        self.role_place = slice(nf, nf + R)
        self.role_copies = slice(nf + R, nf + 2 * R)
        self.dev_unit = np.arange(nf + 2 * R, len(self.names), 2)
        self.dev_slot = self.dev_unit + 1
        self.unit_lower, self.unit_upper = lo, hi
        self.max_slots = space.max_slots
        self.categorical = np.zeros(len(self.names), bool)
        cat = getattr(space, "categorical", None)
        if cat is not None:
            self.categorical[:nf] = np.asarray(cat, bool)[self.fixed]

    @property
    def n_genes(self) -> int:
        return len(self.names)

    @property
    def n_var(self) -> int:
        """Genes of the genotype (what the search varies: the space's interface for dse.search.variables)."""
        return len(self.names)

    def decode(self, G: np.ndarray) -> np.ndarray:
        """The space's gene vectors of genotypes ``G`` ``[P, n_genes]``: vectorised over the population."""
        G = np.asarray(G, np.int64).reshape(-1, self.n_genes)
        X = np.empty((len(G), self.space_vars), np.int64)
        X[:, self.fixed] = G[:, : len(self.fixed)]
        X[:, self.place] = G[:, self.role_place][:, self.role]
        X[:, self.copies] = np.minimum(G[:, self.role_copies][:, self.role], self.unit_upper[self.copies])
        if self.n_dev:
            du, ds = G[:, self.dev_unit], G[:, self.dev_slot]
            rows, cols = np.nonzero(du < len(self.deviable))
            X[rows, self.place[self.deviable[du[rows, cols]]]] = ds[rows, cols]
        return np.clip(X, self.unit_lower, self.unit_upper)

    def encode(self, X: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
        """Genotypes of the space's gene vectors ``X`` (module docstring); ``work`` ranks deviating units
        (default: all alike, the first kept)."""
        X = np.asarray(X, np.int64).reshape(-1, self.space_vars)
        R = self.role_place.stop - self.role_place.start
        G = np.empty((len(X), self.n_genes), np.int64)
        G[:, : len(self.fixed)] = X[:, self.fixed]
        priority = np.zeros(len(self.role)) if work is None else -np.asarray(work, float)
        for p, x in enumerate(X):
            place, copies = x[self.place], x[self.copies]
            G[p, self.role_place] = _mode(self.role, place, R, self.max_slots)
            G[p, self.role_copies] = _mode(self.role, copies, R, int(copies.max()) + 1)
            differ = self.deviable[place[self.deviable] != G[p, self.role_place][self.role[self.deviable]]]
            differ = differ[np.argsort(priority[differ], kind="stable")][: self.n_dev]
            unit = np.full(self.n_dev, len(self.deviable))
            slot = np.zeros(self.n_dev, np.int64)
            unit[: len(differ)] = np.searchsorted(self.deviable, differ)
            slot[: len(differ)] = place[differ]
            G[p, self.dev_unit], G[p, self.dev_slot] = unit, slot
        return np.clip(G, self.lower, self.upper)


def _mode(role: np.ndarray, value: np.ndarray, roles: int, values: int) -> np.ndarray:
    """The most common ``value`` of each role (the smallest on a tie)."""
    counts = np.zeros((roles, values), np.int64)
    np.add.at(counts, (role, value), 1)
    return counts.argmax(axis=1)
