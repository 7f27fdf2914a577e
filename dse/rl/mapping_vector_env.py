"""``gymnasium.make_vec("dse/ChipletMapping-v0", num_envs=N)``: N placements stepped together.

Every episode of a study places the same number of units, so the N episodes end on the same step and
their designs are evaluated in one population call of the study's evaluator (the call the search makes),
not N calls. Episodes reset on the step they end (gymnasium's SAME_STEP autoreset): the observation
returned is the next episode's first, the finished one's is in ``info["final_obs"]``.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from .mapping_env import MappingProblem


class ChipletMappingVectorEnv(VectorEnv):
    """N placement episodes of one study in lockstep (module docstring)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 8, study="studies/quickstart.yaml", weights: dict | None = None,
                 package="random", problem: MappingProblem | None = None):
        self.problem = problem or MappingProblem(study, weights, package)
        self.num_envs = int(num_envs)
        self.single_observation_space = self.problem.observation_space()
        self.single_action_space = spaces.Discrete(self.problem.S)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.rng = np.random.default_rng()
        self.states, self.packages = [], []

    def reset(self, *, seed: int | None = None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        drawn = [self.problem.draw_package(self.rng) for _ in range(self.num_envs)]
        self.packages = [x for x, _ in drawn]
        self.states = [s for _, s in drawn]
        for s in self.states:
            s.time, s.bytes = np.zeros(self.problem.S), np.zeros(self.problem.S)
        return self._observe(), {"action_mask": self.action_masks()}

    def action_masks(self) -> np.ndarray:
        return np.stack([s.mask() for s in self.states])

    def _observe(self):
        obs = [self.problem.observe(s) for s in self.states]
        out = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, obs, out)

    def step(self, actions):
        actions = np.asarray(actions, np.int64).reshape(self.num_envs)
        masks = self.action_masks()
        for i, (state, a) in enumerate(zip(self.states, actions)):
            if not masks[i, a]:
                raise ValueError(f"env {i}: action {a} is masked out")
            u = state.step
            state.place(int(a))
            state.time[a] += self.problem.time[u, state.kind[a]]
            state.bytes[a] += self.problem.sizes[u]
        rewards = np.zeros(self.num_envs)
        done = self.states[0].step == len(self.problem.sizes)
        terminated = np.full(self.num_envs, done)
        truncated = np.zeros(self.num_envs, bool)
        info = {}
        if done:
            X = np.array([self.problem.vector(x, s.slot_of) for x, s in zip(self.packages, self.states)])
            metrics, scores = self.problem.evaluate(X)
            rewards[:] = scores
            info["final_obs"] = self._observe()
            info["final_info"] = {"designs": X, "score": scores, "metrics": metrics}
            obs, reset_info = self.reset()
            info["action_mask"] = reset_info["action_mask"]
            return obs, rewards, terminated, truncated, info
        info["action_mask"] = self.action_masks()
        return self._observe(), rewards, terminated, truncated, info
