"""A Gymnasium view of the cluster scheduler for single-agent learners: one policy for every node
(parameter sharing), one node's decision a step.

PettingZoo's conversions (pettingzoo.utils.conversions) turn a ParallelEnv into an AEC one, not into a
Gymnasium environment a single-agent learner such as Stable-Baselines3's DQN can train on; this wrapper is
that view. A round visits, in index order, the nodes that have more than ``keep`` allowed; each Gymnasium
step applies the visited node's action at once (dse.rl.cluster_sim.ClusterSim.act), so the next node
observes it, and an action the mask does not allow is kept as ``keep`` (``info["masked_action"]``). When
the round ends the cluster runs the interval (re-sharding priced once for the round); intervals in which
no node has a choice run on their own. The reward of a step is the team reward (dse.rl.cluster_reward)
of the intervals its action closed, 0 otherwise, so an episode's return is the sum of the team's
rewards, as one agent's return in the parallel environment. ``action_masks()`` serves sb3-contrib's MaskablePPO.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from .cluster_reward import reward, step_terms


class ClusterGymView(gym.Env):
    """Gymnasium environment of one node's decisions at a time (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, env):
        self.env = env
        self.observation_space = env.observation_space(env.possible_agents[0])["observation"]
        self.action_space = env.action_space(env.possible_agents[0])
        self.node = -1
        self._masks = None
        self._obs = None

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self.env.reset(seed=seed)
        self.episode_return = 0.0
        self._next_round(first=True)
        return self._obs[self.node].copy(), {"action_mask": self.action_masks()}

    def action_masks(self) -> np.ndarray:
        return self._masks[self.node].astype(bool)

    def _refresh(self) -> None:
        obs, self._masks = self.env.observe()
        self._obs = np.stack([o["observation"] for o in obs.values()]) if obs else None

    def _choosers(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self._masks.sum(axis=1) > 1) if i > self.node]

    def _next_round(self, first: bool = False) -> tuple[float, bool]:
        """Run intervals until some node has a choice (or the episode ends); (reward, done)."""
        env, sim = self.env, self.env.sim
        total = 0.0
        if not first:
            sim.end()
            total += self._interval()
        while True:
            if not env.agents:
                return total, True
            self._refresh()
            self.node = -1
            choosers = self._choosers()
            if choosers:
                self.node = choosers[0]
                sim.begin()
                return total, False
            sim.begin()
            sim.end()
            total += self._interval()

    def _interval(self) -> float:
        env = self.env
        terms = step_terms(env.sim.advance(), env.total_priority, env.N * env.system.gpus_per_node,
                           env.reference_w, env.interval_s)
        env.steps += 1
        if env.sim.finished or env.steps >= env.max_steps:
            env.agents = []
        return reward(terms, env.weights)

    def step(self, action):
        env, sim = self.env, self.env.sim
        a, info = int(action), {}
        if not (0 <= a < env.n_actions and self._masks[self.node, a]):
            info["masked_action"], a = a, 0
        sim.act(self.node, a, sim.queue[:env.W], sim.running[:env.R])
        self._refresh()
        rest = self._choosers()
        if rest:
            self.node = rest[0]
            return self._obs[self.node].copy(), 0.0, False, False, {**info, "action_mask": self.action_masks()}
        r, done = self._next_round()
        self.episode_return += r
        truncated = done and not sim.finished
        obs = np.zeros(self.observation_space.shape, np.float32) if done else self._obs[self.node].copy()
        if done:
            info["metrics"] = sim.metrics()
            return obs, r, not truncated, truncated, info
        return obs, r, False, False, {**info, "action_mask": self.action_masks()}
