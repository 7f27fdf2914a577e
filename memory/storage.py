"""Storage: NVMe SSDs, flash geometries (MQSim's configurations) and the tiers a checkpoint or a cold
expert lives in (host DRAM, node-local drives, a parallel file system), from ``memory/data/storage.yaml``.

* `SsdSpec`: one drive. Throughput at a queue depth is Little's law on a closed queue,
  ``iops(Q) = min(Q / t1, cap)``, ``t1 = latency + io / sequential rate`` (one request alone), ``cap`` the
  rated random IOPS (random I/O) or ``rate / io`` (sequential): the standard saturation bound of a device of
  ``Q`` outstanding requests (Little, 1961; the shape of every datasheet's IOPS-vs-QD curve).
  Random writes pay write amplification ``(1 + rho) / (2 rho)`` of greedy garbage collection under uniform
  random writes with spare factor ``rho`` (Hu et al., SYSTOR'09; Desnoyers, SYSTOR'12); sequential writes 1.
  Endurance: ``DWPD x capacity x 365 x warranty years`` host bytes (JESD218's rating).
* `flash_ssd`: an SSD from MQSim's geometry keys: reads ``min(channels x rate x width, planes x page / tR,
  PCIe)``, writes with the program time tPROG, one page per die per tR for 4 KiB random reads.
* `StorageTier`: what ``nodes`` nodes write or read together: ``min(nodes x node rate, cluster rate)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from numbers import Real

import yaml

from .errors import MemorySpecError

GB = 1e9
KIB = 1024
IO_4K = 4 * KIB
IO_SEQ = 128 * KIB
_US = 1e-6
_YEAR_DAYS = 365
TIER_KINDS = ("host", "node_local", "pfs")


@dataclass(frozen=True)
class SsdSpec:
    """One NVMe drive (SI units: bytes, bytes/s, IOPS of 4 KiB, seconds, watts)."""

    name: str
    capacity_bytes: float
    seq_read_Bps: float
    seq_write_Bps: float
    rand_read_iops: float
    rand_write_iops: float
    read_latency_s: float          # 4 KiB at queue depth 1
    write_latency_s: float
    rated_queue_depth: int         # queue depth the random IOPS are rated at
    interface_Bps: float
    dwpd: float
    warranty_years: float
    overprovisioning: float        # raw NAND / user capacity - 1
    active_power_w: float

    @property
    def endurance_bytes(self) -> float:
        """Rated host bytes written over the warranty (TBW): DWPD x capacity x 365 x years."""
        return self.dwpd * self.capacity_bytes * _YEAR_DAYS * self.warranty_years

    def write_amplification(self, random: bool = True) -> float:
        """NAND bytes per host byte: greedy GC under uniform random writes, (1 + rho) / (2 rho); 1 sequential."""
        if not random:
            return 1.0
        rho = self.overprovisioning
        return max(1.0, (1.0 + rho) / (2.0 * rho))

    def iops(self, io_bytes: float = IO_4K, queue_depth: float = 1, write: bool = False,
             random: bool = True) -> float:
        """Requests per second with ``queue_depth`` outstanding: min(Q / t1, cap) (Little's law)."""
        _positive("io_bytes", io_bytes)
        _positive("queue_depth", queue_depth)
        rate = self.seq_write_Bps if write else self.seq_read_Bps
        latency = self.write_latency_s if write else self.read_latency_s
        t1 = latency + io_bytes / rate
        cap = rate / io_bytes
        if random:
            rated = self.rand_write_iops if write else self.rand_read_iops
            cap = min(cap, rated * IO_4K / max(io_bytes, IO_4K))
        return min(queue_depth / t1, cap)

    def bandwidth_Bps(self, io_bytes: float = IO_SEQ, queue_depth: float = 32, write: bool = False,
                      random: bool = False) -> float:
        """Bytes per second at ``queue_depth`` requests of ``io_bytes``."""
        return self.iops(io_bytes, queue_depth, write, random) * io_bytes

    def transfer_s(self, nbytes: float, write: bool = False, io_bytes: float = IO_SEQ, queue_depth: float = 32,
                   random: bool = False) -> float:
        """Time to move ``nbytes``: one request's latency, then the bytes at the loaded rate."""
        if nbytes <= 0:
            return 0.0
        latency = self.write_latency_s if write else self.read_latency_s
        return latency + nbytes / self.bandwidth_Bps(io_bytes, queue_depth, write, random)

    def lifetime_s(self, host_write_Bps: float, random: bool = False) -> float:
        """Seconds until the rated endurance is spent at ``host_write_Bps`` of host writes, the NAND writes
        scaled by this pattern's write amplification against the rating's (JESD219: random)."""
        _positive("host_write_Bps", host_write_Bps)
        scale = self.write_amplification(True) / self.write_amplification(random)
        return self.endurance_bytes * scale / host_write_Bps


@dataclass(frozen=True)
class StorageTier:
    """Where data is written or read from: per-node rates, and a cluster-wide cap for a shared file system."""

    name: str
    kind: str                       # host | node_local | pfs
    node_write_Bps: float
    node_read_Bps: float
    cluster_write_Bps: float        # inf: scales with the nodes (host, node-local)
    cluster_read_Bps: float
    latency_s: float
    capacity_bytes: float           # per node (host, node_local) or the whole system (pfs)
    ssd: SsdSpec | None = None      # the drive, for node-local tiers

    def write_Bps(self, nodes: int = 1) -> float:
        """Aggregate write bandwidth of ``nodes`` nodes writing together."""
        _positive("nodes", nodes)
        return min(nodes * self.node_write_Bps, self.cluster_write_Bps)

    def read_Bps(self, nodes: int = 1) -> float:
        """Aggregate read bandwidth of ``nodes`` nodes reading together."""
        _positive("nodes", nodes)
        return min(nodes * self.node_read_Bps, self.cluster_read_Bps)

    def write_s(self, bytes_per_node: float, nodes: int = 1) -> float:
        """Time for every node to write ``bytes_per_node`` at once."""
        if bytes_per_node <= 0:
            return 0.0
        return self.latency_s + bytes_per_node * nodes / self.write_Bps(nodes)

    def read_s(self, bytes_per_node: float, nodes: int = 1) -> float:
        """Time for every node to read ``bytes_per_node`` at once."""
        if bytes_per_node <= 0:
            return 0.0
        return self.latency_s + bytes_per_node * nodes / self.read_Bps(nodes)


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("memory") / "data" / "storage.yaml").read_text())


