"""Issue 54: reward weights of dse/TrainingPartition-v0, and the multi-agent training-cluster scheduler
(dse.rl.training_cluster_env): PettingZoo's API test, masks, the reward's identities, costs from
dse.training, the heuristics, the cross-entropy learner, the Gymnasium view, bad arguments."""
import ast
import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import dse
from dse.errors import StudyError
from dse.rl import training_cluster_env
from dse.rl.cluster_cem import learn
from dse.rl.cluster_gym import ClusterGymView
from dse.rl.cluster_policies import HEURISTICS, run
from dse.rl.training_env import TrainingPartitionEnv
from dse.training.iteration import iteration

SMALL = dict(nodes=4, models=("gpt2",), jobs=5, arrival_rate_per_hour=6.0, tokens=(2e8, 2e9))


@pytest.fixture(scope="module")
def partition():
    return TrainingPartitionEnv(model="gpt2", devices=8, global_batch=64, seq=1024)


@pytest.fixture(scope="module")
def cluster():
    return training_cluster_env(**SMALL)


# --- dse/TrainingPartition-v0's reward weights ------------------------------------------------------

def test_default_weights_reproduce_minus_the_iteration_time_exactly(partition):
    weighted = TrainingPartitionEnv(model="gpt2", devices=8, global_batch=64, seq=1024,
                                    reward_weights={"time": 1, "energy": 0, "utilisation": 0})
    assert weighted.reference is None and partition.reference is None
    for s in partition.strategies[::7]:
        it = iteration(partition.cfg, partition.system, s)
        reward, _ = partition.score(s)
        assert reward == weighted.score(s)[0]
        assert reward == (-it.iteration_s if it.fits else reward)


def test_energy_and_utilisation_terms_are_the_training_models_relative_to_the_first_strategy(partition):
    env = TrainingPartitionEnv(model="gpt2", devices=8, global_batch=64, seq=1024,
                               reward_weights={"energy": 1, "utilisation": 2})
    ref = iteration(env.cfg, env.system, env.strategies[0])
    t_ref, e_ref, idle_ref = env.reference
    assert (t_ref, e_ref, idle_ref) == (ref.iteration_s, ref.energy_j, 1.0 - ref.mfu)
    assert env.cost(ref) == pytest.approx(3.0 * ref.iteration_s, rel=1e-12)       # the reference: each term 1
    for s in env.strategies[::9]:
        it = iteration(env.cfg, env.system, s)
        assert it.clock_fraction <= 1.0
        cost = t_ref * (it.energy_j / e_ref + 2.0 * (1.0 - it.mfu) / idle_ref)
        assert env.cost(it) == pytest.approx(cost, rel=1e-12)
    for bad in ({"carbon": 1}, {"time": -1}, {"time": 0}, "time"):
        with pytest.raises(StudyError, match="reward_weights"):
            TrainingPartitionEnv(model="gpt2", devices=8, global_batch=64, seq=1024, reward_weights=bad)


# --- the cluster ------------------------------------------------------------------------------------

def test_pettingzoos_parallel_api_test_passes(cluster):
    test = pytest.importorskip("pettingzoo.test")
    test.parallel_api_test(cluster, num_cycles=300)


