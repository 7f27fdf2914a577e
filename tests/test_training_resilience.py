"""Training with failures, checkpoints and restarts (dse.training.resilience): Young/Daly by hand, a
seeded Monte Carlo of failures over a job, failures off equal to today's figures, Meta's Llama 3 405B."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
from dse.training import Strategy, iteration, layer_costs, load_system
from dse.training.resilience import (Resilience, daly_interval_s, effective_frac, job_plan, lost_work_s, plan,
                                     resilience_from, young_interval_s)

import workloads

ROOT = Path(__file__).resolve().parents[1]
LLAMA3 = ROOT / "studies" / "resilience" / "llama-3.1-405b" / "config.json"


def test_young_and_daly_by_hand():
    # delta = 60 s, M = 3 h: Young sqrt(2 x 60 x 10,800) = sqrt(1,296,000) = 1,138.42 s (Young, CACM 1974);
    # Daly (FGCS 2006, eq. 37): x = 60 / 21,600 = 0.0027778, sqrt(x) = 0.052705,
    # 1,138.42 x (1 + 0.052705 / 3 + 0.0027778 / 9) - 60 = 1,138.42 x 1.017877 - 60 = 1,098.77 s
    assert young_interval_s(60.0, 10_800.0) == pytest.approx(1138.42, abs=0.01)
    assert daly_interval_s(60.0, 10_800.0) == pytest.approx(1098.77, abs=0.01)
    assert daly_interval_s(30_000.0, 10_000.0) == 10_000.0          # delta >= 2M: checkpoint every M


def _monte_carlo(lam, tau, delta, drain, restart, cycles, jobs, seed):
    """Jobs of ``cycles`` cycles (tau of training, then a checkpoint of delta, durable drain later), failures
    Poisson at ``lam`` over wall time (during restarts too, which then start again); every job restarts from
    its last durable checkpoint. Returns (kept training / wall time, wall time lost per failure)."""
    rng = np.random.default_rng(seed)
    cycle = tau + delta
    t = np.zeros(jobs)
    durable = np.zeros(jobs)
    failures = np.zeros(jobs)
    running = np.ones(jobs, dtype=bool)
    restarting = np.zeros(jobs, dtype=bool)
    while running.any():
        # restarts: a failure during one starts it again
        r = running & restarting
        while r.any():
            x = rng.exponential(1.0 / lam, jobs)
            hit = r & (x < restart)
            t += np.where(hit, x, 0.0) + np.where(r & ~hit, restart, 0.0)
            r = hit
        restarting[:] = False
        x = rng.exponential(1.0 / lam, jobs)
        left = (cycles - durable) * cycle
        done = running & (x >= left)
        failed = running & ~done
        t += np.where(done, left, 0.0) + np.where(failed, x, 0.0)
        durable += np.where(failed, np.maximum(0.0, np.floor((x - drain) / cycle)), 0.0)
        failures += failed
        restarting = failed.copy()
        running = failed.copy()
    kept = cycles * tau
    return kept / t.mean(), (t.sum() - jobs * cycles * cycle) / failures.sum()


@pytest.mark.parametrize("drain", [0.0, 40.0])
def test_lost_work_and_effective_time_match_a_monte_carlo(drain):
    # Llama 3's rate (419 failures in 54 days), 5-minute interval, a 3 s checkpoint, a 10-minute restart
    lam = 419 / (54 * 86_400.0)
    tau, delta, restart = 300.0, 3.0, 600.0
    mc_frac, mc_lost = _monte_carlo(lam, tau, delta, drain, restart, cycles=10_000, jobs=64, seed=7)
    lost = lost_work_s(lam, tau, delta, drain, restart)
    # to first order half a cycle, the drain and the restart (failures during the 10-minute restarts
    # lengthen it by e^{lam R} - 1 over lam R: 2.7 %)
    assert lost == pytest.approx((tau + delta) / 2 + drain + restart, rel=0.04)
    assert lost == pytest.approx(mc_lost, rel=0.02)
    assert effective_frac(lam, tau, delta, drain, restart) == pytest.approx(mc_frac, rel=0.02)


@pytest.fixture(scope="module")
def small():
    cfg = workloads.load_model("llama-2-7b")
    system = load_system("dgx-a100-80gb")
    s = Strategy(tp=2, pp=2, dp=2, micro_batch=1, global_batch=16, seq=1024, zero=1)
    costs = layer_costs(cfg, system, s)
    return cfg, system, s, costs, iteration(cfg, system, s, costs)


@pytest.fixture
def train(dse_cli):
    def run(*extra):
        return _train(dse_cli, *extra)
    return run


def _train(dse_cli, *extra):
    args = ["train", "llama-2-7b", "--system", "dgx-a100-80gb", "--devices", "8", "--tp", "2", "--pp", "2",
            "--dp", "2", "--global-batch", "16", "--seq", "1024", "--zero", "1", "--tokens", "1e9", "--json", *extra]
    code, out, err = dse_cli(*args)
    return code, (json.loads(out) if code == 0 else err)


def test_failures_off_leave_every_figure_as_today(train):
    code, today = train()
    assert code == 0 and "effective_training_frac" not in today
    code, off = train("--failures-per-day", "0", "--restart-minutes", "5")
    assert code == 0
    code, err = train("--failures-per-day", "0", "--storage", "local-nvme")   # no checkpoint: refused (issue 49)
    assert code == 2 and err.startswith("error: --storage")
    for key, value in today.items():
        assert off[key] == value, key
    assert off["effective_training_frac"] == 1.0 and off["goodput_tokens_per_s"] == today["tokens_per_s"]
    assert off["checkpoint_interval_s"] is None


def test_failures_cost_time_and_energy(train):
    code, today = train()
    code, failing = train("--mtbf-hours", "2", "--checkpoint-every", "auto", "--storage", "local-nvme")
    assert code == 0
    frac = failing["effective_training_frac"]
    assert 0.5 < frac < 1.0
    assert failing["time_to_train_s"] == pytest.approx(today["time_to_train_s"] / frac)
    assert failing["energy_to_train_j"] > today["energy_to_train_j"]
    assert failing["goodput_tokens_per_s"] == pytest.approx(today["tokens_per_s"] * frac)
    # the interval is Daly's, in whole iterations
    it_s = today["iteration_s"]
    assert failing["checkpoint_interval_s"] / it_s == pytest.approx(round(failing["checkpoint_interval_s"] / it_s))
    code, asynchronous = train("--mtbf-hours", "2", "--storage", "local-nvme", "--async-checkpoint")
    assert asynchronous["checkpoint_write_s"] < failing["checkpoint_write_s"]
    assert asynchronous["checkpoint_drain_s"] == pytest.approx(failing["checkpoint_write_s"])


def test_checkpoint_size_is_weights_and_adam_state(small):
    cfg, system, s, costs, it = small
    p = plan(Resilience(failures_per_s=1e-4), it.iteration_s, costs.dense_params + costs.expert_params, s, system)
    # megatron-core: bf16 weights (2) and fp32 master weights and Adam moments (12) per parameter
    assert p.checkpoint_bytes == pytest.approx(14 * (costs.dense_params + costs.expert_params))
    assert p.checkpoint_bytes / 14 == pytest.approx(6.74e9, rel=0.01)      # Llama 2 7B: 6.74 B parameters


@pytest.mark.parametrize("flags, key", [
    (("--failures-per-day", "-1"), "--failures-per-day"),
    (("--failures-per-day", "1", "--mtbf-hours", "3"), "--mtbf-hours"),
    (("--mtbf-hours", "0"), "--mtbf-hours"),
    (("--checkpoint-every", "often"), "--checkpoint-every"),
    (("--checkpoint-every", "-5"), "--checkpoint-every"),
    (("--storage", "tape"), "--storage"),
    (("--restart-minutes", "nan"), "--restart-minutes"),
])
def test_bad_values_name_the_flag(train, flags, key):
    code, output = train(*flags)
    assert code == 2 and key in output and len(output.strip().splitlines()) == 1


def test_system_failure_rates_scale_with_the_job(tmp_path):
    path = tmp_path / "h100.yaml"
    path.write_text("preset: dgx-h100-80gb\nfailure_rates: {device_per_day: 0.001, node_per_day: 0.01, "
                    "job_per_day: 0.5}\n")
    system = load_system(str(path))
    small_job = resilience_from(system_rates=system.failure_rates, devices=8, nodes=1)
    big_job = resilience_from(system_rates=system.failure_rates, devices=1024, nodes=128)
    assert small_job.failures_per_s * 86_400 == pytest.approx(0.008 + 0.01 + 0.5)
    assert big_job.failures_per_s * 86_400 == pytest.approx(1.024 + 1.28 + 0.5)
    path.write_text("preset: dgx-h100-80gb\nfailure_rates: {gpu: 1}\n")
    with pytest.raises(Exception, match="failure_rates"):
        load_system(str(path))


def test_llama3_405b_effective_training_time():
    """Meta's Llama 3 405B pre-training (Dubey et al., "The Llama 3 Herd of Models", arXiv:2407.21783):
    16,384 H100s, TP 8, PP 16, DP 128, 8,192-token sequences, 16M tokens a batch (Table 4); 419
    unexpected interruptions in 54 days (section 3.3.4, Table 5); checkpoints to Tectonic at 2 TB/s
    sustained, 1 MB to 4 GB per GPU (section 3.3.1); "higher than 90% effective training time". The
    126 layers on 16 uneven stages (7 + 14 x 8 + 7), so at most 7 chunks interleaved."""
    cfg = workloads.load_model(str(LLAMA3))
    system = load_system("dgx-h100-80gb")
    s = Strategy(tp=8, pp=16, dp=128, micro_batch=1, global_batch=2048, seq=8192, interleave=7, zero=2,
                 sequence_parallel=True, recompute="selective")
    costs = layer_costs(cfg, system, s)
    it = iteration(cfg, system, s, costs)
    params = costs.dense_params + costs.expert_params
    assert params == pytest.approx(405e9, rel=0.03)
    assert it.stage_layers == (7,) + (8,) * 14 + (7,)
    assert it.model_tflops_per_device == pytest.approx(400, rel=0.05)       # Meta: 400 TFLOP/s per GPU
    r = resilience_from(failures_per_day=419 / 54, storage="tectonic")
    p = plan(r, it.iteration_s, params, s, system)
    assert 1e6 < p.checkpoint_bytes / s.devices < 4e9               # Meta: 1 MB to 4 GB per GPU
    assert 0.90 < p.effective_training_frac < 0.95
    assert math.isfinite(p.checkpoint_interval_s) and p.checkpoint_interval_s > it.iteration_s


def _study(**resilience):
    from test_training_study import A100_STUDY
    d = {**A100_STUDY, "workload": {**A100_STUDY["workload"], "tokens": 1e10},
         "search": {"objectives": ["time_to_train", "cost"], "population": 8, "generations": 1}}
    if resilience:
        d["training"] = {**A100_STUDY["training"], "resilience": resilience}
    return d


def test_a_study_takes_the_same_keys_and_time_to_train_includes_failures():
    import dse
    from dse.training.resilience import from_spec
    plain = dse.prepare(dse.Study.from_dict(_study()))
    base = plain.evaluator(plain.space.seeds[:1]).iloc[0]
    assert "effective_training_frac" not in base.index
    spec = {"mtbf_hours": 1.0, "checkpoint_every": 20, "storage": "local-nvme", "restart_minutes": 5}
    failing = dse.prepare(dse.Study.from_dict(_study(**spec)))
    m = failing.evaluator(failing.space.seeds[:1]).iloc[0]
    assert m["iteration_s"] == base["iteration_s"]
    study = dse.Study.from_dict(_study(**spec))
    r = from_spec(study.training.resilience, 8, 1)
    p = job_plan(r, m["iteration_s"], 14 * 6.74e9, 1)
    assert m["effective_training_frac"] == pytest.approx(p.effective_training_frac, rel=0.01)
    assert m["time_to_train_s"] == pytest.approx(base["time_to_train_s"] / m["effective_training_frac"])
    assert m["goodput_tokens_per_s"] == pytest.approx(base["throughput_tok_s"] * m["effective_training_frac"])
    assert m["energy_to_train_j"] > base["energy_to_train_j"]
    # per-package rates scale with the design's packages: 8 packages at 3 a day each fail 24 times a day
    rated = dse.Study.from_dict(_study(failure_rates={"device_per_day": 3.0}))
    assert from_spec(rated.training.resilience, 8, 1).failures_per_s * 86_400 == pytest.approx(24.0)


@pytest.mark.parametrize("resilience, key", [
    ({"failures_per_day": 1, "mtbf_hours": 2}, "training.resilience"),
    ({"storage": "tape"}, "training.resilience.storage"),
    ({"checkpoint_every": "often"}, "training.resilience.checkpoint_every"),
    ({"checkpoint_every": -1}, "training.resilience.checkpoint_every"),
    ({"restart_minutes": -1}, "training.resilience.restart_minutes"),
    ({"failure_rates": {"gpu_per_day": 1}}, "training.resilience.failure_rates"),
    ({"mtbf": 3}, "training.resilience"),
])
def test_bad_resilience_keys_name_the_key(resilience, key):
    import dse
    with pytest.raises(dse.StudyError if hasattr(dse, "StudyError") else Exception) as info:
        dse.Study.from_dict(_study(**resilience))
    assert key in str(info.value)


def test_time_to_train_needs_a_token_budget():
    import dse
    d = _study()
    d["workload"] = {k: v for k, v in d["workload"].items() if k != "tokens"}
    with pytest.raises(Exception, match="time_to_train"):
        dse.Study.from_dict(d)


def test_an_ensemble_member_loses_only_its_own_work():
    """studies/resilience/ensemble_vs_monolith.py's figures (docs/training.md) from its iteration times:
    Llama-3-70B on 16,384 H100s (2.564 s) against eight Llama-3-8B members on 2,048 each (1.340 s), at
    Llama 3's per-GPU and per-node failure rates (Dubey et al. 2024, Table 5)."""
    rates = {"device_per_day": 268 / (16_384 * 54), "node_per_day": 151 / (2_048 * 54)}
    mono = resilience_from(storage="tectonic", system_rates=rates, devices=16_384, nodes=2_048)
    member = resilience_from(storage="tectonic", system_rates=rates, devices=2_048, nodes=256)
    assert mono.failures_per_s * 86_400 == pytest.approx(419 / 54)
    assert member.failures_per_s == pytest.approx(mono.failures_per_s / 8)
    p_mono = job_plan(mono, 2.564, 14 * 70.55e9, 2_048)
    p_member = job_plan(member, 1.340, 14 * 8.03e9, 256)
    assert p_mono.effective_training_frac == pytest.approx(0.939, abs=0.002)
    assert p_member.effective_training_frac == pytest.approx(0.992, abs=0.002)
    lost_mono = (1 - p_mono.effective_training_frac) * 16_384 * 24
    lost_ensemble = (1 - p_member.effective_training_frac) * 2_048 * 8 * 24
    assert lost_ensemble < lost_mono / 7
