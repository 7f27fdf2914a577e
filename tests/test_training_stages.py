"""Uneven pipeline stages (dse.training.stages): splits, the 1F1B bubble with unequal stage times by hand,
even splits unchanged, Llama 3 405B's 126 layers on 16 stages."""
import json

import pytest

import workloads
from dse.errors import StudyError
from dse.training import Strategy, iteration, layer_costs, load_system
from dse.training.memory import activation_bytes_per_token_layer
from dse.training.search import candidates
from dse.training.stages import balanced, in_flight, pipeline_s, schedule, schedule_s, split, stage_times
from dse.validation.training import LLAMA_3_405B

H100 = "dgx-h100-80gb"


def test_split_forms_and_refusals():
    assert split(126, 16, (7, 7)) == (7,) + (8,) * 14 + (7,)
    assert split(10, 3, (3, 4, 3)) == (3, 4, 3)
    assert split(10, 2, (6, 4)) == (6, 4)
    for bad in ((8, 8), (0, 10, 0), (3, 3, 3), (1, 2, 3, 4)):
        with pytest.raises(StudyError, match="--pp-layers"):
            split(10 if len(bad) != 2 else 126, 3 if len(bad) != 2 else 16, bad)


def test_balanced_split_charges_the_ends():
    # one layer takes 1; the last stage's output layer and loss take 0.6 of a layer, the embedding nothing
    assert balanced(126, 16, 1.0, 0.0, 0.6) == (7,) + (8,) * 14 + (7,)
    # a heavy head (2.5 layers) on 31 layers over 3 stages: 11, 11, 9 + 2.5 = 11.5 is the best slowest
    # stage of every split into three (checked by brute force); ties go to the lighter first stage
    assert balanced(31, 3, 1.0, 0.0, 2.5) == (11, 11, 9)
    best = min(max(a, b, 31 - a - b + 2.5) for a in range(1, 30) for b in range(1, 31 - a))
    assert best == 11.5
    assert balanced(12, 4, 1.0, 0.0, 0.0) == (3, 3, 3, 3)


def test_pipeline_by_hand_and_against_the_1f1b_schedule():
    # stages of 3, 4, 4, 2 s per micro-batch, 8 micro-batches: the slowest (4 s) sets the pace for 8
    # micro-batches and fill and drain add the others once: 8 x 4 + (3 + 4 + 2) = 41 s
    assert pipeline_s([3.0, 4.0, 4.0, 2.0], 8) == 41.0
    # equal stages: (m + p - 1) t (Narayanan et al. SC'21, section 2.2); the 1F1B schedule op by op agrees
    assert pipeline_s([3.0] * 4, 8) == schedule_s([1.0] * 4, [2.0] * 4, 8) == (8 + 4 - 1) * 3.0
    # uneven: never below the schedule, within 1 % on a Megatron-style split (first and last lighter)
    t = [7.2, 8.0, 8.0, 8.0, 7.6]
    exact = schedule_s([x / 3 for x in t], [2 * x / 3 for x in t], 16)
    assert exact <= pipeline_s(t, 16) <= 1.01 * exact
    assert in_flight(4, 8) == [4, 3, 2, 1] and in_flight(4, 2) == [2, 2, 2, 1]


@pytest.mark.parametrize("p, m, v", [(2, 2, 2), (4, 4, 2), (4, 8, 2), (4, 12, 3), (8, 16, 2), (8, 24, 3),
                                     (5, 10, 4), (3, 1, 1), (4, 9, 1), (6, 6, 1)])
@pytest.mark.parametrize("backward", [2.0, 2.3])        # 2 x the forward; + a selective recompute's core
def test_interleaved_1f1b_op_by_op_is_the_closed_form(p, m, v, backward):
    """Megatron-LM's (interleaved) 1F1B run op by op over p stages, m micro-batches, v chunks a stage: it ends
    at (m + (p - 1) / v) t (the bubble (p - 1) / (v m) of the work; Narayanan et al. section 2.2), and each
    stage holds at most `in_flight` micro-batches: the first p (1 + (p - 1) / (p v)) (Korthikanti et al.
    section 4.2.3) when m > p, every one when m = p, and the later stages nearly as many as the first."""
    makespan, held = schedule([1.0] * p, [backward] * p, m, v)
    assert makespan == pytest.approx(pipeline_s([1.0 + backward] * p, m, v), rel=1e-12)
    assert held == pytest.approx(in_flight(p, m, v), rel=1e-12)
    if v > 1:
        assert held[0] == pytest.approx(min(m, p * (1 + (p - 1) / (p * v))), rel=1e-12)
        assert held[-1] == pytest.approx(m if m == p else p - (p - 1) / v, rel=1e-12)


def test_interleaved_memory_holds_every_micro_batch_at_most():
    """With m = p micro-batches the interleaved schedule runs every forward first: the first stage holds the
    p micro-batches, not p (1 + (p - 1) / (p v)) of them (the old closed form); with 2p, p + (p - 1) / v."""
    cfg, system = _gpt_small(12), load_system(H100)
    base = dict(tp=1, pp=4, dp=1, micro_batch=1, seq=1024, interleave=3)
    few, many = (iteration(cfg, system, Strategy(**base, global_batch=g)) for g in (4, 8))
    s = Strategy(**base, global_batch=4)
    per_layer = 1024 * activation_bytes_per_token_layer(cfg, 1024, 1, False, "none", s.attention)
    assert many.memory_per_device_bytes - few.memory_per_device_bytes == pytest.approx(3 * per_layer * 1.0, rel=1e-9)


