"""The Gymnasium environments of dse.rl: Gymnasium's own checker, returns equal to the evaluator's score,
seeding, action masks that never allow an infeasible placement, the vectorised population call, the
cross-entropy learner."""
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dse  # noqa: F401  (registers the environments)
from dse.errors import StudyError
from dse.model.objectives import constraint_matrix
from dse.rl.cem import cross_entropy, env_rollout, mapping_rollout
from dse.rl.mapping_env import ChipletMappingEnv, MappingProblem
from dse.rl.training_env import TrainingPartitionEnv
from dse.training.search import fastest

STUDY = "studies/quickstart.yaml"


@pytest.fixture(scope="module")
def problem():
    return MappingProblem(STUDY)


@pytest.fixture(scope="module")
def training():
    return TrainingPartitionEnv(model="llama-2-7b", system="dgx-a100-80gb", devices=16, global_batch=128, seq=4096)


def play(env, seed, rng):
    obs, info = env.reset(seed=seed)
    total, done, actions = 0.0, False, []
    while not done:
        a = int(rng.choice(np.flatnonzero(env.action_masks())))
        obs, reward, done, truncated, info = env.step(a)
        total += reward
        actions.append(a)
    return total, actions, info


def test_both_environments_pass_gymnasiums_checker(problem, training):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # unbounded Box observations are warned about, not errors
        check_env(ChipletMappingEnv(problem=problem), skip_render_check=True)
        check_env(training, skip_render_check=True)


def test_registered_on_import_dse():
    env = gym.make("dse/ChipletMapping-v0", study=STUDY, package="seed", disable_env_checker=True)
    assert env.unwrapped.problem.study.name == "quickstart"
    assert gym.make("dse/TrainingPartition-v0", disable_env_checker=True).unwrapped.cfg.layers == 32


def test_mapping_return_is_the_evaluators_score_of_the_design_built(problem):
    env = ChipletMappingEnv(problem=problem)
    rng = np.random.default_rng(1)
    for seed in range(3):
        total, _, info = play(env, seed, rng)
        metrics = problem.prepared.evaluator.evaluate_designs([env.design()])     # the design, read back
        assert total == pytest.approx(float(problem.scorer.score(metrics)[0]), rel=1e-12)
        assert info["metrics"]["latency_s"] == pytest.approx(float(metrics["latency_s"].iloc[0]), rel=1e-12)


def test_training_return_is_minus_the_iteration_time(training):
    from dse.training.iteration import iteration
    rng = np.random.default_rng(2)
    for seed in range(5):
        total, _, info = play(training, seed, rng)
        it = iteration(training.cfg, training.system, info["strategy"])
        assert it.fits == info["fits"]
        if it.fits:
            assert total == pytest.approx(-it.iteration_s, rel=1e-12)
        else:
            assert total < -it.iteration_s


def test_a_mixture_of_experts_chooses_its_expert_parallel_degree_first():
    env = TrainingPartitionEnv(model="mixtral-8x7b", devices=16, global_batch=64, seq=2048, recompute="full")
    assert env.decisions[0] == "ep" and env.values["ep"][-1] > 1
    total, actions, info = play(env, 0, np.random.default_rng(4))
    assert len(actions) == 5 and info["strategy"] in env.strategies


def test_seeding_makes_episodes_reproducible(problem, training):
    for env in (ChipletMappingEnv(problem=problem), training):
        a = play(env, 7, np.random.default_rng(3))
        b = play(env, 7, np.random.default_rng(3))
        assert a[0] == b[0] and a[1] == b[1]
    env = ChipletMappingEnv(problem=problem)
    packages = set()
    for seed in range(6):                          # other seeds draw other packages from the study's space
        env.reset(seed=seed)
        packages.add(env.x.tobytes())
    assert len(packages) > 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), choices=st.lists(st.integers(0, 10**6), min_size=11, max_size=11))
def test_masks_never_allow_an_infeasible_placement(problem, seed, choices):
    # any sequence of allowed actions ends on a design the evaluator finds feasible: memory within HBM and
    # DDR, every expert placed, and the package within the study's budgets and the reticle
    env = ChipletMappingEnv(problem=problem)
    env.reset(seed=seed)
    for c in choices[: len(problem.sizes)]:
        allowed = np.flatnonzero(env.action_masks())
        assert len(allowed) > 0
        env.step(int(allowed[c % len(allowed)]))
    metrics = problem.prepared.evaluator(env.design_vector()[None, :])
    assert (constraint_matrix(metrics, problem.study)[0] <= 1e-9).all()


