"""``dse/TrainingPartition-v0``: choose how a model trains on a system, one parallel degree per step.

Decisions in order: for a mixture-of-experts model the expert-parallel degree, then the tensor-parallel
degree, pipeline degree, micro-batch and interleaved chunks per stage (the data-parallel degree is what
the devices leave; layers split evenly over the stages, as dse.training models them). An action picks the i-th value of the
current decision's options; the mask allows exactly the values some valid strategy shares with the
choices so far (the strategies `dse train --search` enumerates: dse.training.search.candidates), so
every episode ends on a strategy the model, system and batch can run. The final reward is minus the
iteration time in seconds (dse.training.iteration), and for a strategy that does not fit the devices'
memory minus ``OVER_MEMORY`` times that time, times (1 + the fraction it is over); every other reward is
0, so an episode's return is the final strategy's score. A masked action is replaced by the first
allowed value (reported in ``info["masked_action"]``).

Observation: ``decision`` (one-hot of the decisions), ``chosen`` (log2 of each value chosen so far, 0 before),
``model`` (log2 of devices, layers, heads, hidden, global batch, sequence).
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import workloads

from ..errors import StudyError
from ..training import load_system
from ..training.iteration import iteration, layer_costs
from ..training.search import candidates

DECISIONS = ("tp", "pp", "micro_batch", "interleave")
#: how much worse than its iteration time a strategy that does not fit scores
OVER_MEMORY = 10.0


class TrainingPartitionEnv(gym.Env):
    """Gymnasium environment of a training strategy (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, model: str = "llama-2-7b", system: str = "dgx-a100-80gb", devices: int = 16,
                 global_batch: int = 128, seq: int = 4096, recompute: str = "none", zero: int = 0):
        for key, value, high in (("devices", devices, 131_072), ("global_batch", global_batch, 1 << 20),
                                 ("seq", seq, 10_000_000)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= high:
                raise StudyError(f"must be a whole number from 1 to {high:,}, got {value!r}", key=key)
        try:
            self.cfg = workloads.load_model(model)
        except workloads.WorkloadError as exc:
            raise StudyError(str(exc), key="model") from None
        self.system = load_system(system, flag="system")
        self.strategies = []
        for ep in ([e for e in range(1, self.cfg.experts + 1) if self.cfg.experts % e == 0 and e <= devices]
                   if self.cfg.experts else [1]):
            try:
                self.strategies += candidates(self.cfg, int(devices), int(global_batch), int(seq),
                                              dict(recompute=recompute, zero=zero, ep=ep))
            except StudyError:
                continue
        if not self.strategies:
            raise StudyError(f"no strategy of {devices} devices runs {model} with global batch {global_batch}",
                             key="devices")
        self.decisions = (("ep",) if self.cfg.experts else ()) + DECISIONS
        self.values = {d: sorted({getattr(s, d) for s in self.strategies}) for d in self.decisions}
        self.width = max(len(v) for v in self.values.values())
        self.action_space = spaces.Discrete(self.width)
        self.observation_space = spaces.Dict({
            "decision": spaces.Box(0.0, 1.0, (len(self.decisions),), np.float32),
            "chosen": spaces.Box(0.0, 64.0, (len(self.decisions),), np.float32),
            "model": spaces.Box(0.0, 64.0, (6,), np.float32)})
        self._model = np.log2(np.array([devices, self.cfg.layers, self.cfg.heads, self.cfg.hidden, global_batch,
                                        seq], np.float32))
        self._costs: dict = {}
        self.chosen: dict[str, int] = {}

    # --- the decisions -------------------------------------------------------------------------------
    def _consistent(self):
        return [s for s in self.strategies if all(getattr(s, k) == v for k, v in self.chosen.items())]

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(self.width, bool)
        if len(self.chosen) == len(self.decisions):
            return mask
        d = self.decisions[len(self.chosen)]
        allowed = {getattr(s, d) for s in self._consistent()}
        for i, v in enumerate(self.values[d]):
            mask[i] = v in allowed
        return mask

    def _observe(self) -> dict:
        decision = np.zeros(len(self.decisions), np.float32)
        if len(self.chosen) < len(self.decisions):
            decision[len(self.chosen)] = 1.0
        chosen = np.array([math.log2(self.chosen[d]) if d in self.chosen else 0.0 for d in self.decisions],
                          np.float32)
        return {"decision": decision, "chosen": chosen, "model": self._model.copy()}

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self.chosen = {}
        return self._observe(), {"action_mask": self.action_masks()}

    def step(self, action):
        mask = self.action_masks()
        action = int(action)
        info = {}
        if not (0 <= action < self.width and mask[action]):
            info["masked_action"] = action
            action = int(np.flatnonzero(mask)[0])
        d = self.decisions[len(self.chosen)]
        self.chosen[d] = self.values[d][action]
        done = len(self.chosen) == len(self.decisions)
        reward = 0.0
        if done:
            strategy = self._consistent()[0]
            reward, it = self.score(strategy)
            info.update(strategy=strategy, iteration_s=it.iteration_s, fits=it.fits)
            info["action_mask"] = np.zeros(self.width, bool)
        else:
            info["action_mask"] = self.action_masks()
        return self._observe(), reward, done, False, info

    def score(self, strategy):
        """(reward, iteration) of a strategy (module docstring)."""
        key = (strategy.tp, strategy.micro_batch, strategy.ep)
        if key not in self._costs:
            self._costs[key] = layer_costs(self.cfg, self.system, strategy)
        it = iteration(self.cfg, self.system, strategy, self._costs[key])
        if it.fits:
            return -it.iteration_s, it
        over = max(it.memory_per_device_bytes / self.system.memory_bytes - 1.0, 0.0)
        return -OVER_MEMORY * it.iteration_s * (1.0 + over), it
