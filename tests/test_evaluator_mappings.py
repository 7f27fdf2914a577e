"""The four mapping kinds on a case small enough to check by hand: two experts, two (or three) chiplets.

The expected numbers are written out here from first principles, not taken from the evaluator:
* a unit copy on a chiplet takes max(compute, bytes / HBM bandwidth) (roofline); compute comes from the
  arch cost table, bytes from the workload's operator table (weights read when the unit runs, times the
  probability that one of the copy's tokens selects it);
* a hand-off between chiplets takes one hop's latency plus its bytes over the link bandwidth;
* shards of a split unit all-reduce their output with a ring, 2(c - 1) steps of D/c bytes;
* a failed chiplet's units move to the survivor; throughput kept is latency before / latency after.
"""
import numpy as np
import pytest

import dse
from dse.study.space import Design

MODEL = "tests/data/moe-2e/config.json"


def _study(mapping, phase="decode", cols=2, memory=None):
    return dse.Study.from_dict({
        "name": f"two-experts-{mapping}",
        "workload": {"model": MODEL, "phase": phase, "batch": 8, "context": 64,
                     "routing": {"distribution": "zipf", "s": 1.5, "seed": 0}},
        "hardware": {"chiplets": [{"name": "c", "kind": "systolic", "array": [32, 32], "dataflow": "ws",
                                   "sram_mb": 4, "freq_ghz": 1.0, "node": "7nm"}],
                     "memory": memory or [{"kind": "hbm3", "stacks": [1, 2]}, {"kind": "ddr5", "channels": [1, 1]}],
                     "package": {"mesh": {"rows": 1, "cols": cols}}},
        "mapping": {"kind": mapping, "max_replicas": 2},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})


def _design(cols, placement, mapping):
    return Design(rows=1, cols=cols, chiplets=["c"] * cols, hbm_stacks=[1] * cols, ddr_channels=1,
                  link="ucie-advanced", mapping=mapping, placement=placement)


class Hand:
    """The step model written out for one kind of chiplet with one HBM stack each (nothing spills)."""

    def __init__(self, prepared):
        t = prepared.tables
        self.t = t
        self.wl = t.workload
        ops = self.wl.ops
        self.weight_if_run = {u: float((ops[ops.unit == u].weight_bytes * ops[ops.unit == u].layers).sum())
                              for u in t.unit_names}
        self.index = {u: i for i, u in enumerate(t.unit_names)}
        self.hop = t.link.hop_latency_s
        self.bw = t.link.bandwidth_Bps
        # a hand-off's busiest link at the routers' share of it (BookSim2's iSLIP router by default)
        self.handoff_bw = self.bw * prepared.study.hardware.package.switch_efficiency
        self.hbm = t.hbm_bw_Bps
        self.e_hbm = t.hbm.energy_j_per_byte
        self.e_byte_hop = prepared.package_evaluator.routes.pair_energy[1]     # chiplet 0 -> 1: one hop
        self.T = t.tokens_per_step

    def bytes_read(self, u, copies, split):
        """Weights read by one copy (when any of its tokens selects the unit) plus its share of the rest."""
        i = self.index[u]
        q = self.wl.graph.nodes[u]["selection_prob"]
        touch = 1 - (1 - q) ** (self.T if split else self.T / copies)
        weights = self.weight_if_run[u] * touch / (copies if split else 1)
        return weights + self.t.unit_other_dram[i, 0] / copies

    def copy_time(self, u, copies, split):
        i = self.index[u]
        return max(self.t.unit_time_s[i, 0] / copies, self.bytes_read(u, copies, split) / self.hbm)

    def latency(self, placement, split=False):
        """Step latency and its network byte-hops: per stage, the slowest chiplet plus the hand-offs."""
        total = 0.0
        byte_hops = 0.0
        stages = sorted({self.wl.graph.nodes[u]["stage"] for u in placement})
        for s in stages:
            units = [u for u in placement if self.wl.graph.nodes[u]["stage"] == s]
            busy = {}
            for u in units:
                chips = placement[u]
                c = len(chips)
                t = self.copy_time(u, c, split)
                if split and c > 1 and len(set(chips)) > 1:   # ring all-reduce: 2(c - 1) steps of D/c bytes
                    d = max(data["bytes"] for _, _, data in self.wl.graph.out_edges(u, data=True))
                    t += 2 * (c - 1) * (self.hop + d / c / self.bw)
                    byte_hops += 2 * (c - 1) * d / c * c
                for chip in chips:
                    busy[chip] = busy.get(chip, 0.0) + t
            load = {}                      # bytes per direction of the link between chiplets 0 and 1
            longest = 0.0
            for u in units:
                for a, _, data in self.wl.graph.in_edges(u, data=True):
                    senders = placement[a][:1] if split else placement[a]
                    receivers = placement[u]
                    amount = data["bytes"] / len(senders) / (1 if split else len(receivers))
                    for i in senders:
                        for j in receivers:
                            if i != j:
                                load[(i, j)] = load.get((i, j), 0.0) + amount
                                longest = self.hop
                                byte_hops += amount
            total += max(busy.values()) + longest + max(load.values(), default=0.0) / self.handoff_bw
        return total, byte_hops

    def dram_energy_per_token(self, placement, split=False):
        joules = sum(self.bytes_read(u, len(c), split) * len(c) for u, c in placement.items()) * self.e_hbm
        return joules / self.T