def test_import_dse_does_not_import_pettingzoo():
    # only dse.rl.cluster_env imports PettingZoo, and no module imports it at its top level
    root = Path(dse.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("cluster_env" in n for n in names), path
                if path.name != "cluster_env.py":
                    assert not any(n.startswith("pettingzoo") for n in names), path


def _consistent(sim):
    busy = sim.node_job >= 0
    assert busy.sum() == sim.nodes_of.sum()
    for j in sim.running:
        assert (sim.node_job == j).sum() == sim.nodes_of[j] and sim.cost_of[j].allowed(int(sim.nodes_of[j]))
    assert not set(sim.queue) & set(sim.running)


def test_masks_allow_only_valid_actions(cluster):
    rng = np.random.default_rng(0)
    for seed in range(3):
        obs, infos = cluster.reset(seed=seed)
        while cluster.agents:
            # one node acts: every action its mask allows is applied, never dropped
            i = int(rng.integers(cluster.N))
            agent = cluster.possible_agents[i]
            mask = obs[agent]["action_mask"]
            assert (mask == infos[agent]["action_mask"]).all() and mask[0] == 1
            a = int(rng.choice(np.flatnonzero(mask)))
            obs, _, _, _, infos = cluster.step({agent: a})
            assert not any(info["dropped"] for info in infos.values())
            _consistent(cluster.sim)
        # every node at once, at random among its allowed actions: the state stays consistent
        obs, _ = cluster.reset(seed=seed)
        while cluster.agents:
            joint = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
            obs = cluster.step(joint)[0]
            _consistent(cluster.sim)


def test_return_is_minus_the_weighted_completion_time(cluster):
    ret, metrics, _ = run(cluster, HEURISTICS["FIFO"](), seed=1)
    sim = cluster.sim
    jct = sim.done_s - sim.arrival
    assert np.isfinite(jct).all() and metrics["jobs_done"] == len(jct)
    weighted = (sim.priority * jct).sum() / sim.priority.sum()
    assert -ret * cluster.interval_s == pytest.approx(weighted, rel=1e-9)
    assert metrics["tokens"] == pytest.approx(sum(j.tokens for j in sim.jobs), rel=1e-9)


def test_a_jobs_rate_is_dse_trainings_iteration_at_its_degrees(cluster):
    c = cluster.costs["gpt2"]
    s = c.shape.strategy
    for nodes in range(c.shape.min_nodes, c.shape.max_nodes + 1):
        dp = nodes * cluster.system.gpus_per_node // (s.tp * s.pp)
        batch = max(s.micro_batch * dp, round(s.global_batch / (s.micro_batch * dp)) * s.micro_batch * dp)
        it = iteration(c.cfg, cluster.system, dataclasses.replace(s, dp=dp, global_batch=batch))
        rate = c.rate(nodes)
        assert rate.iteration_s == pytest.approx(it.iteration_s, rel=1e-12)
        assert rate.power_w * rate.iteration_s == pytest.approx(it.energy_j, rel=1e-12)
        assert rate.mfu == pytest.approx(it.mfu, rel=1e-12)


def test_resharding_costs_the_checkpoint_write_and_reload():
    env = training_cluster_env(**{**SMALL, "jobs": 1, "tokens": (5e9, 5e9), "failures_per_day": 1.0})
    obs, _ = env.reset(seed=0)
    env.step({"node_0": 1})                                       # take the job on the nodes it asks for
    sim = env.sim
    j = sim.running[0]
    old = int(sim.nodes_of[j])
    idle = [a for a, o in env.observe()[0].items() if o["action_mask"][1 + env.W]]
    assert idle, "an idle node may join"
    env.step({idle[0]: 1 + env.W})
    c = sim.cost_of[j]
    plan_old, plan_new = c.plan(old), c.plan(old + 1)
    assert plan_old.write_s > 0 and plan_new.reload_s > 0 and 0 < plan_new.kept_frac < 1
    stop = plan_old.write_s + plan_new.reload_s
    assert sim.totals["reshard_s"] == pytest.approx(stop)
    assert sim.stall_s[j] == pytest.approx(max(0.0, stop - env.interval_s))


def test_each_heuristic_and_the_cross_entropy_learner_schedule_a_small_cluster(cluster):
    returns = {}
    for name, make in HEURISTICS.items():
        ret, metrics, _ = run(cluster, make(), seed=2)
        assert metrics["jobs_done"] == SMALL["jobs"], name
        assert 0 < metrics["utilisation"] < 1 and metrics["energy_j_per_token"] > 0
        returns[name] = ret
    best, result, played = learn(cluster, seeds=[2], iterations=3, population=6, seed=0)
    assert played <= 18 and result.best == sorted(result.best)
    assert result.best_score >= returns["FIFO"] - 1e-12
    assert run(cluster, best, seed=2)[0] == pytest.approx(result.best_score)


def test_gymnasium_view_passes_gymnasiums_checker_and_plays_an_episode():
    view = ClusterGymView(training_cluster_env(**SMALL))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(view, skip_render_check=True)
    rng = np.random.default_rng(0)
    view.reset(seed=3)
    done, total = False, 0.0
    while not done:
        _, r, term, trunc, info = view.step(int(rng.choice(np.flatnonzero(view.action_masks()))))
        total += r
        done = term or trunc
    assert term and info["metrics"]["jobs_done"] == SMALL["jobs"]
    sim = view.env.sim
    weighted = (sim.priority * (sim.done_s - sim.arrival)).sum() / sim.priority.sum()
    assert -total * view.env.interval_s == pytest.approx(weighted, rel=1e-9)


def test_a_trace_file_drives_the_cluster(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text("arrival_s,model,tokens,priority,nodes\n600,gpt2,5e8,1,1\n0,gpt2,1e9,2,2\n")
    env = training_cluster_env(nodes=4, trace=str(trace))
    _, metrics, _ = run(env, HEURISTICS["shortest remaining first"](), seed=0)
    assert metrics["jobs_done"] == 2 and metrics["tokens"] == pytest.approx(1.5e9)
    assert [j.arrival_s for j in env.sim.jobs] == [0.0, 600.0]


@pytest.mark.parametrize("kwargs, key", [
    (dict(system="no-such-system"), "system"), (dict(nodes=0), "nodes"), (dict(nodes=2.5), "nodes"),
    (dict(arrival_rate_per_hour=-1.0), "arrival_rate_per_hour"), (dict(failures_per_day=-0.1), "failures_per_day"),
    (dict(jobs=0), "jobs"), (dict(tokens=(1e9, 1e8)), "tokens"), (dict(models=("no-such-model",)), "models"),
    (dict(interval_s=0), "interval_s"), (dict(reward_weights={"speed": 1}), "reward_weights"),
    (dict(storage="floppy"), "storage"), (dict(restart_minutes=-1), "restart_minutes")])
def test_bad_arguments_name_the_argument(kwargs, key):
    with pytest.raises(StudyError, match=key) as exc:
        training_cluster_env(**{**SMALL, **kwargs})
    assert exc.value.key == key and "\n" not in str(exc.value)


@pytest.mark.parametrize("text, fragment", [
    ("arrival_s,model,tokens,priority\n0,gpt2,1e9,1\n", "missing column 'nodes'"),
    ("arrival_s,model,tokens,priority,nodes\n0,gpt2,-5,1,1\n", "line 2: tokens"),
    ("arrival_s,model,tokens,priority,nodes\n0,gpt2,1e9,1,1.5\n", "line 2: nodes"),
    ("arrival_s,model,tokens,priority,nodes\n", "needs 1"),
    ("arrival_s,model,tokens,priority,nodes\n0,no-such-model,1e9,1,1\n", "no-such-model")])
def test_a_malformed_trace_names_the_trace(tmp_path, text, fragment):
    trace = tmp_path / "bad.csv"
    trace.write_text(text)
    with pytest.raises(StudyError, match="trace") as exc:
        training_cluster_env(nodes=4, trace=str(trace))
    assert exc.value.key == "trace" and fragment in str(exc.value)
