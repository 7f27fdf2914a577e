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
* Power limit: the iteration's time comes from stack factors fitted on measured runs, which ran at the
  clock their GPUs' power limits left them (an H200 runs Llama-2-7B prefill at 1,590 of 1,980 MHz and
  688 W of its 700, shared/reference/h200). Where the work's power while busy at f_max would exceed the
  chiplet's ``power_limit_w``, its switching energy (compute and SRAM) and active power are priced at the
  clock s where it draws the limit (arch.clock_at_power: DVFS, v^2 and s v^2), in the same time; DRAM,
  link and leakage energy do not scale. `DeviceEnergy.clock` is that fraction (1: within the limit).
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
        self.compute_dram_j = 0.0       # the HBM traffic's share of compute_j (the clock does not scale it)
        self.clock = 1.0                # clock fraction the power limit leaves (`limit_power`)

    def compute(self, joules: float, dram_j: float = 0.0) -> None:
        """Kernels' energy at f_max, ``dram_j`` of it their HBM traffic's."""
        self.parts["compute_j"] += joules
        self.compute_dram_j += dram_j

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
        idle = arch.idle_power_w(self.system.chiplet)
        self.parts["static_j"] += leakage * seconds + (idle - leakage) * waiting

    def limit_power(self, busy_s: float) -> float:
        """Price the switching energy and active power at the clock the chiplet's power limit leaves the
        work of ``busy_s`` seconds (module docstring); returns that clock fraction."""
        ch, p = self.system.chiplet, self.parts
        if busy_s <= 0.0 or ch.power_limit_w <= 0.0:
            return self.clock
        switching = p["compute_j"] - self.compute_dram_j
        fixed = self.compute_dram_j + p["optimizer_j"] + sum(v for k, v in p.items() if k.endswith("communication_j"))
        s = arch.clock_at_power(arch.static_power_w(ch), p["active_j"] / busy_s, switching / busy_s,
                                fixed / busy_s, ch.power_limit_w, ch.voltage_floor)
        v2 = max(s, ch.voltage_floor) ** 2
        p["compute_j"] = switching * v2 + self.compute_dram_j
        p["active_j"] *= s * v2
        self.clock = s
        return s

    @property
    def total_j(self) -> float:
        return sum(self.parts.values())

    def parts_j(self, devices: int) -> dict[str, float]:
        """Each part over the whole system."""
        return {k: v * devices for k, v in self.parts.items()}
