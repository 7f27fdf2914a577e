"""Issue 55: chip-to-chip networks of the accelerators the research names, as link technologies
(noc/data/links.yaml) and fabrics (dse/system/data/systems.yaml): Gaudi's RoCE ports as a full mesh of
3 ports a peer, TPU ICI and Trainium's NeuronLink as tori, Groq's C2C links. A torus all-reduce runs a
bidirectional ring per dimension (dse.system.collectives); checked against the textbook formula and
against the routed package network (noc) running the same phases link by link."""
from __future__ import annotations

import math

import numpy as np
import pytest

import noc
from dse.errors import StudyError
from dse.study.schema.system import SystemSpec
from dse.system import collectives, hardware


def test_link_technologies_carry_their_sourced_rates():
    per_direction = {"ici-v5p": 600e9 / 6, "ici-v6e": 400e9 / 4, "gaudi2-roce": 100e9 / 8,
                     "gaudi3-roce": 200e9 / 8, "neuronlink-v3": 1.28e12 / 8, "groq-c2c": 4 * 30e9 / 8}
    for name, rate in per_direction.items():
        assert noc.link_tech(name).bandwidth_Bps == pytest.approx(rate, rel=1e-9), name


def test_torus_allreduce_is_the_textbook_ring_per_dimension():
    level = hardware.fabric_level("tpu-v6e-ici-pod", 256)
    assert level.torus == (16, 16)
    b, a = noc.link_tech("ici-v6e").bandwidth_Bps, level.alpha_s
    n = 1e9
    # reduce-scatter along x (16 chips, n), then along y (n / 16), then all-gather back: 2 (k - 1) steps each,
    # each moving n_i / k over both directions of the ring's links (2 b)
    by_hand = 2 * 15 * (a + n / (16 * 2 * b)) + 2 * 15 * (a + n / 16 / (16 * 2 * b))
    assert collectives.allreduce_s(256, n, level) == pytest.approx(by_hand, rel=1e-12)
    # its bandwidth term, (1 - 1/256) n / b: one dimension's 2 links at a time, twice the bound 2 n (p - 1) / p
    # over all 4 links of a chip
    assert (by_hand - 60 * a) == pytest.approx(n / b * (15 / 16) * (17 / 16), rel=1e-12)
    assert (by_hand - 60 * a) == pytest.approx(2 * 2 * n * 255 / 256 / (4 * b), rel=1e-12)
    # a switched fabric of the same link is a ring at one link's rate: the torus's two directions halve it
    switched = hardware.fabric_level("ici-v6e", 256)
    assert collectives.allreduce_s(256, n, switched) > 1.9 * (by_hand - 60 * a)


def test_torus_allreduce_matches_the_routed_network_phase_by_phase():
    # the 4 x 4 NeuronLink torus of a trn2.48xlarge: build each step of the per-dimension rings as traffic on
    # noc's routed torus of the same link; each step is one hop plus the busiest channel's serialisation
    level = hardware.fabric_level("trn2-neuronlink-torus", 16)
    topo = noc.torus(4, 4, "neuronlink-v3")
    routes = noc.route(topo, "xy")
    n, k = 64e6, 4
    phases = []
    for dim, size in ((0, n), (1, n / k)):
        t = np.zeros((16, 16))
        for node in range(16):
            r, c = divmod(node, 4)
            for step in (1, -1):            # both directions of the ring, half the data each
                peer = r * 4 + (c + step) % 4 if dim == 0 else ((r + step) % 4) * 4 + c
                t[node, peer] += size / (2 * k)
        phases.append(noc.Phase(t, repeat=k - 1))
    routed = 2 * sum(p.repeat * noc.phase_time_s(routes, p.traffic, level.sync_s) for p in phases)
    assert collectives.allreduce_s(16, n, level) == pytest.approx(routed, rel=1e-9)


def test_full_mesh_of_ports_and_torus_all_to_all_bandwidth():
    gaudi3 = hardware.fabric_level("gaudi3-roce-mesh", 8)
    assert gaudi3.pair_bandwidth_Bps == pytest.approx(3 * 25e9)
    assert gaudi3.bandwidth_Bps == pytest.approx(21 * 25e9)         # 525 GB/s a chip (Intel Gaudi docs)
    # uniform traffic on a k-ary n-cube: the bisection carries k / 8 of a node's rate a channel
    v6e = hardware.fabric_level("tpu-v6e-ici-pod", 256)
    assert v6e.bandwidth_Bps == pytest.approx(8 * 100e9 / 16)
    v5p = hardware.fabric_level("tpu-v5p-ici-cube", 64)
    assert v5p.bandwidth_Bps == pytest.approx(min(6 * 100e9, 8 * 100e9 / 4))


def test_system_presets_name_their_chiplet_and_link():
    table = hardware.systems_table()
    expect = {"hls-gaudi2": ("gaudi2-like", "gaudi2-roce"), "hls-gaudi3": ("gaudi3-like", "gaudi3-roce"),
              "tpu-v5p-cube": ("tpu-v5p-like", "ici-v5p"), "tpu-v6e-pod": ("tpu-v6e-like", "ici-v6e"),
              "trn2-48xlarge": ("trainium2-like", "neuronlink-v3")}
    import arch
    for name, (chiplet, link) in expect.items():
        preset = table["presets"][name]
        assert preset["reference_package"]["chiplet"] == chiplet and chiplet in arch.preset_names()
        assert table["fabrics"][preset["fabric"]]["link"] == link
        hw = hardware.SystemHardware.from_spec(SystemSpec(preset=name))
        level = hw.fabric_level()
        assert math.prod(level.torus or (hw.packages_per_node,)) == hw.packages_per_node


def test_a_torus_of_the_wrong_size_is_one_error_naming_the_key():
    with pytest.raises(StudyError) as err:
        hardware.SystemHardware.from_spec(SystemSpec(fabric="tpu-v6e-ici-pod", packages_per_node=8))
    assert err.value.key == "system.packages_per_node" and "16 x 16" in str(err.value)
    # without packages_per_node a torus fabric takes its own size
    assert hardware.SystemHardware.from_spec(SystemSpec(fabric="trn2-neuronlink-torus")).packages_per_node == 16
    from dse.cli.serve_cmd import _kv_link          # dse serve --kv-link takes a torus fabric at its size
    assert _kv_link("tpu-v6e-ici-pod").torus == (16, 16)


def test_astrasim_export_writes_a_torus_fabric_as_rings():
    from types import SimpleNamespace

    from dse.exports.astrasim import network_config
    hw = hardware.SystemHardware.from_spec(SystemSpec(preset="trn2-48xlarge"))

    def config(experts):
        ctx = SimpleNamespace(system=SimpleNamespace(system_evaluator=SimpleNamespace(hardware=hw)),
                              design=SimpleNamespace(system={"pipeline": 1, "experts": experts, "replicas": 1}))
        return network_config(ctx)

    whole = config(16)
    assert whole["topology"] == ["Ring", "Ring"] and whole["npus_count"] == [4, 4]
    assert whole["bandwidth"] == [160.0, 160.0]
    assert config(8)["topology"] == ["Ring"] and config(8)["npus_count"] == [8]
    assert config(32)["topology"] == ["Ring", "Ring", "Switch"]      # two instances over the network