def test_a_masked_action_is_replaced_not_obeyed(problem):
    env = ChipletMappingEnv(problem=problem)
    env.reset(seed=0)
    blocked = np.flatnonzero(~env.action_masks())
    _, _, _, _, info = env.step(int(blocked[-1]))
    assert info["masked_action"] == int(blocked[-1]) and env.state.slot_of[0] != blocked[-1]


def test_vector_env_evaluates_a_population_at_once(problem, monkeypatch):
    venv = gym.make_vec("dse/ChipletMapping-v0", num_envs=6, problem=problem)
    calls = []
    original = problem.evaluate
    monkeypatch.setattr(problem, "evaluate", lambda X: calls.append(len(X)) or original(X))
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(len(problem.sizes)):
        masks = venv.action_masks()
        obs, rewards, terminated, _, info = venv.step([rng.choice(np.flatnonzero(m)) for m in masks])
    assert terminated.all() and calls == [6]
    assert np.allclose(rewards, problem.scorer.score(info["final_info"]["metrics"]))


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(StudyError, match="package"):
        MappingProblem(STUDY, package="somewhere")
    with pytest.raises(StudyError, match="weights"):
        MappingProblem(STUDY, weights={"carbon": 1.0})
    with pytest.raises(StudyError, match="workload.per_layer"):
        MappingProblem("studies/deepseek_v3_per_layer.yaml")           # 14,972 units: past MAX_UNITS
    with pytest.raises(StudyError, match="model"):
        TrainingPartitionEnv(model="no-such-model")
    with pytest.raises(StudyError, match="system"):
        TrainingPartitionEnv(system="no-such-system")
    for key, value in (("devices", 0), ("devices", float("nan")), ("global_batch", 10**9), ("seq", "4096")):
        with pytest.raises(StudyError, match=key):
            TrainingPartitionEnv(**{key: value})


def test_cross_entropy_beats_random_and_finds_the_best_training_strategy(problem, training):
    # the placement problem with the package fixed: CEM's best at 480 evaluations is at least random's
    # best at the same count; the training problem: it reaches the exhaustive search's optimum
    fixed = MappingProblem(STUDY, package="seed")
    cem = cross_entropy(mapping_rollout(fixed), len(fixed.sizes), fixed.S, iterations=10, population=48, seed=0)
    rng = np.random.default_rng(0)
    X = [fixed.vector(*fixed.random_episode(rng)) for _ in range(480)]
    assert cem.best_score >= fixed.evaluate(np.array(X))[1].max() - 1e-9
    assert cem.best == sorted(cem.best)                                 # best-so-far never falls
    strategy, it, _ = fastest(training.cfg, training.system, 16, 128, 4096, dict(recompute="none", zero=0))
    # population 32: the two best layouts (interleave 8 at micro-batch 2 or 1) are 0.25 % apart
    best = cross_entropy(env_rollout(training), 4, training.width, iterations=8, population=32, seed=1)
    assert best.best_score == pytest.approx(-it.iteration_s, rel=1e-12)


def test_every_design_that_breaks_a_constraint_scores_below_every_design_that_does_not(problem):
    from dse.rl.scoring import PENALTY, squash
    env = ChipletMappingEnv(problem=problem)
    play(env, 0, np.random.default_rng(0))
    metrics = problem.prepared.evaluator.evaluate_designs([env.design()])
    worse = metrics.copy()
    for column in ("latency_s", "energy_j_per_token", "area_mm2"):        # a thousand times worse
        if column in worse:
            worse[column] *= 1000.0
    feasible = (np.maximum(constraint_matrix(worse, problem.study), 0.0).sum(axis=1) == 0)[0]
    score = float(problem.scorer.score(worse)[0])
    assert score < float(problem.scorer.score(metrics)[0])
    if feasible:
        assert 1.0 - PENALTY <= score < -1.0
    # the squash is the identity above -1, monotone, and bounded by -PENALTY below
    x = np.linspace(-1e6, 2.0, 200_001)
    y = squash(x)
    assert np.array_equal(y[x >= -1.0], x[x >= -1.0])
    assert (np.diff(y) >= 0).all() and (y >= 1.0 - PENALTY).all()
