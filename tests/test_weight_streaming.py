"""Issue 55: weight streaming (``stream_weights`` on a DDR entry). A chiplet whose local tier (an SRAM-resident
kind's SRAM, or its HBM) holds two buffers of the largest layer copies the bytes its units keep in DDR into one
buffer while the layer before computes from the other (SambaNova SN40L's DDR to HBM / SRAM copies, Prabhakar et
al., arXiv 2405.07518; Cerebras's weight streaming from MemoryX): a streamed copy takes max(its kernels reading
every byte from the local tier, its DDR bytes' transfer), the step adds the pipeline's fill (the first streamed
layer's transfer), and the resident bytes fill what the two buffers leave of the local tier."""
from __future__ import annotations

import numpy as np
import pytest

from dse.errors import StudyError
from dse.model.copy_cost import ChipletMemory, PowerTerms, copy_roofline

GIB = 2 ** 30


def test_a_streamed_copy_takes_the_longer_of_its_reads_from_the_fast_tier_and_its_transfer():
    # one operator reading b bytes, a fraction f of them held in DDR, with c seconds of compute
    b, f, c = 3.0e9, 0.25, 1.0e-3
    ops = (np.array([0, 1]), np.full((1, 1), c), np.array([b]), np.zeros((1, 1)), np.ones(1), np.zeros((1, 1)))
    power = PowerTerms(0.0, 0.7, 0.0, 0.0)
    for ddr_bw, bound in ((100e9, "transfer"), (1e12, "compute")):
        memory = ChipletMemory(1.6e12, ddr_bw, 4e-12, 15e-12, 0.0, 0.0, ddr_bw)
        cost = copy_roofline(0, 0, 1, 1.0, b, f, 0.0, memory, (1.0, 0.0, 0.0), *ops, power, np.zeros((1, 1)))
        transfer = f * b / ddr_bw
        fast = max(c, b / 1.6e12)              # every byte read from the local tier, overlapped with compute
        assert cost.stream_s == pytest.approx(transfer, rel=1e-12)
        assert cost.time_s == pytest.approx(max(fast, transfer), rel=1e-12)
        assert (cost.time_s == pytest.approx(transfer)) == (bound == "transfer")
        assert cost.ddr_bytes == pytest.approx(f * b)
        assert cost.dram_j == pytest.approx(b * 4e-12 + f * b * (15e-12 + 4e-12), rel=1e-12)


