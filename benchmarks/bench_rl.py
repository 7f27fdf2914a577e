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

dse.rl.training_cluster_env (issue 54; 64 nodes of DGX A100 with 20 jobs a stream, and 8 nodes with 8):
the heuristics of dse.rl.cluster_policies, uniformly random allowed actions, the cross-entropy method over
the schedulers' genes (dse.rl.cluster_cem, trained on other streams than the evaluation's) and, on the
8 nodes, Stable-Baselines3's DQN on the Gymnasium view (dse.rl.cluster_gym; parameter sharing), if
installed (skipped with a row saying so otherwise), each evaluated on the same seeded job streams; and
the environment's cost per agent-step on the 64 nodes with 20 jobs.

Prints markdown tables (docs/rl.md has them); ``--budget`` sets the evaluations (default 1,440);
``--only cluster`` runs the cluster's part alone.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import gymnasium as gym
import numpy as np

from dse.model.objectives import constraint_matrix, objective_matrix
from dse.rl import training_cluster_env
from dse.rl.cem import cross_entropy, env_rollout, mapping_rollout
from dse.rl.cluster_cem import learn
from dse.rl.cluster_gym import ClusterGymView
from dse.rl.cluster_policies import HEURISTICS, run
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


CLUSTER = dict(nodes=64, jobs=20, models=("phi-3-mini", "llama-2-7b", "llama-3-8b"), arrival_rate_per_hour=6.0,
               tokens=(5e8, 1e10), max_steps=2000)
#: DQN's cluster: every node decides every interval (a busy node may leave), so on 64 nodes an episode is
#: ~10,000 Gymnasium steps; on 8 nodes a few hundred, and DQN sees tens of episodes in its budget
SMALL_CLUSTER = dict(nodes=8, jobs=8, models=("phi-3-mini", "llama-2-7b"), arrival_rate_per_hour=2.0,
                     tokens=(2e8, 4e9), max_steps=600)
EVAL_SEEDS = tuple(range(5))
TRAIN_SEEDS = (100, 101, 102)


def random_policy(seed: int = 0):
    """Each node a uniformly random action among those its mask allows."""
    rng = np.random.default_rng(seed)

    def policy(env):
        masks = env.sim.masks().astype(float)
        u = rng.random(masks.shape) * masks
        return u.argmax(axis=1)
    return policy


def evaluate(env, policy) -> dict:
    """Mean of each figure over the evaluation streams."""
    runs = [run(env, policy, seed) for seed in EVAL_SEEDS]
    out = {k: float(np.mean([m[k] for _, m, _ in runs])) for k in runs[0][1]}
    out["return"] = float(np.mean([r for r, _, _ in runs]))
    return out


class TrainStreams(gym.Wrapper):
    """Resets the view on the training streams only (seeds apart from the evaluation's)."""

    def __init__(self, env):
        super().__init__(env)
        self.k = 0

    def reset(self, *, seed=None, options=None):
        self.k += 1
        return self.env.reset(seed=1000 + self.k)


def dqn_row(config: dict, steps: int):
    """Stable-Baselines3's DQN on the Gymnasium view: trained ``steps`` node decisions on training streams,
    evaluated greedily (an action the mask does not allow is kept as ``keep``)."""
    try:
        from stable_baselines3 import DQN
    except ImportError:
        return ("DQN: stable-baselines3 not installed (pip install -e '.[rl]')", None, "")
    view = ClusterGymView(training_cluster_env(**config))
    model = DQN("MlpPolicy", TrainStreams(view), learning_starts=1000, buffer_size=50_000, exploration_fraction=0.3,
                target_update_interval=1000, train_freq=4, seed=0, verbose=0)
    model.learn(total_timesteps=steps)
    runs = []
    for seed in EVAL_SEEDS:
        obs, _ = view.reset(seed=seed)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, info = view.step(int(action))
            total += r
            done = term or trunc
        runs.append((total, info["metrics"]))
    out = {k: float(np.mean([m[k] for _, m in runs])) for k in runs[0][1]}
    out["return"] = float(np.mean([r for r, _ in runs]))
    return ("DQN (Stable-Baselines3), parameter sharing on the Gymnasium view", out,
            f"{steps:,} node decisions")


