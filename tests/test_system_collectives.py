"""Collectives between packages against the alpha-beta formulas worked by hand (Thakur, Rabenseifner &
Gropp, IJHPCA 2005) and NCCL's bus-bandwidth convention (nccl-tests doc/PERFORMANCE.md)."""
import math

import pytest

from dse.errors import StudyError
from dse.study.schema.system import SystemSpec
from dse.system.collectives import (
    all_to_all_s,
    bus_bandwidth_Bps,
    hierarchical_allreduce_s,
    ring_allreduce_s,
    ring_reduce_scatter_s,
    send_s,
    tree_allreduce_s,
)
from dse.system.hardware import Level, SystemHardware, fabric_level, network_level

MB = 1e6


def test_nvswitch_fabric_level_is_the_nvlink_datasheet():
    """DGX A100: 300 GB/s per GPU per direction through NVSwitch; one step = link + router latency + the
    3 us collective step fitted to nccl-tests (noc/data/links.yaml)."""
    f = fabric_level("nvlink3-nvswitch", 8)
    assert f.bandwidth_Bps == f.pair_bandwidth_Bps == 300e9
    assert f.alpha_s == pytest.approx(150e-9 + 2e-9 + 3e-6)
    mesh = fabric_level("infinity-fabric-mi300x", 8)          # 7 point-to-point links of 64 GB/s each
    assert mesh.pair_bandwidth_Bps == 64e9 and mesh.bandwidth_Bps == pytest.approx(7 * 64e9)


def test_ring_allreduce_by_hand():
    level = Level("l", alpha_s=5e-6, bandwidth_Bps=100e9, pair_bandwidth_Bps=100e9, energy_j_per_byte=0.0)
    # 8 packages, 64 MB: 2 x 7 steps of (5 us + 8 MB / 100 GB/s = 80 us) = 14 x 85 us
    assert ring_allreduce_s(8, 64 * MB, level) == pytest.approx(14 * 85e-6)
    # reduce-scatter alone: 7 steps
    assert ring_reduce_scatter_s(8, 64 * MB, level) == pytest.approx(7 * 85e-6)
    # binomial tree: 2 x log2(8) = 6 steps of (5 us + 64 MB / 100 GB/s = 640 us)
    assert tree_allreduce_s(8, 64 * MB, level) == pytest.approx(6 * 645e-6)
    assert send_s(1 * MB, level) == pytest.approx(5e-6 + 10e-6)
    assert ring_allreduce_s(1, 64 * MB, level) == 0.0


def test_hierarchical_allreduce_is_the_sum_of_its_levels_by_hand():
    """DGX H100 nodes: reduce-scatter over NVLink 4 in the node, ring all-reduce of each GPU's shard across
    nodes over its own 400 Gb/s NDR NIC (rail-optimised), all-gather over NVLink 4."""
    hw = SystemHardware.from_spec(SystemSpec(preset="dgx-h100-80gb"))
    fabric, network = hw.fabric_level(), hw.network_level(nodes=4)
    D = 256 * MB
    k, m = 8, 4
    alpha_f = 150e-9 + 2e-9 + 3e-6                          # links.yaml nvlink4: link + router + sync step
    alpha_n = 600e-9 + 150e-9 + 8e-6                        # systems.yaml infiniband-ndr: NIC + one switch + step
    assert fabric.alpha_s == pytest.approx(alpha_f) and network.alpha_s == pytest.approx(alpha_n)
    assert network.bandwidth_Bps == pytest.approx(50e9)     # 8 NICs x 50 GB/s over 8 GPUs
    rs = (k - 1) * (alpha_f + D / k / 450e9)                 # each of 7 steps moves D/8 over 450 GB/s
    ar = 2 * (m - 1) * (alpha_n + D / k / m / 50e9)          # D/8 per GPU, ring over 4 nodes
    ag = rs
    assert hierarchical_allreduce_s(k, m, D, fabric, network) == pytest.approx(rs + ar + ag)
    assert hierarchical_allreduce_s(k, 1, D, fabric, None) == pytest.approx(rs + ag)
    # a flat ring over all 32 GPUs at the network's rate is slower than the hierarchy for large messages
    assert ring_allreduce_s(32, D, network) > hierarchical_allreduce_s(k, m, D, fabric, network)


def test_nccl_bus_bandwidth_of_a_ring_is_the_link_bandwidth():
    """nccl-tests: busbw = algbw x 2(n-1)/n for all-reduce "reflects the speed of the hardware": a ring
    without latency reaches exactly the link rate."""
    level = Level("l", alpha_s=0.0, bandwidth_Bps=300e9, pair_bandwidth_Bps=300e9, energy_j_per_byte=0.0)
    for p in (2, 4, 8, 16):
        t = ring_allreduce_s(p, 1e9, level)
        assert bus_bandwidth_Bps("all-reduce", p, 1e9, t) == pytest.approx(300e9)
        t_rs = ring_reduce_scatter_s(p, 1e9, level)
        assert bus_bandwidth_Bps("reduce-scatter", p, 1e9, t_rs) == pytest.approx(300e9)


def test_all_to_all_by_hand():
    """Direct all-to-all: each package sends (p-1) x m bytes at its injection bandwidth at once; NCCL's
    busbw for all-to-all is algbw x (p-1)/p of the p x m bytes each rank holds."""
    level = Level("l", alpha_s=3e-6, bandwidth_Bps=450e9, pair_bandwidth_Bps=450e9, energy_j_per_byte=0.0)
    p, m = 8, 4 * MB
    t = all_to_all_s((p - 1) * m, (p - 1) * m, level)
    assert t == pytest.approx(3e-6 + 7 * 4e6 / 450e9)
    level0 = Level("l", alpha_s=0.0, bandwidth_Bps=450e9, pair_bandwidth_Bps=450e9, energy_j_per_byte=0.0)
    t0 = all_to_all_s((p - 1) * m, (p - 1) * m, level0)
    assert bus_bandwidth_Bps("all-to-all", p, p * m, t0) == pytest.approx(450e9)


def test_fat_tree_crosses_three_switches_once_nodes_leave_a_leaf():
    one_leaf = network_level("infiniband-hdr", 8, 8, "fat-tree", nodes=20)      # 20 <= 40 / 2 down-ports
    spine = network_level("infiniband-hdr", 8, 8, "fat-tree", nodes=21)
    rail = network_level("infiniband-hdr", 8, 8, "rail-optimised", nodes=64)
    assert spine.alpha_s - one_leaf.alpha_s == pytest.approx(2 * 130e-9)
    assert rail.alpha_s == pytest.approx(one_leaf.alpha_s) and spine.hops == 4 and rail.hops == 2
    assert math.isclose(rail.bandwidth_Bps, 25e9)


def test_bad_system_names_are_one_line_errors():
    for spec, key in ((SystemSpec(preset="dgx-z"), "system.preset"), (SystemSpec(fabric="carrier-pigeon"),
                                                                     "system.fabric"),
                      (SystemSpec(fabric="nvlink4", network="smoke-signals"), "system.network")):
        with pytest.raises(StudyError) as err:
            SystemHardware.from_spec(spec)
        assert err.value.key == key