def _check(prepared, placement, mapping, failures):
    """The evaluator's latency, DRAM and network energy, and fault tolerance against the hand model."""
    hand = Hand(prepared)
    split = mapping == "one-to-many"
    design = _design(2, placement, mapping)
    m = prepared.evaluator.evaluate_designs([design]).iloc[0]
    latency, byte_hops = hand.latency(placement, split)
    assert m["latency_s"] == pytest.approx(latency, rel=1e-9)
    assert m["energy_dram_j_per_token"] == pytest.approx(hand.dram_energy_per_token(placement, split), rel=1e-9)
    assert m["net_byte_hops"] == pytest.approx(byte_hops, rel=1e-9)
    assert m["energy_network_j_per_token"] == pytest.approx(byte_hops * hand.e_byte_hop / hand.T, rel=1e-9)
    kept = [min(latency / hand.latency(after, split)[0], 1.0) for after in failures]
    assert m["fault_tolerance_frac"] == pytest.approx(np.mean(kept), rel=1e-9)
    assert m["worst_retained_frac"] == pytest.approx(min(kept), rel=1e-9)
    return m


REST = {"embed": [0], "L0.attn": [0], "lm_head": [0]}


def _all_on(chip, units):
    return {u: [chip] for u in units}


def test_one_to_one():
    prepared = dse.prepare(_study("one-to-one"))
    units = prepared.tables.unit_names
    placement = {**REST, "L0.e0": [0], "L0.e1": [1]}
    # either failure leaves one chiplet holding everything
    _check(prepared, placement, "one-to-one", [_all_on(1, units), _all_on(0, units)])


def test_many_to_one():
    prepared = dse.prepare(_study("many-to-one"))
    units = prepared.tables.unit_names
    placement = {**REST, "L0.e0": [1], "L0.e1": [1]}          # both experts share chiplet 1
    _check(prepared, placement, "many-to-one", [_all_on(1, units), _all_on(0, units)])


def test_one_to_many_splits_the_hot_expert():
    prepared = dse.prepare(_study("one-to-many"))
    units = prepared.tables.unit_names
    placement = {**REST, "L0.e0": [0, 1], "L0.e1": [1]}       # e0 in two shards, all-reduced
    # a lost shard is rebuilt on the survivor: both shards then sit on one chiplet
    after_0 = {**_all_on(1, units), "L0.e0": [1, 1]}
    after_1 = {**_all_on(0, units), "L0.e0": [0, 0]}
    _check(prepared, placement, "one-to-many", [after_0, after_1])


def test_many_to_many_replicates_the_hot_expert():
    prepared = dse.prepare(_study("many-to-many"))
    units = prepared.tables.unit_names
    placement = {**REST, "L0.e0": [0, 1], "L0.e1": [1]}       # e0 copied on both chiplets
    # the surviving replica takes over all of e0's tokens
    _check(prepared, placement, "many-to-many", [_all_on(1, units), _all_on(0, units)])


def test_replicating_the_hot_expert_beats_one_to_one_under_zipf():
    """Prefill (compute-bound): the hot expert (74 % of the tokens) on two chiplets halves its time; the
    cold one goes to the third. One-to-one can only give each expert its own chiplet: the hot one decides.
    (With a weight-stationary array the cold expert's 26 % of the tokens take about half the hot one's
    time: fill and drain do not shrink with the tokens.)"""
    one = dse.prepare(_study("one-to-one", phase="prefill", cols=3))
    many = dse.prepare(_study("many-to-many", phase="prefill", cols=3))
    assert one.tables.workload.graph.nodes["L0.e0"]["selection_prob"] > 0.7
    one_to_one = _design(3, {**REST, "L0.e0": [1], "L0.e1": [2]}, "one-to-one")
    replicated = _design(3, {**REST, "L0.e0": [1, 2], "L0.e1": [0]}, "many-to-many")
    a = one.evaluator.evaluate_designs([one_to_one]).iloc[0]
    b = many.evaluator.evaluate_designs([replicated]).iloc[0]
    assert b["latency_s"] < 0.75 * a["latency_s"]
    assert b["throughput_tok_s"] > a["throughput_tok_s"]
    # (fault tolerance is the price: one-to-one leaves chiplet 0 idle in the MoE stage, a ready spare)


def test_losing_a_replica_costs_less_than_losing_the_only_copy():
    """Tight memory and no DDR: each chiplet's HBM holds one expert. Losing the chiplet of e0's second
    copy costs throughput but nothing moves; losing the chiplet of e1's only copy leaves e1 nowhere to go."""
    probe = dse.prepare(_study("many-to-many", phase="prefill", cols=4))
    t = probe.tables
    size = dict(zip(t.unit_names, t.unit_capacity_bytes + t.unit_kv_bytes))
    rest = size["embed"] + size["L0.attn"] + size["lm_head"]
    capacity = max(size["L0.e0"], size["L0.e1"], rest) * 1.02
    assert capacity - rest < size["L0.e1"]                       # no chiplet has room for a moved expert
    memory = [{"kind": "hbm3", "stacks": [1, 1], "overrides": {"capacity_gib": capacity / 2**30}},
              {"kind": "ddr5", "channels": [0, 0]}]
    prepared = dse.prepare(_study("many-to-many", phase="prefill", cols=4, memory=memory))
    design = Design(rows=1, cols=4, chiplets=["c"] * 4, hbm_stacks=[1] * 4, ddr_channels=0, link="ucie-advanced",
                    mapping="many-to-many", placement={**REST, "L0.e0": [1, 2], "L0.e1": [3]})
    ev = prepared.package_evaluator
    assert ev.evaluate_designs([design]).iloc[0]["capacity_short_bytes"] == 0
    report = ev.failure_report(design).set_index("failed_chiplet")
    assert 0 < report.loc[2, "retained_frac"] < 1                 # e0's other copy serves all its tokens
    assert report.loc[2, "all_served"]
    assert report.loc[3, "retained_frac"] == 0                    # e1 had its only copy there
    assert not report.loc[3, "all_served"]
    assert ev.remapped(design, [2]).placement["L0.e0"] == [1]
