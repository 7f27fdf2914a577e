"""The cross-entropy method (Rubinstein 1999; de Boer et al., Annals of OR 2005) over masked categorical
policies: a learner without deep-learning dependencies for the environments of dse.rl.

The policy is one categorical distribution per step of an episode (open loop: step t draws from its
own distribution, restricted to the mask and renormalised; a step whose mass the mask removes entirely
draws uniformly among the allowed actions). Each iteration rolls out ``population`` episodes, keeps the
``elite`` fraction with the highest returns and moves every step's distribution towards the elites'
action frequencies by ``smoothing``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def masked_choice(p: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    """An action drawn from ``p`` restricted to ``mask`` (uniform among allowed ones if none has mass)."""
    w = np.where(mask, p, 0.0)
    total = w.sum()
    allowed = np.flatnonzero(mask)
    if total <= 0:
        return int(rng.choice(allowed))
    return int(rng.choice(len(w), p=w / total))


@dataclass
class CEMResult:
    best_actions: np.ndarray
    best_score: float
    evaluations: list[int] = field(default_factory=list)     # after each iteration
    best: list[float] = field(default_factory=list)           # best score so far
    mean: list[float] = field(default_factory=list)           # mean score of the iteration


def cross_entropy(rollout, steps: int, width: int, iterations: int, population: int = 48, elite: float = 0.2,
                  smoothing: float = 0.7, seed: int = 0) -> CEMResult:
    """Run the method; ``rollout(probs, n, rng) -> (actions [n, steps], scores [n])`` plays n episodes
    with the per-step distributions ``probs`` [steps, width] (see `mapping_rollout`, `env_rollout`)."""
    rng = np.random.default_rng(seed)
    probs = np.full((steps, width), 1.0 / width)
    k = max(1, int(round(elite * population)))
    result = CEMResult(best_actions=np.zeros(steps, np.int64), best_score=-np.inf)
    done = 0
    for _ in range(iterations):
        actions, scores = rollout(probs, population, rng)
        done += population
        top = np.argsort(-scores, kind="stable")[:k]
        if scores[top[0]] > result.best_score:
            result.best_score, result.best_actions = float(scores[top[0]]), actions[top[0]].copy()
        freq = np.zeros_like(probs)
        for a in actions[top]:
            freq[np.arange(steps), a] += 1.0 / k
        probs = (1.0 - smoothing) * probs + smoothing * freq
        result.evaluations.append(done)
        result.best.append(result.best_score)
        result.mean.append(float(np.mean(scores)))
    return result


def mapping_rollout(problem):
    """Rollouts of dse/ChipletMapping-v0's problem (dse.rl.mapping_env.MappingProblem), the episodes'
    designs evaluated together in one population call."""
    def rollout(probs, n, rng):
        actions = np.zeros((n, len(problem.sizes)), np.int64)
        X = []
        for i in range(n):
            x, state = problem.draw_package(rng)
            for u in range(len(problem.sizes)):
                a = masked_choice(probs[u], state.mask(), rng)
                state.place(a)
                actions[i, u] = a
            X.append(problem.vector(x, state.slot_of))
        return actions, problem.evaluate(np.array(X))[1]
    return rollout


def env_rollout(env):
    """Rollouts of any environment with ``action_masks()`` whose episodes take the same number of steps."""
    def rollout(probs, n, rng):
        actions = np.zeros((n, probs.shape[0]), np.int64)
        scores = np.zeros(n)
        for i in range(n):
            env.reset(seed=int(rng.integers(2**31)))
            done, t = False, 0
            while not done:
                a = masked_choice(probs[t], env.action_masks(), rng)
                step = env.step(a)          # Gymnasium: (observation, reward, terminated, truncated, info)
                reward, done = step[1], step[2]
                actions[i, t] = a
                scores[i] += reward
                t += 1
        return actions, scores
    return rollout
