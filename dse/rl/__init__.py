"""Reinforcement learning on the toolkit's models: Gymnasium environments registered on ``import dse``.

* ``dse/ChipletMapping-v0`` (dse.rl.mapping_env): place a study's units on a package, one per step;
  ``gymnasium.make_vec(..., num_envs=N)`` steps N placements together and evaluates them in one
  population call (dse.rl.mapping_vector_env);
* ``dse/TrainingPartition-v0`` (dse.rl.training_env): choose a model's tensor, pipeline, micro-batch and
  interleaving on a system;
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

__all__ = ["ENVS"]
