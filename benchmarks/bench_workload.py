"""Time workload extraction of the largest preset; prints seconds as the last line.

* deepseek-v3 prefill, batch 8, 8k context (grouped layers): the figure the issue asks to keep well
  under a second (last line);
* deepseek-v3 decode, batch 64, per_layer=True (58 x 256 = 14,848 expert units), zipf routing with
  inter-layer affinity (the affinity table included).
"""
import time

import workloads


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    workloads.extract("mixtral-8x7b", routing={"distribution": "zipf"})   # load the Numba cache once
    per_layer = best_of(lambda: workloads.extract(
        "deepseek-v3", phase="decode", batch=64, context=4096, per_layer=True,
        routing={"distribution": "zipf", "s": 0.5, "affinity": 0.5}), repeat=1)
    wl = workloads.extract("deepseek-v3", phase="decode", batch=64, context=4096, per_layer=True)
    print(f"deepseek-v3 decode batch 64, per_layer ({wl.graph.number_of_nodes()} units, {len(wl.ops)} op rows), "
          f"zipf + affinity: {per_layer:.2f} s")
    grouped = best_of(lambda: workloads.extract("deepseek-v3", phase="prefill", batch=8, context=8192))
    print(f"deepseek-v3 prefill batch 8 context 8192: {grouped:.3f} s")


if __name__ == "__main__":
    main()
