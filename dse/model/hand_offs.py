"""Hand-offs between chiplets: a stage's input bytes along the package's routes, the shards' ring all-reduce,
and the busiest link.

Hand-offs into a stage (workload graph edges) follow the package's route tables (dse.model.routes): the
stage waits for the longest route (zero-load latency) plus the collective's software steps (a ring all-reduce
between tensor-parallel shards takes 2(t - 1), each the link's ``sync_latency_s``) plus the busiest link's
serialisation (bytes / bandwidth). A group of r identical layers pays its entry hand-offs once and its
layer-to-layer ones r - 1 times. Link loads are one flat row of ``LM`` floats per (stage, instance):
``loads[(2 s + instance) LM + link]``.
"""
from __future__ import annotations

import numba as nb
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .scenarios import FIRST, REST

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


@nb.njit(cache=True, inline="always", error_model="numpy")
def allreduce(u, slots, c, d, n, pb, pair_ptr, pair_latency, pair_energy, link_bw):
    """(time, byte-hops, energy) of the ring all-reduce of D bytes over the c shards of unit u.

    Ring all-reduce: 2(c - 1) steps, in each every shard sends D/c bytes to the next one; a step takes
    the slowest neighbour route plus D / (c x link bandwidth) (Patarasuk & Yuan 2009). Shards that all
    sit on one chiplet reduce locally: no network time.
    """
    lat = 0.0
    hops = 0.0
    energy = 0.0
    crosses = False
    for r in range(c):
        a, b = slots[nowrap(u), nowrap(r)], slots[nowrap(u), nowrap((r + 1) % c)]
        if a != b:
            crosses = True
            p = pb + a * n + b
            lat = max(lat, pair_latency[nowrap(p)])
            hops += pair_ptr[nowrap(p + 1)] - pair_ptr[nowrap(p)]
            energy += pair_energy[nowrap(p)]
    if not crosses:             # every shard on one chiplet: the reduction never leaves it
        return 0.0, 0.0, 0.0
    per_step = d / c
    steps = 2.0 * (c - 1)
    return steps * (lat + per_step / link_bw), steps * per_step * hops, steps * per_step * energy


@nb.njit(cache=True, inline="always", error_model="numpy")
def edge_amount(size, ca, cb, split):
    """Bytes each (sending copy, receiving copy) pair of an edge carries: shards of a one-to-many unit
    all-reduce first and one of them sends, every receiving shard needs the whole input; copies of a
    replicated unit share the bytes evenly."""
    return size / (1 if split else ca) / (1.0 if split else cb)


@nb.njit(cache=True, inline="always", error_model="numpy")
def handoff_latency(route_s, sync_s):
    """Latency of a hand-off whose longest route takes ``route_s`` (0: it stays on one chiplet): the route
    plus the collective's software steps (``edge_sync``: steps x the link's sync latency)."""
    return route_s + sync_s if route_s > 0.0 else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def in_instance(phase, instance):
    """Edge phases: 0 runs before every instance of its stage, 1 only before the first (entry from the
    previous group of layers), 2 before all but the first (a layer feeding the next identical layer)."""
    return phase == 0 or (phase == 1 and instance == FIRST) or (phase == 2 and instance == REST)


#: the bits of +inf as an int64: a float64 whose bits, read as an int64, exceed them is a NaN with the sign bit clear
INF_BITS = 0x7FF0000000000000


@intrinsic
def float_bits(typingctx, x):
    """The bits of a float64 as an int64 (a bit cast: no instruction in a vector register)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def bits_float(typingctx, x):
    """The float64 of an int64's bits (`float_bits` undone)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@nb.njit(cache=True, inline="always", error_model="numpy")
def longest_edge(edge_start, edge_phase, edge_lat, s, instance):
    """The longest route latency among the hand-offs into one instance of stage s (the failure pass's changed
    rows; a stage of DeepSeek-V3 per layer has hundreds of hand-offs).

    One maximum over the latencies' bits read as int64 (`busiest_link`'s method), which the compiler
    vectorises, a hand-off not into this instance counting as 0 (the bits of +0.0; edge phases are 0, 1 or 2, so
    `in_instance` is ``phase != skip``). The same bits as a running ``max`` from +0.0 over the instance's
    hand-offs in order: the largest latency that is a number above +0.0, else +0.0 (issue 52, thirteenth round;
    the twelfth round's four float chains before it)."""
    first, last = edge_start[nowrap(s)], edge_start[nowrap(s + 1)]
    skip = 2 if instance == FIRST else 1
    m = 0
    for e in range(first, last):
        v = float_bits(edge_lat[nowrap(e)]) if edge_phase[nowrap(e)] != skip else 0
        v = v if v <= INF_BITS else 0
        m = v if v > m else m
    return bits_float(m)


