"""Memory presets against the figures JEDEC, the vendors and Ramulator2 publish."""
import pytest

import memory
from memory import GIB

# (peak GB/s per stack / channel, capacity GB, where the figures come from)
PUBLISHED = {
    "hbm2": (307.0, 8, "Samsung Aquabolt HBM2: 2.4 Gb/s/pin, 307 GB/s, 8 GB per stack (2018)"),
    "hbm2e": (460.0, 16, "SK hynix HBM2E: 3.6 Gb/s/pin x 1024 I/O, 'over 460 GB/s', 8 x 16 Gb = 16 GB (2019)"),
    "hbm3": (819.0, 16, "JEDEC JESD238: 6.4 Gb/s x 1024 = 819 GB/s; SK hynix HBM3 8-high 16 GB"),
    "hbm3e": (1180.0, 24, "SK hynix HBM3E 1.18 TB/s; Micron HBM3E 9.2 Gb/s, 8-high 24 GB"),
    "hbm4": (2048.0, 36, "JEDEC JESD270-4: 2048-bit at 8 Gb/s = 2 TB/s; SK hynix / Micron HBM4 12-high 36 GB"),
    "ddr4": (25.6, 32, "JEDEC JESD79-4 DDR4-3200 x64 channel 25.6 GB/s; 32 GB RDIMM"),
    "ddr5": (38.4, 32, "JEDEC JESD79-5 DDR5-4800 DIMM 38.4 GB/s (2 x 32-bit sub-channels); 32 GB RDIMM"),
    "lpddr5": (12.8, 2, "JEDEC JESD209-5 LPDDR5-6400 x16 channel 12.8 GB/s; 16 Gb die"),
    "lpddr5x": (17.064, 2, "JEDEC JESD209-5B LPDDR5X-8533 x16 channel 17.06 GB/s; 16 Gb die"),
}

# Ramulator2 (CMU-SAFARI/ramulator2 c5b1c3a4, python/ramulator/dram/*.py): tCK in ps and CK counts of
# nBL, nCL, nRCD(RD), nRP, nRAS, nRC of the timing preset each of our presets takes its timings from.
RAMULATOR2 = {
    "hbm2": ("HBM2_2400Mbps", 833, dict(BL=2, CL=17, RCD=17, RP=17, RAS=40, RC=57)),
    "hbm3": ("HBM3_6400Mbps", 625, dict(BL=2, CL=20, RCD=31, RP=26, RAS=45, RC=72)),
    "hbm4": ("HBM4_8000Mbps", 500, dict(BL=2, CL=20, RCD=39, RP=33, RAS=57, RC=90)),
    "ddr4": ("DDR4_3200AA", 625, dict(BL=4, CL=22, RCD=22, RP=22, RAS=52, RC=74)),
    "ddr5": ("DDR5_4800AN", 416, dict(BL=8, CL=34, RCD=34, RP=34, RAS=77, RC=111)),
    "lpddr5": ("LPDDR5_6400", 1250, dict(BL=2, CL=17, RCD=15, RP=15, RAS=34, RC=49)),
}


def test_every_kind_has_a_published_figure():
    assert sorted(PUBLISHED) == memory.memory_kinds()


@pytest.mark.parametrize("kind", sorted(PUBLISHED))
def test_peak_bandwidth_and_capacity_match_published(kind):
    peak_gbps, capacity_gb, _source = PUBLISHED[kind]
    spec = memory.memory_preset(kind)
    # peak is derived from data rate x bus width; the published figure is quoted rounded
    assert spec.peak_bandwidth_Bps / 1e9 == pytest.approx(peak_gbps, rel=0.005)
    # DRAM capacities are binary: a "16 GB" stack is 8 dies x 16 Gbit = 16 GiB
    assert spec.capacity_bytes == capacity_gb * GIB


@pytest.mark.parametrize("kind", sorted(RAMULATOR2))
def test_timings_match_ramulator2_presets(kind):
    _name, tck_ps, n = RAMULATOR2[kind]
    spec = memory.memory_preset(kind)
    ns = tck_ps * 1e-12
    # tBL is derived from burst size and channel width, not copied: it must equal Ramulator2's nBL x tCK
    assert spec.tBL_s == pytest.approx(n["BL"] * ns, rel=0.002)
    for field, count in [("tCL_s", "CL"), ("tRCD_s", "RCD"), ("tRP_s", "RP"), ("tRAS_s", "RAS"), ("tRC_s", "RC")]:
        assert getattr(spec, field) == pytest.approx(n[count] * ns, rel=1e-3), field


def test_organisation_multiplies_out_to_the_capacity():
    # HBM3 16 Gb 8-high: 32 pseudo-channels x 32 banks x 2^14 rows x 1 KB rows = 16 GiB (Ramulator2 org)
    spec = memory.memory_preset("hbm3")
    assert spec.channels * spec.banks * 2**14 * spec.row_bytes == spec.capacity_bytes


def test_overrides_use_data_file_units_and_rederive():
    base = memory.memory_preset("hbm3")
    faster = memory.memory_preset("hbm3", {"data_rate_gbps": 8.0, "capacity_gib": 24})
    assert faster.capacity_bytes == 24 * GIB
    assert faster.peak_bandwidth_Bps == pytest.approx(1024e9)
    assert faster.tBL_s == pytest.approx(base.tBL_s * 6.4 / 8.0)
    assert base.capacity_bytes == 16 * GIB          # the preset itself is untouched


@pytest.mark.parametrize("overrides,words", [
    ({"capacity_gb": 24}, "unknown override 'capacity_gb'; allowed: data_rate_gbps"),
    ({"capacity_gib": -1}, "capacity_gib must be > 0 (got -1)"),
    ({"capacity_gib": "lots"}, "capacity_gib must be a number"),
    ({"channels": 2.5}, "channels must be a whole number"),
    ({"channels": 3}, "bus_width_bits (1024) must split evenly over channels (3)"),
    ({"tRC_ns": 10}, "tRC_ns (10) must be >= tRAS_ns"),
    ({"row_bytes": 16}, "row_bytes (16) must be >= burst_bytes (32)"),
])
def test_bad_overrides_name_the_key(overrides, words):
    with pytest.raises(memory.MemorySpecError, match="memory hbm3: ") as err:
        memory.memory_preset("hbm3", overrides)
    assert words in str(err.value)


def test_unknown_kind_lists_the_allowed():
    with pytest.raises(memory.MemorySpecError, match="unknown memory kind 'hbm9'; allowed: ddr4, ddr5, hbm2"):
        memory.memory_preset("hbm9")
