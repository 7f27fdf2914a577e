"""Training: iteration time, memory and MFU of a model on a system of devices with a parallel strategy
(`dse train`); checked against Megatron-LM's measured throughput (docs/training.md). package.py is
``workload.phase: train`` in a study (its `PHASE`, registered by the facade, dse/__init__.py)."""
from .iteration import Iteration, iteration, layer_costs
from .strategy import Strategy, check
from .systems import TrainingSystem, load_system, system_names

__all__ = ["Iteration", "iteration", "layer_costs", "Strategy", "check", "TrainingSystem", "load_system",
           "system_names"]
