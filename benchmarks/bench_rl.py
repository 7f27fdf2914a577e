"""Reinforcement learning against the search and the heuristics at equal numbers of evaluations (issue 21).

dse/ChipletMapping-v0 on studies/quickstart.yaml, the package fixed to the study's first heuristic seed
(``package="seed"``), every method scored by the environment's scalarised objectives (dse.rl.scoring,
higher is better) with the same budget of evaluations of the study's evaluator:

* the study's heuristic seed designs (dse.model.heuristics; each on its own package) and the greedy rule
  of the action masks on the fixed package;
* uniformly random allowed placements;
* the cross-entropy method (dse.rl.cem), 48 episodes per iteration;
* NSGA-II over the placement genes with the package's genes fixed (the search's own operators,
  dse.search.variables), population 48; its best design by the same score;
* MaskablePPO (sb3-contrib, `pip install -e '.[rl]'`), if installed: trained for the budget's episodes,
  then its deterministic policy's design (one more evaluation).

dse/TrainingPartition-v0 (Llama-2-70B, 64 A100s, global batch 512, sequence 4,096, full
recomputation): the cross-entropy
method, random strategies and (if installed) MaskablePPO against the exhaustive search over all of them.

Prints two markdown tables (docs/rl.md has them); ``--budget`` sets the evaluations (default 1,440).
"""
from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import gymnasium as gym
import numpy as np

from dse.model.objectives import constraint_matrix, objective_matrix
from dse.rl.cem import cross_entropy, env_rollout, mapping_rollout
from dse.rl.mapping_env import ChipletMappingEnv, MappingProblem
from dse.rl.training_env import TrainingPartitionEnv
from dse.search.algorithms import make_algorithm
from dse.training.search import fastest

POPULATION = 48
TRAINING = dict(model="llama-2-70b", system="dgx-a100-80gb", devices=64, global_batch=512, seq=4096, recompute="full")


