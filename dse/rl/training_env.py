"""``dse/TrainingPartition-v0``: choose how a model trains on a system, one parallel degree per step.

Decisions in order: for a mixture-of-experts model the expert-parallel degree, then the tensor-parallel
degree, pipeline degree, micro-batch and interleaved chunks per stage (the data-parallel degree is what
the devices leave; layers split evenly over the stages, as dse.training models them). An action picks the i-th value of the
current decision's options; the mask allows exactly the values some valid strategy shares with the
choices so far (the strategies `dse train --search` enumerates: dse.training.search.candidates), so
every episode ends on a strategy the model, system and batch can run. The final reward is minus a cost
in seconds, and for a strategy that does not fit the devices' memory minus ``OVER_MEMORY`` times that
cost, times (1 + the fraction it is over); every other reward is 0, so an episode's return is the final
strategy's score. A masked action is replaced by the first allowed value (reported in
``info["masked_action"]``).

The cost, with ``reward_weights`` w (dse.rl.reward_weights) and the iteration's time T, energy E (the
whole system's joules per iteration, the power limit's clock included: dse.training.energy) and model
FLOP utilisation U (MFU), all from dse.training.iteration as `dse train` computes them::

    cost = w_time T + w_energy T_ref E / E_ref + w_utilisation T_ref (1 - U) / (1 - U_ref)

with the reference the environment's first strategy (the smallest value of every decision: the episode
of masked actions). Each term is its quantity relative to the reference's, in the reference's seconds:
weights 1 and 1 trade a 1 % longer iteration against 1 % more energy per iteration (the batch is fixed,
so per token too). The default weights (time 1) give exactly minus the iteration time.

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
from .reward_weights import reward_weights as parse_weights

DECISIONS = ("tp", "pp", "micro_batch", "interleave")
#: how much worse than its iteration time a strategy that does not fit scores
OVER_MEMORY = 10.0


class TrainingPartitionEnv(gym.Env):
    """Gymnasium environment of a training strategy (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, model: str = "llama-2-7b", system: str = "dgx-a100-80gb", devices: int = 16,
                 global_batch: int = 128, seq: int = 4096, recompute: str = "none", zero: int = 0,
                 reward_weights: dict | None = None):
        self.weights = parse_weights(reward_weights)
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
        self.reference = None           # (T, E, 1 - U) of the first strategy, when a weight needs it
        if self.weights["energy"] or self.weights["utilisation"]:
            it = self._iteration(self.strategies[0])
            self.reference = (it.iteration_s, it.energy_j, max(1.0 - it.mfu, 1e-9))

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
            info.update(strategy=strategy, iteration_s=it.iteration_s, fits=it.fits, energy_j=it.energy_j,
                        mfu=it.mfu, clock_fraction=it.clock_fraction)
            info["action_mask"] = np.zeros(self.width, bool)
        else:
            info["action_mask"] = self.action_masks()
        return self._observe(), reward, done, False, info

    def _iteration(self, strategy):
        key = (strategy.tp, strategy.micro_batch, strategy.ep)
        if key not in self._costs:
            self._costs[key] = layer_costs(self.cfg, self.system, strategy)
        return iteration(self.cfg, self.system, strategy, self._costs[key])

    def cost(self, it) -> float:
        """The weighted cost in seconds of an iteration (module docstring)."""
        w = self.weights
        cost = w["time"] * it.iteration_s
        if self.reference is not None:
            t_ref, e_ref, idle_ref = self.reference
            cost += w["energy"] * t_ref * it.energy_j / e_ref + w["utilisation"] * t_ref * (1.0 - it.mfu) / idle_ref
        return cost

    def score(self, strategy):
        """(reward, iteration) of a strategy (module docstring)."""
        it = self._iteration(strategy)
        if it.fits:
            return -self.cost(it), it
        over = max(it.memory_per_device_bytes / self.system.memory_bytes - 1.0, 0.0)
        return -OVER_MEMORY * self.cost(it) * (1.0 + over), it