def _gpt_small(layers: int):
    return workloads.parse_config({"model_type": "gpt2", "n_embd": 1024, "n_layer": layers, "n_head": 16,
                                   "vocab_size": 51200, "n_positions": 1024}, name="gpt-small")


def test_uneven_bubble_by_hand():
    """10 layers on 3 stages as 3, 4, 3 (unfused attention, no tp: a layer's backward is twice its forward)."""
    cfg, system = _gpt_small(10), load_system(H100)
    s = Strategy(tp=1, pp=3, dp=1, micro_batch=1, global_batch=8, seq=1024, attention="unfused", pp_layers=(3, 4, 3))
    c = layer_costs(cfg, system, s)
    it = iteration(cfg, system, s, c)
    layer = 3.0 * c.layer_fwd_s
    t = [3 * layer + 3.0 * c.embedding_fwd_s, 4 * layer, 3 * layer + 3.0 * c.ends_fwd_s]
    assert it.stage_layers == (3, 4, 3)
    assert it.breakdown["bubble_s"] == pytest.approx(sum(t) - max(t), rel=1e-12)
    assert sum(it.breakdown.values()) == pytest.approx(it.iteration_s, rel=1e-12)
    assert it.iteration_s - it.breakdown["pp_communication_s"] - it.breakdown["optimizer_s"] == \
        pytest.approx(8 * max(t) + sum(t) - max(t), rel=1e-12)


def test_even_split_given_or_default_is_the_same():
    cfg, system = _gpt_small(12), load_system(H100)
    base = dict(tp=1, pp=4, dp=2, micro_batch=1, global_batch=16, seq=1024, zero=1)
    plain = iteration(cfg, system, Strategy(**base))
    given = iteration(cfg, system, Strategy(**base, pp_layers=(3, 3)))
    assert plain == given and plain.stage_layers == (3, 3, 3, 3)
    micro = (plain.iteration_s - plain.breakdown["pp_communication_s"] - plain.breakdown["dp_communication_s"]
             - plain.breakdown["optimizer_s"]) / (8 + 4 - 1)
    assert plain.breakdown["bubble_s"] == pytest.approx(3 * micro, rel=1e-12)      # (p - 1) t


def test_llama_3_405b_on_16_stages():
    """Meta's split (Llama 3 paper, section 3.3.2: one layer fewer on the first and last of 16 stages)
    is the default for 126 layers; the deepest stages set the pace; memory peaks on stage 2 (8 layers x 15
    micro-batches in flight beat 7 x 16)."""
    cfg = workloads.parse_config({**LLAMA_3_405B, "num_hidden_layers": 126}, name="llama-3-405b")
    system = load_system(H100)
    s = Strategy(tp=8, pp=16, dp=128, micro_batch=1, global_batch=2048, seq=8192, sequence_parallel=True, zero=1,
                 overlap_grad_reduce=True)
    c = layer_costs(cfg, system, s)
    it = iteration(cfg, system, s, c)
    assert it.stage_layers == (7,) + (8,) * 14 + (7,)
    assert it.fits and it.iteration_s > 0
    heavier = iteration(cfg, system, Strategy(**{**s.__dict__, "pp_layers": (8, 6)}), c)
    assert heavier.memory_per_device_bytes > it.memory_per_device_bytes     # 8 layers x 16 in flight on stage 1
    interleaved = iteration(cfg, system, Strategy(**{**s.__dict__, "interleave": 7}), c)
    assert interleaved.breakdown["bubble_s"] == pytest.approx(it.breakdown["bubble_s"] / 7, rel=1e-12)


def test_search_tries_non_dividing_pp():
    cfg = _gpt_small(10)
    found = {s.pp for s in candidates(cfg, 12, 24, 1024, {})}
    assert {3, 4, 6, 12}.isdisjoint({p for p in found if p > 10}) and {3, 4, 6} <= found


@pytest.mark.parametrize("value, flag", [("7,x", "--pp-layers"), ("0,32", "--pp-layers"), ("10,10,10,3", "--pp-layers"),
                                         ("20,20", "--pp-layers")])
def test_bad_pp_layers_are_one_line_errors(dse_cli, value, flag):
    code, out, err = dse_cli("train", "llama-3-8b", "--system", H100, "--devices", "24", "--tp", "8", "--pp", "3",
                             "--dp", "1", "--global-batch", "8", "--seq", "2048", "--pp-layers", value)
    assert code == 2 and flag in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_uneven_split(dse_cli):
    code, out, err = dse_cli("train", "llama-3-8b", "--system", H100, "--devices", "24", "--tp", "8", "--pp", "3",
                             "--dp", "1", "--global-batch", "48", "--seq", "2048", "--pp-layers", "10,12,10", "--json")
    assert code == 0, err
    assert json.loads(out)["pp_layers"] == [10, 12, 10]