def _prepare(stream: bool | None, chiplet: str = "sn40l-like", hbm: bool = True):
    import dse
    memory = [{"kind": "hbm3", "stacks": [1, 1], "overrides": {"capacity_gib": 1.0, "data_rate_gbps": 3.125}}] \
        if hbm else []
    ddr = {"kind": "ddr5", "channels": [1, 1]}
    if stream is not None:
        ddr["stream_weights"] = stream
    study = dse.Study.from_dict({
        # GPT-2 decoding 64 sequences of 1,024 tokens (tests/test_three_memory_tiers.py): 0.33 GB of weights and
        # 2.4 GB of KV cache, more than SN40L's 0.52 GB SRAM + one 1 GiB HBM stack
        "name": "stream", "workload": {"model": "gpt2", "phase": "decode", "batch": 64, "context": 1024},
        "hardware": {"chiplets": [{"preset": chiplet}], "memory": memory + [ddr],
                     "package": {"mesh": {"rows": 1, "cols": 1}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": 1},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})
    return study, dse.prepare(study)


def _design(prepared, chiplet: str = "sn40l-like", stacks: int = 1):
    from dse.study.space import Design
    return Design(rows=1, cols=1, chiplets=[chiplet], hbm_stacks=[stacks], ddr_channels=1, link="ucie-advanced",
                  mapping="many-to-many", placement={u: [0] for u in prepared.tables.unit_names})


def _layers_by_hand(prepared, design, stream: bool):
    """The step's layers on the one chiplet, composed by hand from each unit's kernels alone: (sum over layers of
    repeat x max(compute reading from the fast tier, transfer), fill, resident bytes, units streamed)."""
    from dse.model.breakdown import design_state
    W, d = design_state(design, prepared)
    ev = prepared.for_design(design).package_evaluator
    T = ev.kernel
    k = int(d.kind[0][0])
    ddr_bw = T.ddr_bw * 1                                     # one channel
    memory = ChipletMemory(T.hbm_bw, ddr_bw, T.hbm_e, T.ddr_e, T.kind_sram_bw[k], T.kind_sram_e[k], 0.0)
    eff = T.kind_mem_eff[k]
    total, fill, streamed = 0.0, 0.0, []
    for u in range(len(prepared.tables.unit_names)):
        b = T.unit_w_copy[u, 1] + T.unit_other_dram[u, k]
        f, g = W.f[u, 0], W.f_sram[u, 0]
        kernels = copy_roofline(u, k, 1, T.unit_w_ratio[u, 1], b, 0.0 if stream else f, g, memory,
                                (eff, T.kind_overhead[k], T.kind_dispatch[k]), T.op_ptr, T.op_time, T.op_w, T.op_o,
                                T.op_prob, T.op_inv, PowerTerms(T.kind_limit[k], T.kind_floor[k], T.kind_static_w[k],
                                                                T.kind_active_w[k]), T.op_e).time_s
        transfer = f * b / (ddr_bw * eff) if stream else 0.0
        if transfer > 0.0:
            fill = fill or transfer                           # the first streamed layer's: hidden behind nothing
            streamed.append((kernels, transfer))
        s = T.unit_stage[u]
        total += T.stage_repeat[s] * T.stage_prob[s] * max(kernels, transfer)
    resident = float(((T.unit_capacity + T.unit_kv) * (1.0 - W.f[: len(T.unit_kv), 0])).sum())
    return total, fill, resident, streamed


def test_a_pipeline_of_layers_takes_its_fill_plus_each_layers_longer_of_compute_and_transfer():
    # old code: no stream_weights key (the study is refused)
    _, off = _prepare(False)
    _, on = _prepare(True)
    design = _design(on)
    lat_off = off.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
    lat_on = on.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
    layers_off, fill_off, resident_off, _ = _layers_by_hand(off, design, False)
    layers_on, fill_on, resident_on, streamed = _layers_by_hand(on, design, True)
    assert fill_off == 0.0 and fill_on > 0.0 and streamed
    # the rest of the step (hand-offs, the host's work per sequence) is the same with or without streaming
    assert lat_on - lat_off == pytest.approx((fill_on + layers_on) - layers_off, rel=1e-9)
    # the two buffers (two of the largest layer: the attention's weights and KV cache per layer) come out of the
    # local tier, SRAM + HBM: the resident bytes are that much fewer
    T = on.for_design(design).package_evaluator.kernel
    buffers = 2 * float(((T.unit_capacity + T.unit_kv) / T.stage_repeat[T.unit_stage]).max())
    assert T.stream_buf == pytest.approx(buffers)
    assert resident_off - resident_on == pytest.approx(buffers, rel=1e-9)


def test_streaming_off_leaves_every_figure_as_before():
    # the three-tier example of docs/arch.md (33.4 ms): stream_weights false is the default, and a study that
    # names it evaluates to the same floats
    _, plain = _prepare(None)
    _, off = _prepare(False)
    design = _design(off)
    a = plain.evaluator.evaluate_designs([design]).iloc[0]
    b = off.evaluator.evaluate_designs([design]).iloc[0]
    assert a["latency_s"] == pytest.approx(33.4e-3, abs=0.05e-3)
    assert a.equals(b)


def test_buffers_that_fit_no_fast_tier_are_refused_naming_the_key():
    # Groq's LPU holds 230 MB: two of GPT-2's attention layers with their KV cache (2 x 206 MB) do not fit
    with pytest.raises(StudyError) as err:
        _prepare(True, chiplet="groq-lpu-like", hbm=False)
    assert err.value.key == "hardware.memory[0].stream_weights"
    assert "GiB" in str(err.value)


def test_stream_weights_is_a_ddr_entrys_key():
    import dse
    with pytest.raises(Exception) as err:
        dse.Study.from_dict({
            "name": "x", "workload": {"model": "gpt2", "phase": "decode", "batch": 1, "context": 128},
            "hardware": {"chiplets": [{"preset": "sn40l-like"}],
                         "memory": [{"kind": "hbm3", "stacks": [1, 1], "stream_weights": True}],
                         "package": {"mesh": {"rows": 1, "cols": 1}, "link": "ucie-advanced"}},
            "search": {"objectives": ["latency"], "population": 4, "generations": 1}})
    assert "stream_weights is a DDR/LPDDR entry's key" in str(err.value)


def test_training_streams_weights_in_and_gradients_out_and_updates_in_the_tier(tiny_dict):
    """``workload.phase: train`` with a streamed DDR (Cerebras's MemoryX): each micro-batch's forward takes
    max(t, W / B), its backward the fill (one layer's weights) + max(2t, (W + G) / B) (16-bit weights in,
    16-bit gradients out over the one DDR path), and Adam's 28 bytes a parameter run at the DDR's bandwidth.
    Old code: no stream_weights key."""
    import memory
    import workloads
    import dse
    from dse.system.prepare import prepare_step
    d = dict(tiny_dict)
    d["workload"] = {**tiny_dict["workload"], "phase": "train", "attention": "unfused"}
    d["training"] = {"global_batch": 16, "recompute": "none", "zero": 1}
    d["hardware"] = {**tiny_dict["hardware"], "memory": [{"kind": "hbm3", "stacks": [1, 2]},
                                                         {"kind": "ddr5", "channels": [1, 2], "stream_weights": True}]}
    study = dse.Study.from_dict(d)
    p = dse.prepare(study)
    X = np.random.default_rng(1).integers(p.space.lower, p.space.upper + 1, size=(4, p.space.n_var))
    got = p.evaluator(X)
    forward = prepare_step(study).evaluator(X)
    params = p.tables.workload.summary["total_params"]
    layers = workloads.load_model("gpt2").layers
    for i, x in enumerate(X):
        t = 4 * 512 / forward["throughput_tok_s"].iloc[i]
        bw = memory.effective_bandwidth_Bps(p.tables.ddr, p.evaluator.designs(x[None])[0].ddr_channels)
        w = g = params * 2 / bw
        micro = w / layers + max(t, w) + max(2 * t, w + g)
        expected = 16 // 4 * micro + params * 28 / bw
        assert got["iteration_s"].iloc[i] == pytest.approx(expected, rel=1e-9)
        assert got["optimizer_s"].iloc[i] == pytest.approx(params * 28 / bw, rel=1e-9)


def test_a_streaming_designs_failure_leaves_what_the_survivor_serves_alone():
    # two SN40Ls each holding every unit, streaming: every failure is evaluated in full (its fill and buffers,
    # dse.model.population_kernel.in_full); losing either leaves the one-chiplet design's step time
    import dse
    from dse.study.space import Design

    def prepare(cols):
        memory = [{"kind": "hbm3", "stacks": [cols, cols], "overrides": {"capacity_gib": 1.0, "data_rate_gbps": 3.125}},
                  {"kind": "ddr5", "channels": [2, 2], "stream_weights": True}]
        study = dse.Study.from_dict({
            "name": "stream2", "workload": {"model": "gpt2", "phase": "decode", "batch": 64, "context": 1024},
            "hardware": {"chiplets": [{"preset": "sn40l-like"}], "memory": memory,
                         "package": {"mesh": {"rows": 1, "cols": cols}, "link": "ucie-advanced"}},
            "mapping": {"kind": "many-to-many", "max_replicas": cols},
            "search": {"objectives": ["latency", "fault_tolerance"], "population": 4, "generations": 1}})
        p = dse.prepare(study)
        design = Design(rows=1, cols=cols, chiplets=["sn40l-like"] * cols, hbm_stacks=[1] * cols, ddr_channels=2,
                        link="ucie-advanced", mapping="many-to-many",
                        placement={u: list(range(cols)) for u in p.tables.unit_names})
        return p.evaluator.evaluate_designs([design]).iloc[0]
    both, alone = prepare(2), prepare(1)
    assert both["latency_s"] / both["fault_tolerance_frac"] == pytest.approx(alone["latency_s"], rel=1e-9)
