"""Speed of the training model (issue 18): one `dse train` evaluation of the 1T-parameter GPT on 3,072 A100s
in-process (goal: under 50 ms), `--search` over its strategies (goal: under 10 s), and a training study's
evaluation rate (studies/train_llama2_7b.yaml) against the rate of the same designs' forward pass, in the
same run. Prints all three."""
import time
from pathlib import Path

import numpy as np

import dse
import workloads
from dse.system.prepare import prepare_step
from dse.training import Strategy, iteration, load_system
from dse.training.search import fastest

CFG = workloads.parse_config({"model_type": "gpt2", "n_embd": 25600, "n_layer": 128, "n_head": 160,
                              "vocab_size": 51200, "n_positions": 2048}, name="gpt-1t")
BASE = dict(ep=1, recompute="full", sequence_parallel=False, zero=0, precision="fp16")


def main() -> None:
    system = load_system("dgx-a100-80gb")
    s = Strategy(tp=8, pp=64, dp=6, micro_batch=1, global_batch=3072, seq=2048, interleave=2, **BASE)
    iteration(CFG, system, s)                       # warm the Numba caches
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        iteration(CFG, system, s)
        best = min(best, time.perf_counter() - start)
    print(f"one strategy, 1T GPT on 3,072 A100s: {best * 1e3:.1f} ms")
    start = time.perf_counter()
    strategy, it, tried = fastest(CFG, system, 3072, 3072, 2048, BASE)
    took = time.perf_counter() - start
    print(f"--search: {tried} strategies in {took:.2f} s; fastest tp {strategy.tp} pp {strategy.pp} dp {strategy.dp} "
          f"micro-batch {strategy.micro_batch} interleave {strategy.interleave}: "
          f"{it.model_tflops_per_device:.0f} TFLOP/s per GPU")
    study = dse.load_study(Path(__file__).parents[1] / "studies" / "train_llama2_7b.yaml")
    train, forward = dse.prepare(study), prepare_step(study)
    X = np.random.default_rng(0).integers(train.space.lower, train.space.upper + 1, size=(2000, train.space.n_var))
    rates = []
    for p in (forward, train):
        p.evaluator.metrics_array(X[:8])
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            p.evaluator.metrics_array(X)
            best = min(best, time.process_time() - start)
        rates.append(len(X) / best)
    print(f"training study (Llama-2-7B on 64-512 packages): {rates[1]:,.0f} designs/s, the forward pass alone "
          f"{rates[0]:,.0f} designs/s ({rates[0] / rates[1]:.2f}x)")


if __name__ == "__main__":
    main()
