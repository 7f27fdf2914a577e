"""Storage model (memory.storage) against datasheets and MQSim runs."""
import math

import pytest

import memory
from memory.storage import IO_4K, IO_SEQ

# MQSim (CMU-SAFARI/MQSim commit 7ec40e3b, built with its Makefile) run on its default ssdconfig.xml, one
# synthetic QUEUE_DEPTH flow each (read 100 %, Stop_Time 0.2 s, 75 % initial occupancy, seed 798):
# Bytes_Transferred / 0.2 s and Device_Response_Time of its workload_scenario_1.xml.
MQSIM = {
    # name: (random, io bytes, queue depth, MB/s, mean response us)
    "seq read 128 KiB QD1": (False, 128 * 1024, 1, 543.3, 241),     # 829 requests
    "rand read 4 KiB QD1": (True, 4096, 1, 24.72, 165),             # 1,207 requests
    # where the model is only a bound (MQSim's FTL: cold mapping-table reads, die conflicts of random
    # addresses, the channel's command cycles); docs/memory.md
    "seq read 128 KiB QD64": (False, 128 * 1024, 64, 1915.0, 4423),  # 2,922 requests
    "rand read 4 KiB QD64": (True, 4096, 64, 555.1, 472),            # 27,103 requests
}


def test_presets_load_and_rates_stay_under_the_interface():
    for name in memory.ssd_names():
        s = memory.ssd_preset(name)
        assert 0 < s.seq_write_Bps <= s.seq_read_Bps <= s.interface_Bps
        assert s.rand_write_iops < s.rand_read_iops
    for name in memory.storage_names():
        t = memory.storage_preset(name)
        assert t.write_Bps(1) > 0 and t.read_Bps(1) > 0


def test_endurance_matches_the_datasheets_petabytes_written():
    # Micron 7450 PRO 7.68 TB (1 DWPD, 5 years): 14.0 PB written (Micron 7450 product brief)
    assert memory.ssd_preset("micron-7450-pro").endurance_bytes / 1e15 == pytest.approx(14.0, rel=0.01)


def test_queue_depth_follows_littles_law_up_to_the_rated_iops():
    s = memory.ssd_preset("kioxia-cm7")
    qd1 = s.iops(IO_4K, 1)
    assert qd1 == pytest.approx(1.0 / (s.read_latency_s + IO_4K / s.seq_read_Bps))
    assert s.iops(IO_4K, 4) == pytest.approx(4 * qd1)
    # the datasheet's random IOPS at its rated queue depth, and no more beyond it
    assert s.iops(IO_4K, s.rated_queue_depth) == pytest.approx(s.rand_read_iops)
    assert s.iops(IO_4K, 4 * s.rated_queue_depth) == pytest.approx(s.rand_read_iops)
    assert s.bandwidth_Bps(IO_SEQ, 256) == pytest.approx(s.seq_read_Bps)
    assert s.transfer_s(0) == 0.0


def test_write_amplification_of_greedy_gc():
    # uniform random writes, greedy GC: WA = (1 + rho) / (2 rho) (Hu et al. SYSTOR'09; Desnoyers SYSTOR'12):
    # 7 % spare (MQSim's default) gives 7.64; sequential writes 1
    s = memory.ssd_preset("mqsim-default")
    assert s.write_amplification(True) == pytest.approx(1.07 / 0.14)
    assert s.write_amplification(False) == 1.0
    # sequential writes wear the NAND less than the rating's random ones: a longer life at the same rate
    assert s.lifetime_s(1e8, random=False) > s.lifetime_s(1e8, random=True)


def test_mqsim_geometry_derivation():
    # MQSim's default: 8 channels x 333 MT/s x 1 byte = 2.664 GB/s; 128 planes x 8 KiB / 750 us = 1.398 GB/s
    s = memory.ssd_preset("mqsim-default")
    assert s.seq_read_Bps == pytest.approx(8 * 333e6)
    assert s.seq_write_Bps == pytest.approx(128 * 8192 / 750e-6)
    raw = 8 * 4 * 2 * 2 * 2048 * 256 * 8192
    assert s.capacity_bytes == pytest.approx(raw / 1.07)


@pytest.mark.parametrize("case", ["seq read 128 KiB QD1", "rand read 4 KiB QD1"])
def test_flash_model_at_queue_depth_one_against_mqsim(case):
    random, io, qd, mbps, response_us = MQSIM[case]
    s = memory.ssd_preset("mqsim-default")
    assert s.bandwidth_Bps(io, qd, random=random) / 1e6 == pytest.approx(mbps, rel=0.10)
    assert 1e6 * qd / s.iops(io, qd, random=random) == pytest.approx(response_us, rel=0.10)


@pytest.mark.parametrize("case", ["seq read 128 KiB QD64", "rand read 4 KiB QD64"])
def test_flash_model_bounds_mqsim_at_depth(case):
    random, io, qd, mbps, _ = MQSIM[case]
    s = memory.ssd_preset("mqsim-default")
    assert mbps < s.bandwidth_Bps(io, qd, random=random) / 1e6 < 3.0 * mbps


def test_tiers_scale_with_nodes_up_to_the_file_systems_aggregate():
    # Tectonic for Llama 3: 2 TB/s sustained (Dubey et al. 2024, section 3.3.1)
    t = memory.storage_preset("tectonic")
    assert t.write_Bps(2048) == pytest.approx(2e12)
    assert t.write_Bps(4) == pytest.approx(4 * t.node_write_Bps)
    local = memory.storage_preset("local-nvme")
    assert local.write_Bps(2048) == pytest.approx(2048 * 8 * local.ssd.seq_write_Bps)
    assert t.write_s(1e9, 2048) == pytest.approx(t.latency_s + 2048e9 / 2e12)
    assert math.isinf(memory.storage_preset("host-dram").cluster_write_Bps)


def test_bad_input_names_the_key():
    with pytest.raises(memory.MemorySpecError, match="unknown SSD"):
        memory.ssd_preset("floppy")
    with pytest.raises(memory.MemorySpecError, match="unknown storage"):
        memory.storage_preset("tape")
    with pytest.raises(memory.MemorySpecError, match="seq_read_gbps"):
        memory.ssd_preset("pm1743", {"seq_read_gbps": -1})
    with pytest.raises(memory.MemorySpecError, match="interface_gbps"):
        memory.ssd_preset("pm1743", {"seq_read_gbps": 20})
    with pytest.raises(memory.MemorySpecError, match="unknown key"):
        memory.ssd_preset("pm1743", {"speed": 1})
    with pytest.raises(memory.MemorySpecError, match="cannot override"):
        memory.storage_preset("tectonic", {"kind": "host"})
    with pytest.raises(memory.MemorySpecError, match="queue_depth"):
        memory.ssd_preset("pm1743").iops(4096, 0)
