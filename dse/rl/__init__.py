"""Reinforcement learning on the toolkit's models: Gymnasium environments registered on ``import dse``.

* ``dse/ChipletMapping-v0`` (dse.rl.mapping_env): place a study's units on a package, one per step;
  ``gymnasium.make_vec(..., num_envs=N)`` steps N placements together and evaluates them in one
  population call (dse.rl.mapping_vector_env);
* ``dse/TrainingPartition-v0`` (dse.rl.training_env): choose a model's tensor, pipeline, micro-batch and
  interleaving on a system;
* `training_cluster_env`: a PettingZoo ``ParallelEnv`` of a training cluster's nodes scheduling a stream of
  training jobs (dse.rl.cluster_env; PettingZoo imported only when it is built);
* dse.rl.cem: a dependency-free learner (the cross-entropy method over masked categorical policies).
"""
from gymnasium.envs.registration import register, registry

ENVS = {
    "dse/ChipletMapping-v0": dict(entry_point="dse.rl.mapping_env:ChipletMappingEnv",
                                  vector_entry_point="dse.rl.mapping_vector_env:ChipletMappingVectorEnv"),
    "dse/TrainingPartition-v0": dict(entry_point="dse.rl.training_env:TrainingPartitionEnv"),
}
for env_id, entry in ENVS.items():
    if env_id not in registry:
        register(id=env_id, **entry)



def training_cluster_env(**kwargs):
    """A `dse.rl.cluster_env.TrainingClusterEnv` (its arguments: system, nodes, models, jobs,
    arrival_rate_per_hour, tokens, trace, global_batch, seq, failures_per_day, storage, restart_minutes,
    interval_s, queue_slots, running_slots, max_steps, reward_weights); docs/rl.md."""
    from .cluster_env import TrainingClusterEnv
    return TrainingClusterEnv(**kwargs)


__all__ = ["ENVS", "training_cluster_env"]