def nsga2_placement(problem: MappingProblem, budget: int, seed: int = 0) -> tuple[float, int]:
    """Best score NSGA-II finds over the placement genes of the fixed package, and evaluations used."""
    from pymoo.core.problem import Problem
    from pymoo.optimize import minimize

    space = problem.space
    x0 = problem.base
    n = int(problem.state_for(x0).n)
    lower, upper = x0.copy(), x0.copy()
    place = space.slices["place"]
    lower[place], upper[place] = 0, n - 1
    sub = dataclasses.replace(space, lower=lower, upper=upper, seeds=None)
    study = problem.study
    seen = []

    class Placement(Problem):
        def __init__(self):
            super().__init__(n_var=space.n_var, n_obj=len(study.search.objectives), n_ieq_constr=len(
                constraint_matrix(problem.evaluate(x0[None, :])[0], study)[0]), xl=lower, xu=upper, vtype=int)

        def _evaluate(self, X, out, *args, **kwargs):
            X = np.clip(np.rint(X).astype(np.int64), lower, upper)
            metrics, scores = problem.evaluate(X)
            seen.append(scores)
            out["F"] = objective_matrix(metrics, study.search.objectives)
            out["G"] = constraint_matrix(metrics, study)

    algorithm, _ = make_algorithm("nsga2", sub, len(study.search.objectives), POPULATION, budget // POPULATION)
    minimize(Placement(), algorithm, ("n_gen", budget // POPULATION), seed=seed, verbose=False)
    scores = np.concatenate(seen)
    return float(scores.max()), len(scores)


class EpisodeScores(gym.Wrapper):
    """Remembers every finished episode's return (the design's score), as the other methods' best-of."""

    def __init__(self, env):
        super().__init__(env)
        self.scores: list[float] = []

    def action_masks(self):
        return self.env.action_masks()

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            self.scores.append(float(reward))
        return obs, reward, terminated, truncated, info


def maskable_ppo(make_env, budget_episodes: int, steps_per_episode: int, seed: int = 0):
    """Rows for MaskablePPO (best design met in training, the trained policy's design) or none without
    sb3-contrib."""
    try:
        from sb3_contrib import MaskablePPO
    except ImportError:
        return [("MaskablePPO: sb3-contrib not installed (pip install -e '.[rl]')", np.nan, 0)]
    env = EpisodeScores(make_env())
    model = MaskablePPO("MultiInputPolicy", env, n_steps=max(64, steps_per_episode * 8), batch_size=64,
                        seed=seed, verbose=0)
    model.learn(total_timesteps=budget_episodes * steps_per_episode)
    trained = len(env.scores)
    obs, _ = env.reset(seed=seed)
    done, score = False, 0.0
    while not done:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        obs, reward, done, _, _ = env.step(int(action))
        score += reward
    return [("MaskablePPO (sb3-contrib), best design met in training", max(env.scores[:trained]), trained),
            ("MaskablePPO, the trained policy's design", score, trained + 1)]


def mapping_table(budget: int) -> list[tuple[str, float, int]]:
    problem = MappingProblem("studies/quickstart.yaml", package="seed")
    rows = []
    seeds = problem.space.seeds
    rows.append(("heuristic seeds (their own packages)", float(problem.evaluate(seeds)[1].max()), len(seeds)))
    state = problem.state_for(problem.base)
    for _ in range(len(problem.sizes)):
        state.place(problem.greedy_slot(state, state.mask()))
    rows.append(("greedy mask rule (most free HBM)", float(problem.evaluate(
        problem.vector(problem.base, state.slot_of)[None, :])[1][0]), 1))
    rng = np.random.default_rng(0)
    X = [problem.vector(*problem.random_episode(rng)) for _ in range(budget)]
    rows.append(("random allowed placements", float(problem.evaluate(np.array(X))[1].max()), budget))
    cem = cross_entropy(mapping_rollout(problem), len(problem.sizes), problem.S, budget // POPULATION, POPULATION)
    rows.append(("cross-entropy method (dse.rl.cem)", cem.best_score, cem.evaluations[-1]))
    best, used = nsga2_placement(problem, budget)
    rows.append(("NSGA-II, placement genes", best, used))
    rows += maskable_ppo(lambda: ChipletMappingEnv(problem=problem), budget, len(problem.sizes))
    return rows


def training_table(budget: int) -> list[tuple[str, float, int]]:
    env = TrainingPartitionEnv(**TRAINING)
    rows = []
    s, it, tried = fastest(env.cfg, env.system, TRAINING["devices"], TRAINING["global_batch"], TRAINING["seq"],
                           dict(recompute=TRAINING["recompute"], zero=0))
    rows.append(("exhaustive (dse train --search)", -it.iteration_s, tried))
    rng = np.random.default_rng(0)
    best = max(env.score(env.strategies[i])[0] for i in rng.integers(len(env.strategies), size=budget))
    rows.append(("random strategies", best, budget))
    population = max(4, budget // 6)
    cem = cross_entropy(env_rollout(env), 4, env.width, max(1, budget // population), population)
    rows.append(("cross-entropy method (dse.rl.cem)", cem.best_score, cem.evaluations[-1]))
    rows += maskable_ppo(lambda: TrainingPartitionEnv(**TRAINING), budget, 4)
    return rows


def markdown(title: str, unit: str, rows) -> str:
    lines = [f"**{title}**", "", f"| method | best {unit} | evaluations |", "|---|---|---|"]
    lines += [f"| {name} | {score:.4g} | {n:,} |" for name, score, n in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1440, help="evaluations per method, placement")
    parser.add_argument("--training-budget", type=int, default=96, help="evaluations per method, training "
                        "(a quarter of the strategies there are: exhaustive search is cheap here)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.process_time()
    print(markdown("dse/ChipletMapping-v0, studies/quickstart.yaml, package of the first heuristic seed",
                   "score (higher is better)", mapping_table(args.budget)))
    print()
    print(markdown("dse/TrainingPartition-v0, Llama-2-70B on 64 A100s (DGX A100), global batch 512, sequence 4,096, "
                   "full recomputation",
                   "reward (-iteration s)", training_table(args.training_budget)))
    print(f"\n({time.process_time() - start:.0f} s of CPU)")


if __name__ == "__main__":
    main()
