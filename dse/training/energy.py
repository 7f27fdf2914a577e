"""Energy of one training iteration on one device, by part.

* Compute: the forward kernels' compute and SRAM energy (arch.op_costs) and their HBM traffic times the
  HBM's energy per byte (memory presets), three times per micro-batch and layer (forward, data-gradient
  and weight-gradient passes) plus what recomputation repeats; the same counts as the iteration's time.
* Communication: the bytes a device sends per collective (a ring: 2(p - 1)/p of the buffer, Thakur et
  al. 2005; all-to-all: (p - 1)/p of it each way) times the energy per byte of the level it crosses: the
  fabric link's (noc/data/links.yaml) inside a node, the network's NICs, cables and switches between
  nodes (dse/system/data/systems.yaml).
* Optimizer: the Adam step's HBM bytes times the HBM's energy per byte.
* Active: the chiplet's active power (arch.active_power_w: clocks and control of a busy chip) over the
  iteration less the pipeline bubble, when the device runs kernels (compute and collectives).
* Static: the chiplet's static power (arch.static_power_w: area x the node's leakage) over the iteration,
  and over the pipeline bubble, while the device waits, its idle power beyond that (arch.idle_power_w: a
  provisioned GPU idles at 119-126 W, not at its leakage).
SI units: joules, bytes, seconds.
"""
from __future__ import annotations

import arch

from .systems import TrainingSystem


def ring_bytes(ranks: int, bytes_: float) -> float:
    """Bytes one rank sends in a ring all-reduce (or reduce-scatter + all-gather) of ``bytes_``."""
    return 0.0 if ranks <= 1 else 2.0 * (ranks - 1) / ranks * bytes_


class DeviceEnergy:
    """Accumulates one device's energy per iteration by part (module docstring)."""

    def __init__(self, system: TrainingSystem):
        self.system = system
        self.parts: dict[str, float] = {"compute_j": 0.0, "tp_communication_j": 0.0, "ep_communication_j": 0.0,
                                        "pp_communication_j": 0.0, "dp_communication_j": 0.0,
                                        "optimizer_j": 0.0, "active_j": 0.0, "static_j": 0.0}

    def compute(self, joules: float) -> None:
        self.parts["compute_j"] += joules

    def send(self, part: str, bytes_: float, inter_node: bool) -> None:
        per_byte = self.system.network_energy_j_per_byte if inter_node else self.system.fabric.energy_j_per_byte
        self.parts[part] += bytes_ * per_byte

    def optimizer(self, hbm_bytes: float) -> None:
        self.parts["optimizer_j"] += hbm_bytes * self.system.hbm.energy_j_per_byte

    def active(self, seconds: float) -> None:
        self.parts["active_j"] += arch.active_power_w(self.system.chiplet) * seconds

    def static(self, seconds: float, waiting: float = 0.0) -> None:
        """Leakage over ``seconds``; the idle power beyond it over the ``waiting`` seconds among them."""
        leakage = arch.static_power_w(self.system.chiplet)
        idle = arch.idle_power_w(self.system.chiplet, leakage)
        self.parts["static_j"] += leakage * seconds + max(idle - leakage, 0.0) * waiting

    @property
    def total_j(self) -> float:
        return sum(self.parts.values())

    def parts_j(self, devices: int) -> dict[str, float]:
        """Each part over the whole system."""
        return {k: v * devices for k, v in self.parts.items()}
