"""``dse/ChipletMapping-v0``: place a study's workload units on a chiplet package, one unit per step.

At reset a package (mesh, chiplet kinds, HBM, DDR) is drawn from the study's design space (``package=
"random"``), or is the first heuristic seed's (``"seed"``), or a given gene vector. Units come largest
first; an action is the chiplet slot for the current unit, masked to slots that keep the placement
feasible (dse.rl.placement_state). When the last unit is placed the design is evaluated by the study's
evaluator and the reward is its score (dse.rl.scoring); every other reward is 0, so an episode's return
is the final design's score.

Observation (fixed shapes; ``S`` slots of the study's largest mesh, ``K`` chiplet kinds):

* ``slots`` [S, 4 + K]: slot exists, HBM stacks / the study's most, free HBM and placed bytes (over the
  model's bytes), compute time placed (over the model's), then the kind one-hot;
* ``unit`` [3 + K + kinds of unit]: its bytes and KV bytes (over the model's), its place in the order,
  its time on each chiplet kind (over its fastest), its unit kind one-hot;
* ``traffic`` [S]: bytes per step between the unit and the units already on each slot (over its total).

``action_masks()`` returns the mask (sb3-contrib's MaskablePPO reads it); ``info["action_mask"]`` too.
A masked action is replaced by the greedy's (the allowed slot with the most free HBM) and reported in
``info["masked_action"]``, so any action keeps the design feasible.
"""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import scipy.sparse as sp
from gymnasium import spaces

from ..errors import StudyError
from ..model.objectives import constraint_matrix
from ..model.tables import UNIT_KINDS
from ..study.spec import Study, load_study
from ..system.prepare import prepare
from .placement_state import PlacementState
from .scoring import Scorer

#: random feasible placements whose range sets each objective's scale (dse.rl.scoring)
REFERENCE_DESIGNS = 32
#: placement units an episode may place (see the check in `MappingProblem`)
MAX_UNITS = 2048
#: packages drawn at reset before giving up on a study whose packages cannot hold the model
MAX_DRAWS = 500


def prepared_study(study):
    """A prepared study from a path, a `Study` or a prepared study (one package: no system section)."""
    if isinstance(study, (str, Path)):
        study = load_study(study)
    p = prepare(study) if isinstance(study, Study) else study
    if p.study.system is not None or p.study.workload.phase not in ("prefill", "decode"):
        raise StudyError("dse/ChipletMapping-v0 places the units of one package's step: give a study without a "
                         "system section, phase prefill or decode", key="study")
    return p