def step_cost() -> tuple[float, float]:
    """(ms per agent-step filling the caches, ms per agent-step with them warm) of the 64-node cluster
    with 20 jobs, random allowed actions; the env's step only."""
    out = []
    for seed in (7, 7):
        env = training_cluster_env(**CLUSTER)
        policy = random_policy(seed)
        env.reset(seed=seed)
        spent, agent_steps = 0.0, 0
        while env.agents:
            actions = policy(env)
            joint = {a: int(actions[i]) for i, a in enumerate(env.possible_agents)}
            start = time.perf_counter()
            env.step(joint)
            spent += time.perf_counter() - start
            agent_steps += len(joint)
        out.append(1e3 * spent / agent_steps)
    return out[0], out[1]


def cluster_table(config: dict, dqn_steps: int, cem_iterations: int, cem_population: int) -> list:
    env = training_cluster_env(**config)
    rows = [(name, evaluate(env, make()), "none") for name, make in HEURISTICS.items()]
    rows.append(("random allowed actions", evaluate(env, random_policy()), "none"))
    best, result, played = learn(env, TRAIN_SEEDS, iterations=cem_iterations, population=cem_population)
    rows.append((f"cross-entropy method over the rules' genes: {best.order}, {best.size}"
                 f"{', preempt' if best.preempt else ''}{', blocking' if best.blocking else ''}",
                 evaluate(env, best), f"{played} rules x {len(TRAIN_SEEDS)} streams"))
    rows.append(dqn_row(config, dqn_steps) if dqn_steps else ("DQN: not run on this cluster", None, ""))
    return rows


def cluster_markdown(rows) -> str:
    lines = ["| method | jobs done | mean JCT (h) | weighted JCT (h) | utilisation (MFU %) | energy per token (mJ) | "
             "GPU-h lost to failures | return | training budget |", "|---|---|---|---|---|---|---|---|---|"]
    for name, m, budget in rows:
        if m is None:
            lines.append(f"| {name} | | | | | | | | |")
            continue
        lines.append(f"| {name} | {m['jobs_done']:.1f} | {m['mean_jct_h']:.2f} | {m['weighted_jct_h']:.2f} | "
                     f"{100 * m['utilisation']:.1f} | "
                     f"{1e3 * m['energy_j_per_token']:.1f} | {m['gpu_hours_lost_to_failures']:.2f} | "
                     f"{m['return']:.2f} | {budget} |")
    return "\n".join(lines)


def markdown(title: str, unit: str, rows) -> str:
    lines = [f"**{title}**", "", f"| method | best {unit} | evaluations |", "|---|---|---|"]
    lines += [f"| {name} | {score:.4g} | {n:,} |" for name, score, n in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1440, help="evaluations per method, placement")
    parser.add_argument("--training-budget", type=int, default=96, help="evaluations per method, training "
                        "(a quarter of the strategies there are: exhaustive search is cheap here)")
    parser.add_argument("--only", choices=("all", "cluster"), default="all")
    parser.add_argument("--dqn-steps", type=int, default=30_000, help="DQN's training node decisions (0: skip)")
    parser.add_argument("--cem-iterations", type=int, default=4)
    parser.add_argument("--cem-population", type=int, default=8)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.process_time()
    if args.only == "all":
        print(markdown("dse/ChipletMapping-v0, studies/quickstart.yaml, package of the first heuristic seed",
                       "score (higher is better)", mapping_table(args.budget)))
        print()
        print(markdown("dse/TrainingPartition-v0, Llama-2-70B on 64 A100s (DGX A100), global batch 512, "
                       "sequence 4,096, full recomputation",
                       "reward (-iteration s)", training_table(args.training_budget)))
        print()
    cold, warm = step_cost()
    print(f"dse.rl.training_cluster_env, 64 nodes, 20 jobs: {warm:.3f} ms per agent-step "
          f"({cold:.3f} ms in the first episode, filling the caches)")
    print()
    for config, dqn in ((CLUSTER, 0), (SMALL_CLUSTER, args.dqn_steps)):
        print(f"**dse.rl.training_cluster_env: {config['nodes']} nodes of DGX A100, {config['jobs']} jobs a stream "
              f"({', '.join(config['models'])}; tokens {config['tokens'][0]:.0e} to {config['tokens'][1]:.0e}, "
              f"{config['arrival_rate_per_hour']:g} an hour), means over {len(EVAL_SEEDS)} seeded streams**")
        print()
        print(cluster_markdown(cluster_table(config, dqn, args.cem_iterations, args.cem_population)))
        print()
    print(f"\n({time.process_time() - start:.0f} s of CPU)")


if __name__ == "__main__":
    main()
