"""The request's path around the engine (dse.serving.request_path) and the prefix cache's block
accounting, each by hand on a small case; the measured-vLLM suite's workload and plumbing (issue 50)."""
import numpy as np
import pytest

from dse.serving import Requests, simulate
from dse.serving.kv_cache import BLOCK, KvCache
from dse.serving.request_path import ENGINE_ONLY, VLLM_V1, RequestPath
from dse.serving.requests import shared_prefixes
from dse.serving.simulate import serve_requests

D = 0.010          # every pass takes D seconds (decode, prefill and mixed: see ConstantSteps)


class ConstantSteps:
    """Every step D: the pass over no tokens is D (decode of 1 and 4 equal), a token adds no compute
    (prefill of 4 and of 1 equal), so a mixed pass is D too (dse.serving.steps.mixed_step)."""

    def decode(self, batch, context):
        return D

    def prefill(self, batch, context):
        return D


def two_requests(b_sent: float) -> Requests:
    return Requests(arrival_s=np.array([0.0, b_sent]), prompt=np.array([16.0, 16.0]), output=np.array([100.0, 2.0]))


def test_request_path_terms_by_hand():
    # A (100 tokens out) keeps the engine stepping every D from its arrival; B reaches the engine 2.4 D
    # after A, in A's third step [h + 2D, h + 3D). With async scheduling the fourth step was scheduled when
    # the third started, so B joins the fifth, [h + 4D, h + 5D): TTFT = h + 2.6 D + s; without, the fourth.
    h, s = 0.003, 0.001
    path = RequestPath(intake_s=h, stream_s=s, async_scheduling=True)
    out = simulate(two_requests(2.4 * D), ConstantSteps(), scheduler="chunked", max_batch=8, path=path)
    ttft = out.first_token_s - out.arrival_s
    assert ttft[0] == pytest.approx(h + D + s)
    assert ttft[1] == pytest.approx(h + 2.6 * D + s)
    assert (out.done_s - out.arrival_s)[1] == pytest.approx(h + 3.6 * D + s)      # its second token one step on
    sync = simulate(two_requests(2.4 * D), ConstantSteps(), scheduler="chunked", max_batch=8,
                    path=RequestPath(intake_s=h, stream_s=s))
    assert (sync.first_token_s - sync.arrival_s)[1] == pytest.approx(h + 1.6 * D + s)
    bare = simulate(two_requests(2.4 * D), ConstantSteps(), scheduler="chunked", max_batch=8)
    assert (bare.first_token_s - bare.arrival_s)[1] == pytest.approx(1.6 * D)      # the engine alone, as before
    assert out.metrics()["mean_itl_ms"] == pytest.approx(D * 1e3)                 # gaps between lines: steps
    # an idle engine schedules an arriving request at once, async or not
    alone = simulate(two_requests(10.0), ConstantSteps(), scheduler="chunked", max_batch=8, path=path)
    assert (alone.first_token_s - alone.arrival_s)[1] == pytest.approx(h + D + s)


def test_metrics_have_vllm_p90_and_p99():
    out = simulate(two_requests(2.4 * D), ConstantSteps(), scheduler="chunked", max_batch=8, path=VLLM_V1)
    m = out.metrics()
    for name in ("ttft", "tpot", "itl", "e2el"):
        assert m[f"mean_{name}_ms"] > 0 and m[f"p90_{name}_ms"] <= m[f"p99_{name}_ms"]
    assert VLLM_V1.async_scheduling and 0.0 <= VLLM_V1.host_s <= 0.020 and ENGINE_ONLY.host_s == 0.0