class MappingProblem:
    """What the environments share: the study's tables and space, units in placement order, the scorer."""

    def __init__(self, study, weights: dict[str, float] | None = None, package="random"):
        self.prepared = p = prepared_study(study)
        self.study, t, self.space = p.study, p.tables, p.space
        if p.variants:
            raise StudyError("dse/ChipletMapping-v0 needs one package variant: give one topology, link and memory "
                             "kind", key="hardware.package")
        if self.space.split:
            raise StudyError("dse/ChipletMapping-v0 places whole units: a one-to-many mapping shards them",
                             key="mapping.kind")
        if t.n_units > MAX_UNITS:
            raise StudyError(f"{t.n_units:,} placement units; dse/ChipletMapping-v0 places at most {MAX_UNITS:,} (its "
                             "masks' feasibility check grows with units^2 x slots^2: 8 ms an episode at 290 units on "
                             "16 slots); pool the experts (workload.per_layer: false)", key="workload.per_layer")
        sizes = (t.unit_capacity_bytes + t.unit_kv_bytes).astype(float)
        self.order = np.argsort(-sizes, kind="stable")                 # largest first
        self.sizes = sizes[self.order]
        self.experts = (t.unit_kind[self.order] == UNIT_KINDS.index("expert"))
        self.one_to_one = bool(self.space.exclusive_experts)
        self.hbm_bytes = float(t.hbm.capacity_bytes) if t.hbm else 0.0
        self.ddr_bytes = float(t.ddr.capacity_bytes) if t.ddr else 0.0
        self.S, self.K = self.space.max_slots, len(t.kind_names)
        time = t.unit_time_s[self.order] * t.stage_repeat[t.unit_stage[self.order]][:, None]
        self.time = time
        self.total_bytes = max(float(sizes.sum()), 1.0)
        self.total_time = max(float(time.min(axis=1).sum()), 1e-30)
        traffic = sp.coo_matrix((t.edge_bytes * t.edge_repeat, (t.edge_src, t.edge_dst)),
                                shape=(t.n_units, t.n_units)).tocsr()
        traffic = (traffic + traffic.T).tocsr()
        self.traffic = traffic[self.order][:, self.order].tocsr()       # in placement order
        self.max_stacks = max(int(self.space.upper[self.space.slices["hbm"]][0]), 1)
        self.package_mode = package
        self.screened: dict[bytes, bool] = {}
        self.base = self._base_vector(package)
        self.scorer = None
        self.scorer = Scorer(self.study, self.reference_metrics(np.random.default_rng(0)), weights)

    # --- packages ------------------------------------------------------------------------------------
    def _base_vector(self, package) -> np.ndarray | None:
        if isinstance(package, str):
            if package == "random":
                return None
            if package == "seed":
                if self.space.seeds is None or not len(self.space.seeds):
                    raise StudyError("the study has no heuristic seed design", key="package")
                return np.array(self.space.seeds[0], np.int64)
            raise StudyError(f"package {package!r}; allowed: random, seed or a gene vector", key="package")
        x = np.asarray(package, np.int64)
        if x.shape != (self.space.n_var,) or (x < self.space.lower).any() or (x > self.space.upper).any():
            raise StudyError(f"a package gene vector has {self.space.n_var} genes within the study's bounds",
                             key="package")
        return x

    def draw_package(self, rng: np.random.Generator) -> tuple[np.ndarray, PlacementState]:
        """A package gene vector and its empty placement state; random packages are redrawn until their
        memory can hold the model and the package meets the study's budgets and the reticle."""
        for _ in range(MAX_DRAWS if self.base is None else 1):
            x = self.base.copy() if self.base is not None else rng.integers(self.space.lower, self.space.upper + 1)
            state = self.state_for(x)
            if state.feasible_start() and self.package_ok(x):
                return x, self.state_for(x)
        raise StudyError("no package drawn from the study's space holds the model's weights and KV cache within "
                         "the study's budgets; raise the HBM or DDR ranges or the budgets", key="package")

    def package_ok(self, x: np.ndarray) -> bool:
        """Whether the package meets the budgets and the reticle (placement-independent constraints),
        judged on its greedy placement; one evaluation per package, remembered."""
        key = x[: self.space.slices["place"].start].tobytes()
        if key not in self.screened:
            state = self.state_for(x)
            for _ in range(len(self.sizes)):
                state.place(self.greedy_slot(state, state.mask()))
            metrics = self.prepared.evaluator(self.vector(x, state.slot_of)[None, :])
            G = constraint_matrix(metrics, self.study)[0]
            # all but memory, unplaced experts and copies without memory (the placement's)
            self.screened[key] = bool((G[3:] <= 0).all())
        return self.screened[key]

    def greedy_slot(self, state: PlacementState, mask: np.ndarray) -> int:
        """The allowed slot with the most free HBM (the rule that keeps a placement completable)."""
        allowed = np.flatnonzero(mask)
        return int(allowed[np.argmax(state.free[allowed])])

    def state_for(self, x: np.ndarray) -> PlacementState:
        d = self.prepared.evaluator.decode(x[None, :])
        n = int(d.chiplets[0])
        capacity = np.zeros(self.S)
        capacity[:n] = d.stacks[0, :n] * self.hbm_bytes
        state = PlacementState(capacity, float(d.ddr[0]) * self.ddr_bytes, n, self.sizes, self.experts, self.one_to_one)
        state.kind = d.kind[0]
        state.stacks = d.stacks[0]
        state.time = np.zeros(self.S)
        state.bytes = np.zeros(self.S)
        return state

    # --- designs -------------------------------------------------------------------------------------
    def vector(self, x: np.ndarray, slot_of: np.ndarray) -> np.ndarray:
        """The design's gene vector: the package's genes, each unit on its slot, one copy."""
        x = x.copy()
        sl = self.space.slices
        place = np.empty(len(slot_of), np.int64)
        place[self.order] = slot_of
        x[sl["place"]] = place
        x[sl["copies"]] = 1
        return x

    def evaluate(self, X: np.ndarray):
        """Metrics (DataFrame) and scores of designs, one population call of the study's evaluator."""
        metrics = self.prepared.evaluator(np.asarray(X, np.int64))
        return metrics, (self.scorer.score(metrics) if self.scorer is not None else None)

    def reference_metrics(self, rng: np.random.Generator):
        X = [self.vector(*self.random_episode(rng)) for _ in range(REFERENCE_DESIGNS)]
        return self.evaluate(np.array(X))[0]

    def random_episode(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(package genes, slots) of one episode with uniformly random allowed actions."""
        x, state = self.draw_package(rng)
        for _ in range(len(self.sizes)):
            state.place(int(rng.choice(np.flatnonzero(state.mask()))))
        return x, state.slot_of

    # --- observations --------------------------------------------------------------------------------
    def observation_space(self) -> spaces.Dict:
        width = 3 + self.K + len(UNIT_KINDS)
        return spaces.Dict({
            "slots": spaces.Box(-np.inf, np.inf, (self.S, 4 + self.K), np.float32),
            "unit": spaces.Box(-np.inf, np.inf, (width,), np.float32),
            "traffic": spaces.Box(0.0, np.inf, (self.S,), np.float32)})

    def observe(self, state: PlacementState) -> dict:
        u = min(state.step, len(self.sizes) - 1)
        slots = np.zeros((self.S, 4 + self.K), np.float32)
        slots[: state.n, 0] = 1.0
        slots[:, 1] = state.stacks / self.max_stacks
        slots[:, 2] = np.where(np.arange(self.S) < state.n, state.free / self.total_bytes, 0.0)
        slots[:, 3] = state.time / self.total_time
        slots[np.arange(state.n), 4 + state.kind[: state.n]] = 1.0
        unit = np.zeros(3 + self.K + len(UNIT_KINDS), np.float32)
        t = self.prepared.tables
        original = self.order[u]
        unit[0] = self.sizes[u] / self.total_bytes
        unit[1] = t.unit_kv_bytes[original] / self.total_bytes
        unit[2] = u / max(len(self.sizes) - 1, 1)
        fastest = max(float(self.time[u].min()), 1e-30)
        unit[3: 3 + self.K] = self.time[u] / fastest
        unit[3 + self.K + int(t.unit_kind[original])] = 1.0
        traffic = np.zeros(self.S, np.float32)
        row = self.traffic[u]
        placed = state.slot_of[row.indices]
        keep = placed >= 0
        if keep.any():
            traffic += np.bincount(placed[keep], weights=row.data[keep], minlength=self.S).astype(np.float32)
        total = float(row.data.sum())
        return {"slots": slots, "unit": unit, "traffic": traffic / total if total > 0 else traffic}


class ChipletMappingEnv(gym.Env):
    """Gymnasium environment of one package's placement (module docstring). ``study``: a study file, a
    `dse.Study` or a prepared study; ``weights``: objective -> weight of the score; ``package``: random,
    seed or a gene vector."""

    metadata = {"render_modes": []}

    def __init__(self, study="studies/quickstart.yaml", weights: dict | None = None, package="random",
                 problem: MappingProblem | None = None):
        self.problem = problem or MappingProblem(study, weights, package)
        self.observation_space = self.problem.observation_space()
        self.action_space = spaces.Discrete(self.problem.S)
        self.state = None
        self.x = None
        self.last_metrics = None

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self.x, self.state = self.problem.draw_package(self.np_random)
        mask = self.state.mask()
        return self.problem.observe(self.state), {"action_mask": mask}

    def action_masks(self) -> np.ndarray:
        return self.state.mask()

    def step(self, action):
        action = int(action)
        mask = self.state.mask()
        info = {}
        if not (0 <= action < self.problem.S and mask[action]):      # a masked action: the greedy's choice
            info["masked_action"] = action
            action = self.problem.greedy_slot(self.state, mask)
        u = self.state.step
        self.state.place(action)
        self.state.time[action] += self.problem.time[u, self.state.kind[action]]
        self.state.bytes[action] += self.problem.sizes[u]
        done = self.state.step == len(self.problem.sizes)
        reward = 0.0
        if done:
            metrics, score = self.problem.evaluate(self.design_vector()[None, :])
            self.last_metrics = metrics.iloc[0]
            reward = float(score[0])
            info["metrics"] = self.last_metrics.to_dict()
            info["action_mask"] = np.zeros(self.problem.S, bool)
        else:
            info["action_mask"] = self.state.mask()
        return self.problem.observe(self.state), reward, done, False, info

    def design_vector(self) -> np.ndarray:
        """The gene vector of the design built so far (complete once the episode ends)."""
        return self.problem.vector(self.x, self.state.slot_of)

    def design(self):
        """The finished design as a `dse.Design`."""
        return self.problem.prepared.evaluator.designs(self.design_vector()[None, :])[0]