@nb.njit(cache=True, inline="always", error_model="numpy")
def busiest_link(row, base, link_inv_bw, lb, n_links):
    """Serialisation time of the busiest link of the load row starting at ``row[base]``: the largest of each
    link's load x inverse bandwidth that is a number above +0.0, else +0.0 (the bits of one running ``max`` from
    +0.0 in link order, which keeps its first argument unless the second is larger).

    Taken as a maximum over the products' bits read as int64, which the compiler vectorises (a float maximum
    cannot be reordered into vector lanes without a no-NaN flag; issue 52, thirteenth round). A float64 above +0.0
    (a subnormal up to +inf) has the bits of a positive int64, ordered as the values are; -0.0, negative numbers
    and NaNs with the sign bit set read as negative int64s and never exceed 0 (the bits of +0.0, the start); NaNs
    with it clear read above `INF_BITS` and count as 0. So the largest int64 is the bits of that product, or 0."""
    m = 0
    for link in range(n_links):
        v = float_bits(row[nowrap(base + link)] * link_inv_bw[nowrap(lb + link)])
        v = v if v <= INF_BITS else 0
        m = v if v > m else m
    return bits_float(m)


@nb.njit(cache=True, inline="always", error_model="numpy")
def add_route(row, base, pad_ptr, pad_links, p, amount):
    """Add ``amount`` to the load of every link of pair p's route in the load row starting at ``row[base]``
    (a negative ``amount`` takes it away: x + (-a) is x - a to the bit). The route is walked four links a
    step from its padded copy (dse.model.routes: the padding writes to the row's spare lanes, never read),
    each link's load updated as a walk of the route alone would, in the same order. Four: dse.model.routes.ROUTE_LANES."""
    for x in range(pad_ptr[nowrap(p)], pad_ptr[nowrap(p + 1)], 4):
        row[nowrap(base + pad_links[nowrap(x)])] += amount
        row[nowrap(base + pad_links[nowrap(x + 1)])] += amount
        row[nowrap(base + pad_links[nowrap(x + 2)])] += amount
        row[nowrap(base + pad_links[nowrap(x + 3)])] += amount


@nb.njit(cache=True, inline="always", error_model="numpy")
def add_route_once(row, base, walk_ptr, walk_links, p, amount):
    """`add_route` on the failure pass's copy of the padded routes (dse.model.routes.walk_routes: every route at
    least one step, its padding on its own set of spare lanes): the first step taken without a loop test, so a
    walk of an empty or a short route mispredicts no loop exit, and a walk's padding does not wait on the
    walk before it. Each link's load updated as `add_route` would, in the same order."""
    first = walk_ptr[nowrap(p)]
    row[nowrap(base + walk_links[nowrap(first)])] += amount
    row[nowrap(base + walk_links[nowrap(first + 1)])] += amount
    row[nowrap(base + walk_links[nowrap(first + 2)])] += amount
    row[nowrap(base + walk_links[nowrap(first + 3)])] += amount
    for x in range(first + 4, walk_ptr[nowrap(p + 1)], 4):
        row[nowrap(base + walk_links[nowrap(x)])] += amount
        row[nowrap(base + walk_links[nowrap(x + 1)])] += amount
        row[nowrap(base + walk_links[nowrap(x + 2)])] += amount
        row[nowrap(base + walk_links[nowrap(x + 3)])] += amount


