"""Time the quickstart study end to end after Numba compilation; prints seconds as the last line."""
import time

import dse


def main() -> None:
    study = dse.load_study("studies/quickstart.yaml")
    prepared = dse.prepare(study)
    prepared.evaluator(prepared.space.lower[None, :])          # compile / load the Numba cache
    start = time.perf_counter()
    result = dse.run_study(study, prepared=prepared)
    elapsed = time.perf_counter() - start
    print(f"{len(result.evaluations)} designs, {len(result.pareto)} on the front")
    print(f"quickstart search: {elapsed:.2f} s")


if __name__ == "__main__":
    main()