def test_prefix_cache_block_accounting_by_hand():
    # 4 distinct prompts of 70 tokens (4 full blocks + 6), 2 prefixes of 40 tokens (2 full blocks + 8),
    # 8 requests far apart: prompts 0 and 1 miss, 2 and 3 find their prefix's 2 blocks, the second round
    # finds its whole prompt but the last partial block: min(4 full blocks, (70 - 1) // 16) = 4 blocks.
    base = Requests(arrival_s=np.arange(8) * 10.0, prompt=np.full(8, 70.0), output=np.full(8, 2.0))
    r = shared_prefixes(base, prefix_len=40, num_prefixes=2, num_distinct=4)
    cache = KvCache(1e6, caching=True)
    out = serve_requests(r, ConstantSteps(), "chunked", 8, 512, cache)
    assert out.prefix_hit_rate == pytest.approx((0 + 0 + 32 + 32 + 4 * 64) / (8 * 70))
    assert cache.in_use() == 0                       # every sequence freed its blocks
    assert len(cache.cached) == 2 * 2 + 4 * 2        # the prefixes' 2 blocks each, each prompt's own 2 more
    # a prompt of exactly 4 blocks recomputes its last (vLLM computes the last token for its logits)
    assert cache.hit([("prefix", 0, 0), ("prefix", 0, 1), ("prompt", 0, 2), ("prompt", 0, 3)], 64) == 3


def test_calibration_workload_hit_rate():
    # 100 prompts of 547 tokens (a 100-token prefix, 6 full blocks, + 447) cycling: the first of each prefix
    # misses, the other 90 of the first hundred find the prefix's 96 tokens, every later one 544 (34 of its
    # 34 full blocks + 3: the last partial block recomputed)
    from dse.validation import serving_vllm as sv

    run = {"workload": "general"}
    order = np.random.default_rng(0).permutation(100)
    r = sv.stage_requests(run, {"num_requests": 400, "duration_s": 50.0}, order, 0.0, seed=1)
    out = serve_requests(r, ConstantSteps(), "chunked", 128, 2048, KvCache(1e6, caching=True))
    n = 400
    assert out.prefix_hit_rate == pytest.approx((90 * 96 + (n - 100) * 544) / (n * 547))
    assert 544 == (547 - 1) // BLOCK * BLOCK


def test_presets_of_the_runs():
    from dse.validation import serving_vllm as sv

    runs, stages = sv.load()
    assert {sv.preset(m) for m in runs["model_hf_id"]} == {"llama-3-8b", "mixtral-8x7b", "codellama-34b"}
    assert sv.preset("meta-llama/Llama-2-70b-hf") == "llama-2-70b"
    assert len(stages) == 52 and set(stages["experiment_id"]) <= set(runs["experiment_id"])


def test_serving_vllm_suite_runs_on_a_short_stage():
    # the suite's plumbing on one run with its stages cut to 15 s (dse fidelity --suite serving-vllm
    # serves every stage whole)
    from dse.validation import serving_vllm as sv

    rows = sv.table(runs=["26-llama-3-1-8b-tp2-general-2"], limit_s=15.0)
    assert len(rows) == 2 * len(sv.FIGURES)
    assert all(np.isfinite(r["modelled_ms"]) and r["modelled_ms"] > 0 for r in rows)
    ttft = [r for r in rows if r["figure"] == "ttft_mean_ms"]
    assert all(0.5 < r["ratio"] < 2.0 for r in ttft)


class RoutedSteps:
    """A model with routed experts, by hand: a decode of b sequences reads the experts they touch,
    10 ms + 2 ms a sequence up to 4 (every expert); a prefill touches them all (18 ms) and computes
    10 us a token."""
    routed = True

    def decode(self, batch, context):
        return 0.010 + 0.002 * min(batch, 4)

    def prefill(self, batch, context):
        return 0.018 + 1e-5 * batch * context


def test_a_small_chunk_rides_the_decodes_expert_reads():
    from dse.serving.steps import mixed_step, pass_fixed, pass_full

    s = RoutedSteps()
    assert pass_fixed(s) == pytest.approx(0.010)            # decode(1) less a third of decode(4) - decode(1)
    assert pass_full(s) == pytest.approx(0.018)             # every expert read, no token's compute
    # 8 decodes (every expert read: 18 ms) and a 3-token chunk: the chunk adds its compute, 30 us
    assert mixed_step(s, 8, 700, 1, 3) == pytest.approx(0.018 + 3e-5)
    # read as a dense model's (W = 10 ms shared) the chunk would add 8 ms of expert reads a second time
    s.routed = False
    assert mixed_step(s, 8, 700, 1, 3) == pytest.approx(0.010 + 0.008 + 0.00803)


