"""Issue 38's search at scale: the EPLB-style seed (dse.search.baseline) against the search's best design
at equal evaluations, on DeepSeek-V3 and Qwen3-30B-A3B per layer (studies/*_per_layer.yaml), per
encoding (search.encoding: unit, role), with and without the guided moves (dse.search.guided), over
three search seeds. Prints one row per run: the seed's and the best feasible latency (ms) and energy
(mJ/token), and the run's wall time (s). Usage: python benchmarks/bench_search_seed.py [POP GENS]
(default 32 x 5: 160 evaluations a run, the hidden DeepSeek-V3 study's budget)."""
import sys
import time

import dse
from dse.model.objectives import constraint_matrix
from dse.search import loop
from dse.search.baseline import eplb_seed
from dse.search.loop import run_search

STUDIES = ("studies/deepseek_v3_per_layer.yaml", "studies/qwen3_30b_a3b_per_layer.yaml")
CONFIGS = (("unit", False), ("unit", True), ("role", True))     # (encoding, guided moves)
SEEDS = (1, 2, 3)


def best(metrics, study) -> tuple[float, float]:
    """Lowest feasible latency (ms) and energy (mJ/token)."""
    ok = (constraint_matrix(metrics, study) <= 0).all(axis=1)
    m = metrics[ok]
    return 1e3 * m["latency_s"].min(), 1e3 * m["energy_j_per_token"].min()


def main(population: int = 32, generations: int = 5) -> None:
    print(f"{'study':<12}{'encoding':<9}{'guided':<7}{'seed':>4}{'evals':>6}{'EPLB ms':>9}{'best ms':>9}"
          f"{'EPLB mJ':>8}{'best mJ':>8}{'time s':>7}")
    share = loop.GUIDED_SHARE
    for path in STUDIES:
        study = dse.load_study(path)
        prepared = dse.prepare(study)
        seed = prepared.evaluator(eplb_seed(prepared)[None, :])
        seed_ms, seed_mj = 1e3 * seed["latency_s"][0], 1e3 * seed["energy_j_per_token"][0]
        name = study.name.split("_per_layer")[0]
        for encoding, guided in CONFIGS:
            for s in SEEDS:
                search = study.search.model_copy(update={"encoding": encoding, "population": population,
                                                         "generations": generations, "seed": s})
                run = study.model_copy(update={"search": search})
                loop.GUIDED_SHARE = share if guided else 0.0
                start = time.perf_counter()
                outcome = run_search(prepared.evaluator, run, prepared=prepared)
                wall = time.perf_counter() - start
                ms, mj = best(outcome.metrics, run)
                print(f"{name[:11]:<12}{encoding:<9}{'yes' if guided else 'no':<7}{s:>4}{len(outcome.X):>6}"
                      f"{seed_ms:>9.2f}{ms:>9.2f}{seed_mj:>8.1f}{mj:>8.1f}{wall:>7.1f}", flush=True)
    loop.GUIDED_SHARE = share


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
