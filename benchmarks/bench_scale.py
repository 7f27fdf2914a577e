"""Issue 16's scale table: per case, the time `dse.prepare` takes, designs/s on one core (intact, with
every single-chiplet failure re-mapped, and with failures at the search's screening fidelity,
dse.search.screening; process time of one thread) and on all the machine's cores (wall time, the
population split over threads: dse.model.parallel), and the peak memory of the process.
Prints one row per case."""
import copy
import resource
import time

import numpy as np

import dse
from dse.model.parallel import cores
from dse.search.screening import screened

BASE = {"name": "scale", "workload": {"phase": "decode", "batch": 64, "context": 4096, "precision": "fp8",
                                      "routing": {"distribution": "zipf", "s": 0.5, "seed": 0}},
        "hardware": {"chiplets": [{"name": "sa", "kind": "systolic", "array": [256, 256], "dataflow": "ws",
                                   "sram_mb": 64, "freq_ghz": 1.0, "node": "5nm"}],
                     "memory": [{"kind": "hbm3e", "stacks": [4, 128]}, {"kind": "ddr5", "channels": [0, 16]}],
                     "package": {"topology": "mesh", "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-one"}, "search": {"objectives": ["latency", "energy"]}}
CASES = [("mixtral-8x7b", True, 2), ("mixtral-8x7b", True, 8), ("qwen3-30b-a3b", False, 16),
         ("qwen3-30b-a3b", True, 8), ("deepseek-v3", False, 8), ("deepseek-v3", True, 8)]
DESIGNS = 128


def rate(p, X, with_faults, threads=1):
    """Designs/s of the prepared study ``p``: process time on one thread, wall time on several."""
    p.package_evaluator.threads = threads
    ev = p.evaluator
    ev.metrics_array(X[:2], with_faults=with_faults)
    clock = time.process_time if threads == 1 else time.perf_counter
    start = clock()
    ev.metrics_array(X, with_faults=with_faults)
    return len(X) / (clock() - start)


def main() -> None:
    n = cores()
    print(f"{'model':<15} {'per layer':>9} {'chiplets':>8} {'units':>6} {'prepare s':>9} {'intact/s':>9} "
          f"{'faults/s':>9} {'screened':>9} {f'{n} cores':>9} {'peak MB':>8}")
    for model, per_layer, side in CASES:
        data = copy.deepcopy(BASE)
        data["workload"].update(model=model, per_layer=per_layer)
        data["hardware"]["package"]["mesh"] = {"rows": [side, side], "cols": [side, side]}
        start = time.perf_counter()
        p = dse.prepare(dse.Study.from_dict(data))
        prepare_s = time.perf_counter() - start
        X = np.random.default_rng(0).integers(p.space.lower, p.space.upper + 1, size=(DESIGNS, p.space.n_var))
        intact, faults, wide = rate(p, X, False), rate(p, X, True), rate(p, X, True, n)
        with screened(p.evaluator):
            screening = rate(p, X, True)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{model:<15} {str(per_layer):>9} {side * side:>8} {p.tables.n_units:>6} {prepare_s:>9.1f} "
              f"{intact:>9.0f} {faults:>9.0f} {screening:>9.0f} {wide:>9.0f} {peak:>8.0f}")


if __name__ == "__main__":
    main()