def test_fidelity_prints_the_suite_within_80_columns_with_its_fitted_term(monkeypatch):
    # every run's id as printed (the stages' simulation replaced: the layout is what is checked)
    from click.testing import CliRunner

    from dse.cli import cli
    from dse.validation import common
    from dse.validation import serving_vllm as sv

    _, stages = sv.load()
    fake = [common.Case(f"{sv.short_id(e)}/{i}", "mean TTFT", "ms", 25.0, 26.0, "calibration", sv.SOURCE)
            for e, i in zip(stages["experiment_id"], stages["stage_index"])]
    monkeypatch.setattr(sv, "cases", lambda every=1: fake)
    result = CliRunner().invoke(cli, ["fidelity", "--suite", "serving-vllm"])
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "fitted: host_s 7.60 ms" in result.output and "calibration only" in result.output
    assert "sequence_s 21.0 us" in result.output


def test_cold_start_stalls_the_servers_first_step_once():
    # A sent at 0, B at 0.5 D: with a 3 D cold start A's first step ends at D + 3 D; B, waiting meanwhile,
    # joins the next step (4 D to 5 D), the stall paid once; without one A's TTFT is D
    out = serve_requests(two_requests(0.5 * D), ConstantSteps(), "chunked", 8, 512, KvCache(1e6),
                         cold_start_s=3 * D)
    assert (out.first_token_s - out.arrival_s) == pytest.approx([4 * D, 4.5 * D])
    assert (out.done_s - out.first_token_s)[0] == pytest.approx(99 * D)     # every later step D
    plain = serve_requests(two_requests(0.5 * D), ConstantSteps(), "chunked", 8, 512, KvCache(1e6))
    assert (plain.first_token_s - plain.arrival_s)[0] == pytest.approx(D)


def test_client_itl_counts_the_clients_tokens():
    # 248 tokens served in 1,000 ms after a 20 ms first line; the client counted 237 tokens: 980 / 236 ms
    from dse.validation import serving_vllm as sv

    e2e, ttft = np.array([1000.0]), np.array([20.0])
    stage = {"output_len_measured_mean": 237.0}
    assert sv.client_itl(e2e, ttft, stage, np.array([248.0]))[0] == pytest.approx(980.0 / 236.0)
    assert sv.client_itl(e2e, ttft, {}, np.array([248.0]))[0] == pytest.approx(980.0 / 247.0)
    # the stages' ITL column is that formula over their means, every stage
    _, stages = sv.load()
    formula = (stages["e2e_mean_ms"] - stages["ttft_mean_ms"]) / (stages["output_len_measured_mean"] - 1.0)
    assert np.allclose(formula, stages["itl_mean_ms"], rtol=1e-4)


def test_host_time_per_sequence_by_hand():
    # sequence_s = 1 ms a sequence a step, every pass D (no async scheduling, no host_s). A alone
    # (3 tokens): each step holds 1 sequence, D + 1 ms: first token at D + s, done at 3 (D + s). A and B
    # sent together (3 tokens each): every step holds 2, D + 2 s; ITL is that step.
    s = 0.001
    path = RequestPath(sequence_s=s)
    one = Requests(arrival_s=np.array([0.0]), prompt=np.array([16.0]), output=np.array([3.0]))
    out = simulate(one, ConstantSteps(), scheduler="chunked", max_batch=8, path=path)
    assert (out.first_token_s - out.arrival_s)[0] == pytest.approx(D + s)
    assert (out.done_s - out.arrival_s)[0] == pytest.approx(3 * (D + s))
    two = Requests(arrival_s=np.zeros(2), prompt=np.full(2, 16.0), output=np.full(2, 3.0))
    out = simulate(two, ConstantSteps(), scheduler="chunked", max_batch=8, path=path)
    assert (out.done_s - out.arrival_s) == pytest.approx([3 * (D + 2 * s)] * 2)
    assert out.metrics()["mean_itl_ms"] == pytest.approx((D + 2 * s) * 1e3)
    # the default path (the engine alone) adds nothing, as before
    assert simulate(two, ConstantSteps(), scheduler="chunked", max_batch=8).done_s == pytest.approx([3 * D] * 2)
    assert 0.0 <= VLLM_V1.sequence_s <= 100e-6