@nb.njit(cache=True, inline="always", error_model="numpy")
def stage_hand_offs(s, n, split, slots, ncopy, pb, lb, L, LM, repeat, edge_start, edge_phase, edge_src, edge_dst,
                    edge_bytes, edge_sync, pair_ptr, pad_ptr, pad_links, pair_latency, pair_energy, link_inv_bw, comm,
                    loads, edge_lat, edge_amt, pair_amt, pair_seen, pair_list):
    """The hand-offs into stage s (``repeat`` identical instances) of an n-chiplet design on route table ``pb``
    / ``lb`` (``L`` links): each instance's time into ``comm[s]`` (longest hand-off + busiest link), each edge's
    latency and per-pair bytes into ``edge_lat`` / ``edge_amt``, the link loads into ``loads`` (rows of ``LM``:
    the L links, then spare lanes `add_route` writes to). A stage's bytes are summed per chiplet pair first,
    then each pair's route is walked once. ``pair_amt`` is all 0.0 between calls (a fresh workspace's zeros;
    each pair's sum is set back once routed), so a pair's first amount adds to 0.0 with no test, and a pair
    first seen is listed without a branch (a mispredicted branch per new pair cost more: issue 52, eighth
    round); the same sums, in the same order, as testing each pair.
    Returns (byte-hops, network energy) of the whole step."""
    comm[nowrap(s), nowrap(REST)] = 0.0
    hand_off_net = 0.0
    hand_off_e = 0.0
    for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
        edge_lat[nowrap(e)] = 0.0
    for instance in range(2 if repeat > 1 else 1):
        base = (2 * s + instance) * LM
        for link in range(L + 4):       # the links and the spare lanes of a padded walk (`add_route`)
            loads[nowrap(base + link)] = 0.0
        hops = 0.0
        energy = 0.0
        n_pairs = 0         # bytes per chiplet pair first, then each pair's route walked once
        slowest = 0.0       # the longest hand-off route into this instance
        for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
            if not in_instance(edge_phase[nowrap(e)], instance):
                continue
            a, b = edge_src[nowrap(e)], edge_dst[nowrap(e)]
            ca = 1 if split else ncopy[nowrap(a)]
            cb = ncopy[nowrap(b)]
            amount = edge_amount(edge_bytes[nowrap(e)], ca, cb, split)
            edge_amt[nowrap(e)] = amount
            longest = 0.0
            for ra in range(ca):
                i = slots[nowrap(a), nowrap(ra)]
                for rb in range(cb):
                    j = slots[nowrap(b), nowrap(rb)]
                    if i != j:
                        q = i * n + j
                        longest = max(longest, pair_latency[nowrap(pb + q)])
                        seen = pair_seen[nowrap(q)]     # a pair first seen goes on the list: no branch
                        pair_list[nowrap(n_pairs)] = q
                        n_pairs += 0 if seen else 1
                        pair_seen[nowrap(q)] = True
                        pair_amt[nowrap(q)] += amount     # 0.0 + amount for a new pair, as a sum from 0.0
            edge_lat[nowrap(e)] = handoff_latency(longest, edge_sync[nowrap(e)])
            slowest = max(slowest, edge_lat[nowrap(e)])
        for x in range(n_pairs):
            q = pair_list[nowrap(x)]
            pair_seen[nowrap(q)] = False
            amount = pair_amt[nowrap(q)]
            pair_amt[nowrap(q)] = 0.0       # every pair's sum back at 0.0 for the next stage
            p = pb + q
            add_route(loads, base, pad_ptr, pad_links, p, amount)
            hops += amount * (pair_ptr[nowrap(p + 1)] - pair_ptr[nowrap(p)])
            energy += amount * pair_energy[nowrap(p)]
        comm[nowrap(s), nowrap(instance)] = slowest + busiest_link(loads, base, link_inv_bw, lb, L)
        times = 1.0 if instance == FIRST else repeat - 1.0
        hand_off_net += times * hops
        hand_off_e += times * energy
    return hand_off_net, hand_off_e


@nb.njit(cache=True, inline="always", error_model="numpy")
def next_copy_pair(ra, rb, cb):
    """The (sending copy, receiving copy) pair after (ra, rb) among an edge's pairs in the nested loops' order (ra
    outer, rb inner over ``cb`` receiving copies), stepped by conditional expressions: an edge's ca x cb pairs then
    run in one loop, with one loop exit to mispredict per edge and side rather than one per sending copy."""
    wrap = rb + 1 == cb
    return (ra + 1 if wrap else ra), (0 if wrap else rb + 1)
