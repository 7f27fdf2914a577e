"""Uneven pipeline stages in `workload.phase: train` studies: the same split, bubble and stage memory as
`dse train` (dse.training.stages), and even splits unchanged."""
import numpy as np
import pytest

import dse
import workloads
from dse.training import Strategy, iteration, load_system
from test_training_study import A100_STUDY


def test_an_uneven_pipeline_trains_as_dse_train_does():
    """Llama-2-7B's 32 layers on 3 pipeline stages x 2 data-parallel replicas of an A100-like package, against
    dse train's device model of the same GPU (itself checked against Megatron-LM's Table 1,
    tests/test_training.py): both take the balanced split 11, 11, 10 (the last stage carries the output
    layer and loss), 1F1B over the unequal stages gives the same bubble and iteration within 3 % (dse train's
    pipeline hand-offs and NCCL bus bandwidth against the system fabric's), and the deepest stage's memory
    (its layers' weights, 3 micro-batches in flight on the first stage) exactly."""
    d = {**A100_STUDY, "system": {"preset": "dgx-a100-80gb", "parallel": {"pipeline": [3], "replicas": [2]}}}
    p = dse.prepare(dse.Study.from_dict(d))
    m = p.evaluator(p.space.seeds[:1]).iloc[0]
    cfg, system = workloads.load_model("llama-2-7b"), load_system("dgx-a100-80gb")
    it = iteration(cfg, system, Strategy(tp=1, pp=3, dp=2, micro_batch=1, global_batch=64, seq=2048, zero=1,
                                         precision="bf16"))
    assert it.stage_layers == (11, 11, 10)
    assert p.system_evaluator.bank.split(32, 3) == it.stage_layers
    assert [int(h[h > 0].max(initial=0)) for h in p.system_evaluator.bank.get(3, 1).held] == [11, 11, 10]
    assert m["iteration_s"] == pytest.approx(it.iteration_s, rel=0.03)
    assert m["bubble_s"] == pytest.approx(it.breakdown["bubble_s"], rel=0.03)
    assert m["memory_per_device_bytes"] == pytest.approx(it.memory_per_device_bytes, rel=1e-9)


def test_uneven_bubble_is_the_forward_stages_beyond_the_slowest(tiny_dict):
    """GPT-2's 12 layers on 5 stages: 1F1B over unequal stages takes m t_max + (sum t - t_max) per pass
    (a flow shop of m identical jobs; Narayanan et al. SC'21 section 2.2 for equal stages): the bubble is
    the replica's forward latency (every stage and hand-off once) less its slowest stage, x (3 + r)."""
    d = dict(tiny_dict, workload={**tiny_dict["workload"], "phase": "train", "attention": "unfused"},
             training={"global_batch": 16}, system={"preset": "dgx-a100-80gb", "parallel": {"pipeline": [5]}})
    study = dse.Study.from_dict(d)
    p = dse.prepare(study)
    counts = p.system_evaluator.bank.split(12, 5)
    assert sum(counts) == 12 and len(set(counts)) > 1
    X = np.random.default_rng(2).integers(p.space.lower, p.space.upper + 1, size=(4, p.space.n_var))
    got = p.evaluator(X)
    forward = p.system_evaluator(X)
    stage = 4 * 512 / forward["throughput_tok_s"].to_numpy()
    bubble = 3.0 * (forward["latency_s"].to_numpy() - stage)
    assert got["bubble_s"].to_numpy() == pytest.approx(bubble, rel=1e-9)
    m = 16 // 4
    assert (got["iteration_s"] - got["dp_communication_s"] - got["optimizer_s"]).to_numpy() == pytest.approx(
        3.0 * m * stage + bubble, rel=1e-9)


@pytest.mark.parametrize("pipeline", [2, 3, 4])
def test_even_splits_are_unchanged_bit_for_bit(tiny_dict, pipeline):
    """P dividing the layers: the system's packages hold [p L / P, (p + 1) L / P) as without the training
    split, every metric the same to the bit, and the bubble (P - 1)(3 + r) t exactly."""
    d = dict(tiny_dict, workload={**tiny_dict["workload"], "phase": "train", "attention": "unfused"},
             training={"global_batch": 16}, system={"preset": "dgx-a100-80gb", "parallel": {"pipeline": [pipeline]}})
    X = None
    got = {}
    for split in (True, False):
        p = dse.prepare(dse.Study.from_dict(d))
        if not split:
            p.system_evaluator.bank.split = None
        if X is None:
            X = np.random.default_rng(3).integers(p.space.lower, p.space.upper + 1, size=(4, p.space.n_var))
        got[split] = p.evaluator.metrics_array(X)
        forward = p.system_evaluator(X)
    assert np.array_equal(got[True], got[False], equal_nan=True)
    stage = 4 * 512 / forward["throughput_tok_s"].to_numpy()
    bubble = got[True][:, p.evaluator.columns.index("bubble_s")]
    assert np.array_equal(bubble, (pipeline - 1) * 3.0 * stage)