def test_fit_sequence_by_hand():
    # two stages modelled at 10 ms ITL with sequence_s = 0: one holding 20 sequences a step, one 50, the
    # client counting every step's line (lines_per_step 1); measured 10.4 and 11.0 ms: 20 us a sequence
    from dse.validation import serving_vllm as sv

    rows = [{"figure": "itl_mean_ms", "measured_ms": m, "modelled_ms": 10.0, "running": n, "lines_per_step": 1.0}
            for m, n in ((10.4, 20.0), (11.0, 50.0))]
    assert sv.fit_sequence(rows) == pytest.approx(20e-6)
    # a client counting fewer lines than steps (0.9: ITL over 9 lines of 10 steps) sees 1 / 0.9 of it
    rows = [{**r, "measured_ms": 10.0 + (r["measured_ms"] - 10.0) / 0.9, "lines_per_step": 1 / 0.9} for r in rows]
    assert sv.fit_sequence(rows) == pytest.approx(20e-6)


def test_vllm_stack_runs_kernels_at_their_in_graph_time():
    # the serving suite's GPUs run vLLM's full CUDA graphs: on the GH100 die each kernel at the H200's
    # measured in-graph time, not re-fitted; the A100 keeps its preset (no in-graph figure measured)
    from dse.validation import gpu
    from dse.validation import serving_vllm as sv

    in_graph = gpu.STACKS["pytorch-graphs"]["h200"]["kernel_overhead_us"]
    assert gpu.STACKS["vllm"]["h100"]["kernel_overhead_us"] == in_graph
    assert "a100" not in gpu.STACKS["vllm"]
    run = {"experiment_id": "x", "model_hf_id": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "tp": 1}
    study = gpu.case_study(sv.gpu_case(run))
    assert study.hardware.chiplets[0].kernel_overhead_us == pytest.approx(3.38)


def test_fit_sequence_secant_by_hand():
    # a stage at 10 ms (sequence_s = 0) and 12 ms (sequence_s = 40 us: 20 sequences a step, but the
    # loop draws more, 50 us of ITL per us of sequence_s), measured 11 ms: the secant gives 20 us, the
    # first order (20 sequences x 1 line a step) 50 us
    from dse.validation import serving_vllm as sv

    at0 = [{"figure": "itl_mean_ms", "measured_ms": 11.0, "modelled_ms": 10.0, "running": 20.0, "lines_per_step": 1.0}]
    at40 = [{**at0[0], "modelled_ms": 12.0}]
    assert sv.fit_sequence(at0) == pytest.approx(50e-6)
    assert sv.fit_sequence(at0, (40e-6, at40)) == pytest.approx(20e-6)


class RoutedConstantSteps(ConstantSteps):
    """ConstantSteps of a model with routed experts (its data-parallel ranks step together)."""
    routed = True


def test_data_parallel_ranks_of_a_mixture_of_experts_step_together():
    from dse.serving.simulate import serve_data_parallel

    # two ranks, requests dealt in turn. A (rank 0, 5 tokens) sent at 0; B (rank 1, 2 tokens) at 0.5 D.
    # In lockstep rank 1, with nothing scheduled, runs a dummy pass with A's first step [0, D): B joins
    # the next step, first token at 2 D (TTFT 1.5 D); a rank of its own serves B at once (TTFT D)
    r = Requests(arrival_s=np.array([0.0, 0.5 * D]), prompt=np.full(2, 16.0), output=np.array([5.0, 2.0]))
    caches = lambda: [KvCache(1e6), KvCache(1e6)]                                  # noqa: E731
    a, b = serve_data_parallel(r, RoutedConstantSteps(), "chunked", 8, 512, caches())
    assert (a.first_token_s - a.arrival_s)[0] == pytest.approx(D)
    assert (b.first_token_s - b.arrival_s)[0] == pytest.approx(1.5 * D)
    assert (b.done_s - b.arrival_s)[0] == pytest.approx(2.5 * D)
    a, b = serve_data_parallel(r, ConstantSteps(), "chunked", 8, 512, caches())    # dense: independent
    assert (b.first_token_s - b.arrival_s)[0] == pytest.approx(D)
    # the step is the slowest rank's: sequence_s = 1 ms, three requests of 3 tokens at 0, rank 0 holding
    # two (steps of D + 2 s), rank 1 one (D + s alone, D + 2 s in lockstep)
    s, path = 0.001, RequestPath(sequence_s=0.001)
    three = Requests(arrival_s=np.zeros(3), prompt=np.full(3, 16.0), output=np.full(3, 3.0))
    a, b = serve_data_parallel(three, RoutedConstantSteps(), "chunked", 8, 512, caches(), path)
    assert a.done_s == pytest.approx([3 * (D + 2 * s)] * 2) and b.done_s == pytest.approx([3 * (D + 2 * s)])
    a, b = serve_data_parallel(three, RoutedConstantSteps(), "chunked", 8, 512, caches(), path, lockstep=False)
    assert b.done_s == pytest.approx([3 * (D + s)])
    # a start-up stall (3 D) on the first step: rank 1's dummy pass pays it alongside rank 0's first step,
    # once; B joins the step after, at 4 D (TTFT 4.5 D), and no rank stalls again
    a, b = serve_data_parallel(r, RoutedConstantSteps(), "chunked", 8, 512, caches(), cold_start_s=3 * D)
    assert (a.first_token_s - a.arrival_s)[0] == pytest.approx(4 * D)
    assert (b.first_token_s - b.arrival_s)[0] == pytest.approx(4.5 * D)
    assert (a.done_s - a.first_token_s)[0] == pytest.approx(4 * D)


