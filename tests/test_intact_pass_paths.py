"""Issue 52, ninth round: the intact pass's faster paths give the old paths' results, bit for bit.

Each old path is kept here as the reference: each chiplet's bytes summed over its items again (HBM
placement), and a design's intact pass through `base_pass` (its own arrays) rather than a range of the
population's (the failure pass's path). Decoding: tests/test_decode_tables.py; the memory-path count:
tests/test_memory_path.py."""
import numba as nb
import numpy as np
import pytest

import dse
from dse.model.hbm_placement import (item_size, place_chiplet, place_design_ordered,
                                     placement_is_trivial, resident_capacity, sram_tier, trivial_spill)
from dse.model.perf_model import PASS_FIELDS, base_pass, base_passes


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/moe_small.yaml"))


@nb.njit(cache=False)
def index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r):
    """The copies grouped by chiplet as the package did before `index_sized`: CSR ``chip_ptr`` over
    ``item_u`` / ``item_r``, in (u, r) order."""
    for i in range(n + 1):
        chip_ptr[i] = 0
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            chip_ptr[slots[u, r] + 1] += 1
    for i in range(n):
        chip_ptr[i + 1] += chip_ptr[i]
        cursor[i] = chip_ptr[i]
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            i = slots[u, r]
            item_u[cursor[i]] = u
            item_r[cursor[i]] = r
            cursor[i] += 1


@nb.njit(cache=False)
def old_place(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity, unit_kv, w_copy,
              other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f, f_sram, buf_size,
              buf_read, buf_density, buf_order, buf_spill, item_order, chip_sorted):
    """place_design_ordered as it was: each chiplet's items summed again, each trivial copy's size taken."""
    three = f_sram.shape[0] > 0
    index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r)
    spill = 0.0
    for i in range(n):
        a, b = chip_ptr[i], chip_ptr[i + 1]
        total = 0.0
        for y in range(a, b):
            u = item_u[y]
            total += item_size(unit_capacity[u], unit_kv[u], ncopy[u], split)
        cap = resident_capacity(stream_buf, stacks[i], hbm_cap, sram_cap[kind[i]])
        fast = min(sram_tier(stacks[i], sram_cap[kind[i]]), cap) if three else 0.0
        chip_sorted[i] = False
        if placement_is_trivial(cap, total) and (fast <= 0.0 or total <= fast):
            for y in range(a, b):
                u = item_u[y]
                f[u, item_r[y]] = trivial_spill(cap, item_size(unit_capacity[u], unit_kv[u], ncopy[u], split))
                if three:
                    f_sram[u, item_r[y]] = 1.0 if fast > 0.0 else 0.0
            stored[i] = total
            overflow[i] = total if cap <= 0.0 and total > 0.0 else 0.0
        else:
            stored[i], overflow[i] = place_chiplet(cap, fast, kind[i], item_u, item_r, a, b - a, ncopy, split,
                                                   unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                   buf_read, buf_density, buf_order, buf_spill, f, f_sram)
            if not three:
                for x in range(b - a):
                    item_order[a + x] = a + buf_order[x]
                chip_sorted[i] = True
        spill += overflow[i]
    return spill


@nb.njit(cache=False)
def new_place(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity, unit_kv, w_copy,
              other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f, f_sram, buf_size,
              buf_read, buf_density, buf_order, buf_spill, item_order, chip_sorted):
    return place_design_ordered(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity,
                                unit_kv, w_copy, other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored,
                                overflow, f, f_sram, buf_size, buf_read, buf_density, buf_order, buf_spill,
                                item_order, chip_sorted)


def test_chiplet_bytes_summed_while_indexing_are_the_items_sums(prepared):
    ev, space = prepared.package_evaluator, prepared.space
    T = ev.kernel
    X = np.random.default_rng(8).integers(space.lower, space.upper + 1, size=(30, space.n_var))
    d = ev.decode(X)
    sorted_chiplets = trivial = 0
    Ws = ev.workspace(ev.max_copies), ev.workspace(ev.max_copies)
    for cap in (T.hbm_cap, T.hbm_cap * 1e-3, 0.0):      # spills, and chiplets with no local tier
        for p in range(len(X)):
            out = []
            for place, W in zip((old_place, new_place), Ws):
                spill = place(int(d.chiplets[p]), d.kind[p], d.stacks[p], d.slots[p], d.ncopy[p], space.split, cap,
                              T.kind_sram_cap, T.stream_buf, T.unit_capacity, T.unit_kv, T.unit_w_copy,
                              T.unit_other_dram, T.unit_read_scale, W.chip_ptr, W.cursor, W.item_u, W.item_r, W.stored,
                              W.overflow, W.f, W.f_sram, W.buf_size, W.buf_read, W.buf_density, W.buf_order,
                              W.buf_spill, W.item_order, W.chip_sorted)
                out.append((spill, W))
            (s0, W0), (s1, W1) = out
            assert s0 == s1 or (np.isnan(s0) and np.isnan(s1))
            for name in ("chip_ptr", "item_u", "item_r", "stored", "overflow", "f", "chip_sorted", "item_order"):
                assert np.array_equal(getattr(W0, name), getattr(W1, name), equal_nan=True), name
            sorted_chiplets += int(W0.chip_sorted.sum())
            trivial += int(d.chiplets[p] - W0.chip_sorted.sum())
    assert sorted_chiplets > 0 and trivial > 0       # both branches taken


def test_a_range_of_the_population_is_base_pass_of_each_design(prepared):
    ev, space = prepared.package_evaluator, prepared.space
    T, R = ev.kernel, ev.routes
    X = np.random.default_rng(4).integers(space.lower, space.upper + 1, size=(12, space.n_var))
    d = ev.decode(X)
    sh = ev._shapes(d.rows, d.cols)
    sizes = d.rows * d.cols
    res = np.zeros((len(X), len(PASS_FIELDS)))
    W = ev.workspace(ev.max_copies)
    for p in range(len(X)):
        base_passes(T, R, sh, sizes, d.kind, d.stacks, d.ddr, d.slots, d.ncopy, space.split, W, res, False, p, p + 1)
        one = base_pass(T, R, sh[p], sizes[p], d.kind[p], d.stacks[p], d.ddr[p], d.slots[p], d.ncopy[p], space.split,
                        ev.workspace(ev.max_copies))
        assert np.array_equal(res[p], one, equal_nan=True)
    assert (res[:, 1] > 0).all()
