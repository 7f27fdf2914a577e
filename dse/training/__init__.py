"""Training: iteration time, memory and MFU of a model on a system of devices with a parallel strategy
(`dse train`); checked against Megatron-LM's measured throughput (docs/training.md). Importing it
registers ``workload.phase: train`` (dse.training.package) with dse.system.prepare."""
from . import package  # noqa: F401  (registers the train phase)
from .iteration import Iteration, iteration, layer_costs
from .strategy import Strategy, check
from .systems import TrainingSystem, load_system, system_names

__all__ = ["Iteration", "iteration", "layer_costs", "Strategy", "check", "TrainingSystem", "load_system",
           "system_names"]
