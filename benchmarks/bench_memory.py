"""Throughput of the memory kernels over a population; the last line is the placement figure.

A population of P designs of 16 chiplets each, every chiplet holding 8 experts of Mixtral size
(weights ~ 0.35 GB) under Zipf visits: the bandwidth / latency kernels per stream, the density
placement per design (local HBM + shared DDR) and the hot/cold tiering cost per chiplet.
"""
import time

import numpy as np

import memory

P, CHIPS, ITEMS = 2000, 16, 8


def _rate(fn, n_items: int, repeat: int = 3) -> float:
    fn()                                             # compile / load the Numba cache
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n_items / best


def main() -> None:
    rng = np.random.default_rng(0)
    hbm, ddr = memory.memory_preset("hbm3"), memory.memory_preset("ddr5")
    dev = memory.device(hbm)

    streams = P * CHIPS * ITEMS
    runs = rng.choice([64.0, 4096.0, np.inf], streams)
    units = rng.integers(1, 8, streams).astype(float)
    rho = rng.uniform(0, 0.95, streams)
    hits = memory.row_hit_rate_array(runs, dev)
    bw_rate = _rate(lambda: memory.effective_bandwidth_array_Bps(memory.row_hit_rate_array(runs, dev), units, dev),
                    streams)
    lat_rate = _rate(lambda: memory.loaded_latency_array_s(hits, rho, dev), streams)

    n = P * CHIPS * ITEMS
    size = np.full(n, 0.35e9)
    q = 1 / np.arange(1, ITEMS * CHIPS + 1) ** 1.0
    q = np.tile(2 * q / q.sum(), P)
    read = memory.selection_read_bytes(size, q, 16.0)
    seg_start = np.arange(0, n + 1, ITEMS, dtype=np.int64)
    design_start = np.arange(0, P * CHIPS + 1, CHIPS, dtype=np.int64)
    capacity = rng.integers(0, 3, (P * CHIPS, 1)) * hbm.capacity_bytes * 0.1
    shared = rng.integers(0, 8, P) * ddr.capacity_bytes
    place_rate = _rate(lambda: memory.place_population(design_start, seg_start, size, read, capacity, shared), P)

    hbm_bw = np.full(P * CHIPS, memory.effective_bandwidth_Bps(hbm, 1))
    hide = np.full(P * CHIPS, 1e-4)
    tier_rate = _rate(lambda: memory.tiered_chiplets(seg_start, size, read, capacity[:, 0], hbm_bw,
                                                     memory.effective_bandwidth_Bps(ddr, 4), hbm.energy_j_per_byte,
                                                     ddr.energy_j_per_byte, hide, 0.8, 32.0, False), P * CHIPS)

    print(f"bandwidth kernel: {bw_rate / 1e6:.1f} M streams/s")
    print(f"loaded-latency kernel: {lat_rate / 1e6:.1f} M streams/s")
    print(f"tiering kernel: {tier_rate / 1e3:.0f} k chiplets/s ({ITEMS} experts each)")
    print(f"placement kernel: {place_rate / 1e3:.1f} k designs/s ({CHIPS} chiplets x {ITEMS} items, shared DDR)")


if __name__ == "__main__":
    main()
