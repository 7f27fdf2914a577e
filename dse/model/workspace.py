"""Scratch arrays of the step model's kernels: one `Workspace` per evaluation call (a fresh one per call keeps
the evaluator thread-safe), sized for the largest package of the study and reused design after design."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .kernel_tables import MEMO_COPIES, KernelTables
from .routes import ROUTE_LANES, SPARE_SETS

Workspace = namedtuple("Workspace", [
    # intact design (base pass)
    "ct", "ht", "sd", "stage_t", "comm", "stage_e_compute", "stage_e_dram", "stage_dram", "stage_net", "stage_e_net",
    "copy_time", "copy_ddr", "ar_time", "f", "loads", "edge_lat", "edge_amt", "stored", "overflow", "chip_ptr",
    "item_u", "item_r", "cursor", "buf_size", "buf_read", "buf_density", "buf_order", "buf_spill", "buf_u", "buf_r",
    # each chiplet's copies in density order where the base pass sorted them (dse.model.hbm_placement)
    "item_order", "chip_sorted", "buf_pos", "buf_in",
    # one failure set (dse.model.failures)
    "slots2", "count2", "f2", "moved", "moved_list", "stored2", "overflow2", "in_a", "a_list", "is_dead", "dead",
    "dirty", "dirty_list", "bk_ct", "bk_ht", "bk_sd", "bk_stage_t", "seen", "edge_list", "bk_edge_lat", "row_slot",
    "aff_rows", "new_loads", "bk_comm", "lq", "bk_lq",
    # scenarios
    "finish", "cps", "in_scen", "busy", "host_busy", "order",
    # hand-off bytes per chiplet pair of one (stage, instance), routed once per pair (``pair_amt`` all 0.0
    # between stages: dse.model.hand_offs.stage_hand_offs)
    "pair_amt", "pair_seen", "pair_list",
    # fractions of each copy in host DRAM and on SSD (dse.model.offload; no rows without those tiers)
    "f_host", "f_ssd",
    # fraction of each copy in an SRAM-resident chiplet's SRAM in front of its HBM (dse.model.hbm_placement;
    # no rows unless such a kind can attach HBM: KernelTables.sram_over_hbm)
    "f_sram",
    # a survivor's free local capacity while units re-map onto it (dse.model.failure_remap.remap)
    "free",
    # copy costs already computed for one design's failures (dse.model.failures): [cost class, chiplet class,
    # copies] time, DDR bytes and the call they belong to; each chiplet's class, the calls so far
    "memo_t", "memo_d", "memo_stamp", "combo", "memo_calls"])

#: the copy-cost memo of dse.model.failures keeps at most this many chiplet classes (kind, HBM stacks) of a
#: design and copy counts up to kernel_tables.MEMO_COPIES; others are computed each time
MEMO_COMBOS = 16


def make_workspace(T: KernelTables, max_chips: int, max_links: int, max_copies: int) -> Workspace:
    """Scratch arrays for one design at a time, sized for the largest package of the study. A load row holds
    ``max_links`` links and `ROUTE_LANES` spare lanes a padded route walk writes to (dse.model.routes); a load
    row of the failure pass (``new_loads``) `ROUTE_LANES` x `SPARE_SETS` of them (dse.model.routes.walk_routes)."""
    S = T.stage_repeat.shape[0]
    LM = max_links + ROUTE_LANES
    LF = max_links + ROUTE_LANES * SPARE_SETS
    U = T.unit_capacity.shape[0]
    E = T.edge_src.shape[0]
    n_scen = T.scen_prob.shape[0]
    items = U * max_copies
    memo = (int(T.unit_cost_class.max()) + 1 if U else 0, min(max_chips, MEMO_COMBOS), min(max_copies, MEMO_COPIES) + 1)
    f = lambda *shape: np.zeros(shape)  # noqa: E731
    i64 = lambda *shape: np.zeros(shape, np.int64)  # noqa: E731
    b = lambda *shape: np.zeros(shape, np.bool_)  # noqa: E731
    return Workspace(
        ct=f(S, max_chips), ht=f(S, max_chips), sd=f(S), stage_t=f(S), comm=f(S, 2), stage_e_compute=f(S),
        stage_e_dram=f(S), stage_dram=f(S), stage_net=f(S), stage_e_net=f(S), copy_time=f(U, max_copies),
        copy_ddr=f(U, max_copies), ar_time=f(U), f=f(U, max_copies), loads=f(2 * S * LM), edge_lat=f(E),
        edge_amt=f(E), stored=f(max_chips), overflow=f(max_chips), chip_ptr=i64(max_chips + 1), item_u=i64(items),
        item_r=i64(items), cursor=i64(max_chips), buf_size=f(items), buf_read=f(items), buf_density=f(items),
        buf_order=i64(items), buf_spill=f(items), buf_u=i64(items), buf_r=i64(items),
        item_order=i64(items), chip_sorted=b(max_chips), buf_pos=i64(items), buf_in=i64(items),
        slots2=np.full((U, max_copies), -1, np.int64), count2=i64(U), f2=f(U, max_copies), moved=b(U),
        moved_list=i64(U), stored2=f(max_chips), overflow2=f(max_chips), in_a=b(max_chips), a_list=i64(max_chips),
        is_dead=b(max_chips), dead=i64(max_chips), dirty=b(S), dirty_list=i64(S), bk_ct=f(S, max_chips),
        bk_ht=f(S, max_chips), bk_sd=f(S), bk_stage_t=f(S), seen=b(E), edge_list=i64(E), bk_edge_lat=f(E),
        row_slot=np.full(2 * S, -1, np.int64), aff_rows=i64(2 * S), new_loads=f(2 * S * LF), bk_comm=f(2 * S),
        lq=f(S, max_chips), bk_lq=f(S, max_chips),
        finish=f(S), cps=f(n_scen), in_scen=b(S), busy=f(max_chips), host_busy=f(max_chips), order=i64(n_scen),
        pair_amt=f(max_chips * max_chips), pair_seen=b(max_chips * max_chips), pair_list=i64(max_chips * max_chips),
        f_host=f(U if T.offload else 0, max_copies), f_ssd=f(U if T.offload else 0, max_copies),
        f_sram=f(U if T.sram_over_hbm else 0, max_copies),
        free=f(max_chips),
        memo_t=f(*memo), memo_d=f(*memo), memo_stamp=i64(*memo), combo=i64(max_chips), memo_calls=i64(1))