class RoutedLinearSteps:
    """A model with routed experts whose pass takes D a sequence (decode) or a prompt (prefill): a pass
    over one rank's batch D, over both ranks' 2 D."""
    routed = True

    def decode(self, batch, context):
        return D * batch

    def prefill(self, batch, context):
        return D * batch


def test_expert_group_runs_every_ranks_tokens():
    # vLLM's default for a mixture of experts on DP ranks: the expert layers one TP group over all DP x TP
    # GPUs, every rank's pass running every rank's tokens (dse.serving.data_parallel). Two requests at 0,
    # one a rank, 3 tokens each: alone each rank's passes take D (one prompt, then one decode); with the
    # group's table every pass is the group's over both ranks' batches, 2 D
    from dse.serving.data_parallel import union_sizes
    from dse.serving.simulate import serve_data_parallel

    assert union_sizes([(2, 100.0, 1, 16.0, 0.0), (1, 400.0, 0, 0.0, 0.0)]) == (3, 200.0, 1, 16.0, 0.0)
    r = Requests(arrival_s=np.zeros(2), prompt=np.full(2, 16.0), output=np.full(2, 3.0))
    caches = lambda: [KvCache(1e6), KvCache(1e6)]                                  # noqa: E731
    a, b = serve_data_parallel(r, RoutedLinearSteps(), "chunked", 8, 512, caches())
    assert a.first_token_s == pytest.approx([D]) and b.done_s == pytest.approx([3 * D])
    a, b = serve_data_parallel(r, RoutedLinearSteps(), "chunked", 8, 512, caches(), group=RoutedLinearSteps())
    assert a.first_token_s == pytest.approx([2 * D]) and b.first_token_s == pytest.approx([2 * D])
    assert a.done_s == pytest.approx([6 * D]) and b.done_s == pytest.approx([6 * D])
    # uneven ranks (two requests on rank 0, one on rank 1): every pass the group's over all three, 3 D
    three = Requests(arrival_s=np.zeros(3), prompt=np.full(3, 16.0), output=np.full(3, 3.0))
    group = RoutedLinearSteps()
    a, b = serve_data_parallel(three, RoutedLinearSteps(), "chunked", 8, 512, caches(), group=group)
    assert a.done_s == pytest.approx([9 * D] * 2) and b.done_s == pytest.approx([9 * D])
    # one rank idle: its dummy token rides in the group's pass (the prompt with one decode, then two
    # decodes of 1 + 1 sequences, 2 D each)
    from dse.serving.steps import mixed_step

    one = Requests(arrival_s=np.zeros(1), prompt=np.full(1, 16.0), output=np.full(1, 3.0))
    a, b = serve_data_parallel(one, RoutedLinearSteps(), "chunked", 8, 512, caches(), group=group)
    assert a.done_s == pytest.approx([mixed_step(RoutedLinearSteps(), 1, 1.0, 1, 16.0) + 4 * D])