def ssd_names() -> list[str]:
    """Drive presets: datasheet drives and MQSim flash geometries."""
    return sorted(_table()["ssd"]) + sorted(_table()["flash"])


def storage_names() -> list[str]:
    """Storage tier presets (``dse train --storage``)."""
    return sorted(_table()["tier"])


def _positive(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise MemorySpecError(f"storage: {key} must be a finite number > 0 (got {value!r})")
    return float(value)


def _fields(where: str, raw: dict, keys: tuple[str, ...], overrides: dict | None) -> dict:
    overrides = dict(overrides or {})
    for key in overrides:
        if key not in keys:
            raise MemorySpecError(f"{where}: unknown key {key!r}; allowed: {', '.join(keys)}")
    merged = {**raw, **overrides}
    missing = [k for k in keys if k not in merged]
    if missing:
        raise MemorySpecError(f"{where}: missing {', '.join(missing)}")
    out = {k: _positive(f"{where} {k}", merged[k]) for k in keys if k != "mapping_miss"}
    if "mapping_miss" in keys:
        miss = merged["mapping_miss"]
        if isinstance(miss, bool) or not isinstance(miss, Real) or not 0 <= miss <= 1:
            raise MemorySpecError(f"{where}: mapping_miss must be a fraction in [0, 1] (got {miss!r})")
        out["mapping_miss"] = float(miss)
    return out


_SSD_KEYS = ("capacity_tb", "seq_read_gbps", "seq_write_gbps", "rand_read_kiops", "rand_write_kiops",
             "read_latency_us", "write_latency_us", "rated_queue_depth", "interface_gbps", "dwpd", "warranty_years",
             "overprovisioning", "active_power_w")
_FLASH_KEYS = ("channels", "channel_width_bytes", "channel_mtps", "chips_per_channel", "dies_per_chip",
               "planes_per_die", "blocks_per_plane", "pages_per_block", "page_bytes", "read_latency_us",
               "program_latency_us", "pe_cycles", "overprovisioning", "pcie_lanes", "pcie_lane_gbps",
               "mapping_miss")


def ssd_preset(name: str, overrides: dict | None = None) -> SsdSpec:
    """A drive by name (a datasheet drive or an MQSim geometry); ``overrides`` use the data file's keys."""
    table = _table()
    if name in table["flash"]:
        return flash_ssd(name, _fields(f"flash {name}", table["flash"][name], _FLASH_KEYS, overrides))
    if name not in table["ssd"]:
        raise MemorySpecError(f"unknown SSD {name!r}; allowed: {', '.join(ssd_names())}")
    raw = _fields(f"ssd {name}", table["ssd"][name], _SSD_KEYS, overrides)
    if raw["seq_read_gbps"] > raw["interface_gbps"] or raw["seq_write_gbps"] > raw["interface_gbps"]:
        raise MemorySpecError(f"ssd {name}: sequential rates must not exceed interface_gbps "
                              f"({raw['interface_gbps']:g})")
    return SsdSpec(
        name=name, capacity_bytes=raw["capacity_tb"] * 1e12, seq_read_Bps=raw["seq_read_gbps"] * GB,
        seq_write_Bps=raw["seq_write_gbps"] * GB, rand_read_iops=raw["rand_read_kiops"] * 1e3,
        rand_write_iops=raw["rand_write_kiops"] * 1e3, read_latency_s=raw["read_latency_us"] * _US,
        write_latency_s=raw["write_latency_us"] * _US, rated_queue_depth=int(raw["rated_queue_depth"]),
        interface_Bps=raw["interface_gbps"] * GB, dwpd=raw["dwpd"], warranty_years=raw["warranty_years"],
        overprovisioning=raw["overprovisioning"], active_power_w=raw["active_power_w"])


def flash_ssd(name: str, g: dict) -> SsdSpec:
    """An SSD from its flash geometry (MQSim's ssdconfig keys, the data file's units).

    Each plane reads (programs) one page per tR (tPROG), multi-plane on a die; a channel moves
    ``width x rate`` bytes/s; the host link is ``lanes x lane rate``. A 4 KiB random read occupies a die
    for tR (one plane busy) and its channel for 4 KiB; its QD1 latency is tR plus both transfers. A 4 KiB
    random write is buffered and programmed a page at a time, with greedy GC's write amplification."""
    dies = g["channels"] * g["chips_per_channel"] * g["dies_per_chip"]
    planes = dies * g["planes_per_die"]
    channel_Bps = g["channels"] * g["channel_width_bytes"] * g["channel_mtps"] * 1e6
    host_Bps = g["pcie_lanes"] * g["pcie_lane_gbps"] * GB
    t_read, t_prog = g["read_latency_us"] * _US, g["program_latency_us"] * _US
    page = g["page_bytes"]
    seq_read = min(channel_Bps, planes * page / t_read, host_Bps)
    seq_write = min(channel_Bps, planes * page / t_prog, host_Bps)
    raw_bytes = planes * g["blocks_per_plane"] * g["pages_per_block"] * page
    rho = g["overprovisioning"]
    wa = max(1.0, (1 + rho) / (2 * rho))
    rand_read = min(dies / t_read, channel_Bps / IO_4K, host_Bps / IO_4K)
    rand_write = min(seq_write / IO_4K, planes * page / t_prog / wa / IO_4K)
    one_channel = g["channel_width_bytes"] * g["channel_mtps"] * 1e6
    read_latency = (1.0 + g["mapping_miss"]) * (t_read + IO_4K / one_channel) + IO_4K / host_Bps
    write_latency = IO_4K / one_channel + IO_4K / host_Bps     # acknowledged from the controller's write cache
    user = raw_bytes / (1 + rho)
    lifetime_host_bytes = g["pe_cycles"] * raw_bytes / wa       # what the NAND can take at random-write WA
    years = 5.0
    return SsdSpec(
        name=name, capacity_bytes=user, seq_read_Bps=seq_read, seq_write_Bps=seq_write, rand_read_iops=rand_read,
        rand_write_iops=rand_write, read_latency_s=read_latency, write_latency_s=write_latency,
        rated_queue_depth=int(dies * g["planes_per_die"]), interface_Bps=host_Bps,
        dwpd=lifetime_host_bytes / (user * _YEAR_DAYS * years), warranty_years=years, overprovisioning=rho,
        active_power_w=0.0)          # MQSim models no power


def storage_preset(name: str, overrides: dict | None = None) -> StorageTier:
    """A storage tier by name; ``overrides`` use the data file's keys (numbers only)."""
    table = _table()["tier"]
    if name not in table:
        raise MemorySpecError(f"unknown storage {name!r}; allowed: {', '.join(storage_names())}")
    raw = {**table[name], **dict(overrides or {})}
    allowed = set(table[name])
    for key in dict(overrides or {}):
        if key not in allowed or key in ("kind", "ssd", "flash"):
            raise MemorySpecError(f"storage {name}: cannot override {key!r}; allowed: "
                                  f"{', '.join(sorted(allowed - {'kind', 'ssd', 'flash'}))}")
    kind = raw["kind"]
    if kind == "host":
        rate = _positive(f"storage {name} node_gbps", raw["node_gbps"]) * GB
        return StorageTier(name, kind, rate, rate, math.inf, math.inf, _positive("latency_us", raw["latency_us"]) * _US,
                           _positive("capacity_gib", raw["capacity_gib"]) * 2**30)
    if kind == "node_local":
        drive = ssd_preset(raw.get("ssd") or raw["flash"])
        drives = _positive(f"storage {name} drives", raw["drives"])
        if drives != int(drives):
            raise MemorySpecError(f"storage {name}: drives must be a whole number (got {drives:g})")
        return StorageTier(name, kind, drives * drive.seq_write_Bps, drives * drive.seq_read_Bps, math.inf, math.inf,
                           drive.write_latency_s, drives * drive.capacity_bytes, drive)
    if kind == "pfs":
        node = _positive(f"storage {name} node_gbps", raw["node_gbps"]) * GB
        return StorageTier(name, kind, node, node, _positive("cluster_write_gbps", raw["cluster_write_gbps"]) * GB,
                           _positive("cluster_read_gbps", raw["cluster_read_gbps"]) * GB,
                           _positive("latency_us", raw["latency_us"]) * _US,
                           _positive("capacity_pb", raw["capacity_pb"]) * 1e15)
    raise MemorySpecError(f"storage {name}: unknown kind {kind!r}; allowed: {', '.join(TIER_KINDS)}")
