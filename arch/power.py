"""A chip's clock under its power limit (DVFS), and the power of a provisioned chip that waits.

Clock model: dynamic power is C V^2 f, and the supply voltage follows the clock down to a floor
(dynamic voltage and frequency scaling; Weste & Harris, CMOS VLSI Design, 4th ed., 5.2): at the clock
fraction s = f / f_max the voltage fraction is v = max(s, voltage_floor), so a kernel's switching energy
scales v^2 and the chip's clock and control power (arch.active_power_w) s v^2 (about s^3 above the
floor); leakage is held constant. A kernel whose power at f_max exceeds the chiplet's ``power_limit_w``
(its board power: chip, HBM and the rest, the datasheet TDP) runs at the s where

    static + active s v^2 + (E_dyn v^2 + E_dram) / T(s) = power_limit,

T(s) the kernel's time with its compute stretched by 1/s (arch.roofline.kernel_time_s); bisection on s,
never below `S_MIN`. Measured on an H200 SXM (700 W limit; shared/reference/h200): Llama-2-7B prefill of
8,192 tokens draws 688 W at 1,590 of 1,980 MHz, decode at batch 64-128 draws 509-578 W at the full clock.

Idle power (`idle_power_w`): what a provisioned chip draws while it waits (context open, clocks up,
memory refreshed): the chiplet's ``idle_w`` where given (H200: 119-126 W measured), never under its
leakage; its leakage where none is given.
"""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
from scipy.optimize import brentq

from .area_cost import active_power_w, static_power_w
from .roofline import kernel_time_s

#: the lowest clock fraction a power limit drives a chip to (an H100 SXM's lowest SM clock, 345 of 1,980 MHz
#: in nvidia-smi -q's supported clocks, is about 0.17; kernels at the limit stay far above it)
S_MIN = 0.2
BISECTIONS = 30


@nb.njit(cache=True, inline="always", error_model="numpy")
def kernel_power_w(s, compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w, active_w,
                   floor):
    """(power, time) of one kernel at the clock fraction ``s`` (see module docstring)."""
    t = kernel_time_s(compute_s / s, memory_s, inv_steps, overhead_s, dispatch_s)
    v = max(s, floor)
    if t <= 0.0:
        return static_w, t
    return static_w + active_w * s * v * v + (e_dyn * v * v + e_dram) / t, t


@nb.njit(cache=True, inline="always", error_model="numpy")
def sustained_clock(compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w, active_w,
                    limit_w, floor):
    """(clock fraction s, time at s) a kernel sustains under ``limit_w`` (0: no limit, s = 1)."""
    if limit_w <= 0.0:
        return 1.0, kernel_time_s(compute_s, memory_s, inv_steps, overhead_s, dispatch_s)
    p, t = kernel_power_w(1.0, compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w,
                          active_w, floor)
    if p <= limit_w:
        return 1.0, t
    lo, hi = S_MIN, 1.0
    p_lo, t_lo = kernel_power_w(lo, compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w,
                                active_w, floor)
    if p_lo >= limit_w:
        return lo, t_lo
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        p, _t = kernel_power_w(mid, compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w,
                               active_w, floor)
        if p > limit_w:
            hi = mid
        else:
            lo = mid
    p, t = kernel_power_w(lo, compute_s, memory_s, inv_steps, overhead_s, dispatch_s, e_dyn, e_dram, static_w,
                          active_w, floor)
    return lo, t


def idle_power_w(ch, precision: str = "bf16") -> float:
    """Power of the provisioned chiplet while it waits (module docstring): its ``idle_w``, never under its
    leakage (arch.static_power_w); its leakage where it has no ``idle_w``. The one definition: the step
    model's tables (``kind_idle_w``), serving between requests, training's bubble and a powered-off
    chiplet's energy in the runtime all read it."""
    return max(float(ch.idle_w), static_power_w(ch, precision))


class KernelPower(NamedTuple):
    """One kernel run back to back under the chiplet's power limit (`kernel_at_limit`): SI units."""

    clock: float            # clock fraction the limit leaves (1: within it)
    time_s: float
    power_w: float          # board power: static + active + (switching + DRAM) / time
    switching_j: float      # MACs, SRAM and register traffic at the clock's voltage
    dram_j: float
    static_j: float         # leakage over the kernel
    active_j: float         # clocks and control of the busy chip (arch.active_power_w) at the clock

    @property
    def energy_j(self) -> float:
        return self.switching_j + self.dram_j + self.static_j + self.active_j


def kernel_at_limit(ch, compute_s: float, memory_s: float, inv_steps: float, switching_j: float, dram_j: float,
                    precision: str = "bf16") -> KernelPower:
    """`KernelPower` of one kernel of ``compute_s`` compute and ``memory_s`` memory time (arch.roofline) with
    ``switching_j`` of switching energy at f_max and ``dram_j`` of DRAM energy, on ``ch`` under its
    ``power_limit_w``: the clock `sustained_clock` leaves, the same balance the step model strikes
    (dse.model.copy_cost) with the chiplet's leakage and active power."""
    static_w, active_w = static_power_w(ch, precision), active_power_w(ch, precision)
    args = (float(compute_s), float(memory_s), float(inv_steps), ch.kernel_overhead_s, ch.dispatch_s,
            float(switching_j), float(dram_j), static_w, active_w)
    s, t = sustained_clock(*args, ch.power_limit_w, ch.voltage_floor)
    p = kernel_power_w(s, *args, ch.voltage_floor)[0]
    v2 = max(s, ch.voltage_floor) ** 2
    return KernelPower(clock=s, time_s=t, power_w=p, switching_j=float(switching_j) * v2, dram_j=float(dram_j),
                       static_j=static_w * t, active_j=active_w * s * v2 * t)


def clock_at_power(static_w: float, active_w: float, switching_w: float, fixed_w: float, limit_w: float,
                   floor: float) -> float:
    """The clock fraction s at which a chip doing a fixed amount of work in a fixed time draws ``limit_w``:
    ``static + active s v^2 + switching v^2 + fixed = limit`` (module docstring: v = max(s, floor)), the
    work's switching energy over its time (``switching_w``) and what the clock does not scale (``fixed_w``:
    DRAM, links) at f_max. 1 when the chip stays within its limit (or has none); never below `S_MIN`.
    The time is fixed: a run whose time was measured at the clock its limit left (a training stack's fitted
    factor, dse.training.stacks) is priced at that clock."""
    def power(s: float) -> float:
        v = max(s, floor)
        return static_w + active_w * s * v * v + switching_w * v * v + fixed_w

    if limit_w <= 0.0 or power(1.0) <= limit_w:
        return 1.0
    if power(S_MIN) >= limit_w:
        return S_MIN
    return float(brentq(lambda s: power(s) - limit_w, S_MIN, 1.0, xtol=1e-9))
