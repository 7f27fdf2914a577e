"""Cost of `dse timeline` (issue 36): a one-hour scenario of 60 one-minute windows (a rotating hot set,
one chiplet failure with a spare) for Mixtral-8x7B per layer on 16 chiplets (issue 7's benchmark study:
target under 2 s on one core) and, with ``--deepseek``, DeepSeek-V3 per layer on 64 chiplets (the
bundled study at 8 x 8: target under 30 s). Each policy is timed on one thread (the evaluator's
``threads`` set to 1), after a warm-up run that compiles the kernels; study preparation is not counted
(it is once per study). Also prints a snapshot evaluation of the design (one design, every metric)
for the ratio the search's runtime objectives pay per design."""
import sys
import time
from pathlib import Path

import yaml

import dse
from dse.runtime import run_timeline
from dse.runtime.scenario import scenario_from_dict
from dse.study.spec import Study

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = {"name": "bench-hour", "horizon_s": 3600, "window_s": 60,
            "popularity": {"drift": "rotate", "rate_per_s": 1 / 300},
            "failures": {"events": [{"t_s": 1830, "chiplet": 5, "repair_s": 900}], "spares": 1}}
POLICIES = ("static", "periodic", "threshold", "on-failure")


def bench(name: str, data: dict, target_s: float, rows: int | None = None) -> None:
    if rows:
        data["hardware"]["package"]["mesh"] = {"rows": rows, "cols": rows}
    start = time.perf_counter()
    prepared = dse.prepare(Study.from_dict(data, base_dir=ROOT / "studies"))
    prep = time.perf_counter() - start
    for ev in prepared.evaluator.package_evaluators():
        ev.threads = 1
    design = prepared.evaluator.designs(prepared.space.seeds[:1])[0]
    scenario = scenario_from_dict(SCENARIO)
    run_timeline(prepared, design, scenario, "periodic", 300)          # warm-up: compiles
    start = time.perf_counter()
    prepared.evaluator.evaluate_designs([design])
    snapshot = time.perf_counter() - start
    print(f"{name}: prepare {prep:.1f} s (once per study), snapshot evaluation {snapshot * 1e3:.1f} ms")
    for policy in POLICIES:
        start = time.perf_counter()
        tl = run_timeline(prepared, design, scenario, policy, 300)
        took = time.perf_counter() - start
        print(f"  {policy:<11} {took:6.2f} s  ({took / snapshot:6.1f} snapshots; target {target_s:g} s)"
              f"  tokens {tl.totals['tokens_served']:.4g}")


def main() -> None:
    bench("Mixtral-8x7B per layer, 16 chiplets",
          yaml.safe_load((ROOT / "benchmarks" / "evaluate_mixtral.yaml").read_text()), 2.0)
    if "--deepseek" in sys.argv:
        bench("DeepSeek-V3 per layer, 64 chiplets",
              yaml.safe_load((ROOT / "studies" / "deepseek_v3_per_layer.yaml").read_text()), 30.0, rows=8)


if __name__ == "__main__":
    main()
