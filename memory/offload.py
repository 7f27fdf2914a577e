"""Cold weights offloaded below the package's memories: host DRAM behind the host link, or NVMe drives.

A weight that neither HBM nor the package's DDR holds may live in host DRAM or on SSD; the step that
needs it fetches it into HBM first (on a miss, on the step's critical path: as MoE-Infinity, Xue et al.
2024, and Mixtral-offloading, Eliseev & Mazur 2023, do on small GPUs), then reads it from HBM.

* The host link: PCIe x16, ``GT/s x 16 lanes x 128/130 (encoding) / 8`` bytes per second each way (PCIe
  3.0 to 5.0 base specifications: 8, 16, 32 GT/s per lane, 128b/130b encoding), times the transaction-layer
  efficiency of 256-byte payloads: 256 / (256 + 26) (a 16-byte 4DW header, 2-byte sequence number, 4-byte
  LCRC and 4 bytes of framing per TLP; PCIe base specification, sections 2.1 and 3.3): 57.2 GB/s for
  PCIe 5.0 x16 (63.0 raw).
* Host DRAM: capacity as the study gives it, its reads at the DDR preset's energy per byte.
* SSD: ``drives`` drives of a memory.storage preset; a fetch from them streams at their sequential read
  rate (128 KiB reads: an expert is megabytes), through the same host link; energy: the drives' active
  power over their read rate.

`fetch_time_s`: host bytes and SSD bytes share the link, and the SSD bytes also stream from the drives:
``max((host + ssd) / link, ssd / drives' read rate)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba as nb

from .errors import MemorySpecError
from .presets import GIB, memory_preset
from .storage import ssd_names, ssd_preset

#: GT/s per lane of the PCIe generations (PCI-SIG base specifications 3.0, 4.0 and 5.0)
PCIE_GTPS = {"pcie3-x16": 8.0, "pcie4-x16": 16.0, "pcie5-x16": 32.0}
LANES = 16
ENCODING = 128.0 / 130.0
TLP_EFFICIENCY = 256.0 / (256.0 + 26.0)
DEFAULT_LINK = "pcie5-x16"
DEFAULT_SSD = "pm1743"
HOST_DRAM = "ddr5"            # host DRAM reads cost the DDR5 preset's energy per byte


def link_Bps(link: str) -> float:
    """Sustained bytes/s of a host link each way (module docstring): 57.2e9 for pcie5-x16."""
    if link not in PCIE_GTPS:
        raise MemorySpecError(f"unknown host link {link!r}; allowed: {', '.join(PCIE_GTPS)}")
    return PCIE_GTPS[link] * 1e9 * LANES * ENCODING / 8.0 * TLP_EFFICIENCY


@dataclass(frozen=True)
class OffloadTiers:
    """The tiers below the package (SI units; a capacity of 0: no such tier)."""

    link: str = DEFAULT_LINK
    host_capacity_bytes: float = 0.0
    ssd_capacity_bytes: float = 0.0
    ssd_read_Bps: float = 0.0
    host_j_per_byte: float = 0.0
    ssd_j_per_byte: float = 0.0

    @property
    def link_Bps(self) -> float:
        return link_Bps(self.link)


def offload_tiers(link: str = DEFAULT_LINK, host_gib: float = 0.0, ssd: str | None = None, drives: int = 0,
                  ssd_gib: float | None = None) -> OffloadTiers:
    """Tiers from a study's entries: ``host_gib`` of host DRAM, ``drives`` drives of preset ``ssd`` (their
    capacity, or ``ssd_gib`` of it)."""
    link_Bps(link)
    if host_gib < 0 or drives < 0 or (ssd_gib is not None and ssd_gib < 0):
        raise MemorySpecError("offload capacities and drive counts must be >= 0")
    spec = None
    if drives:
        name = ssd or DEFAULT_SSD
        if name not in ssd_names():
            raise MemorySpecError(f"unknown ssd {name!r}; allowed: {', '.join(ssd_names())}")
        spec = ssd_preset(name)
    ssd_bytes = 0.0 if spec is None else (drives * spec.capacity_bytes if ssd_gib is None else ssd_gib * GIB)
    return OffloadTiers(
        link=link, host_capacity_bytes=host_gib * GIB, ssd_capacity_bytes=ssd_bytes,
        ssd_read_Bps=0.0 if spec is None else drives * spec.seq_read_Bps,
        host_j_per_byte=memory_preset(HOST_DRAM).energy_j_per_byte,
        ssd_j_per_byte=0.0 if spec is None else spec.active_power_w / spec.seq_read_Bps)


@nb.njit(cache=True, inline="always", error_model="numpy")
def fetch_time_s(host_bytes, ssd_bytes, link_bps, ssd_bps):
    """Seconds to fetch ``host_bytes`` from host DRAM and ``ssd_bytes`` from the drives into HBM: the link
    carries both, the drives stream theirs (module docstring)."""
    t = 0.0
    if host_bytes + ssd_bytes > 0.0:
        t = (host_bytes + ssd_bytes) / link_bps
    if ssd_bytes > 0.0:
        t = max(t, ssd_bytes / ssd_bps)
    return t
