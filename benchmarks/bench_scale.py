"""Two tables at scale.

Issue 16's rates (``--rates``): per case, the time `dse.prepare` takes, designs/s on one core (intact, with
every single-chiplet failure re-mapped, and with failures at the search's screening fidelity,
dse.search.screening; process time of one thread) and on all the machine's cores (wall time, the
population split over threads: dse.model.parallel), and the peak memory of the process.

Issue 38's end to end (``--end-to-end``): ``dse run`` of studies/quickstart.yaml, of
studies/deepseek_v3_per_layer.yaml (14,972 units, up to 8 x 8 chiplets) and of
studies/deepseek_v3_fault_tolerance.yaml (issue 52: the same units on two chiplet kinds, many-to-many
with 2 replicas, fault tolerance an objective, screening off), report included, each in a fresh process
after one untimed run of it (Numba's caches filled): wall and CPU time of the process, the time
`write_results` takes inside it (tables, design files, placements, plots and report), each run's wall
and CPU time over the quickstart's (issues 38 and 52's goal: within 2x) and the process's peak resident
memory (issue 52: within 2 GiB). The studies are run in turn, ``--rounds`` rounds (`least_runs`), and
each time is its least over the rounds, as bench_screening.py takes its rates: on a host shared with
other jobs, whose speed drifts by tens of percent within a minute (issue 52's fifteenth round), both
sides of a ratio then see the same spells, and one slow spell no longer decides it.

Prints both tables unless one is named."""
import argparse
import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def rates() -> None:
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


ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 3                  # `--rounds`' default: each study timed three times, in turn with the others
MAX_ROUNDS = 20             # its cap: a round of the three studies takes about a minute here


def rounds_count(text: str) -> int:
    """``--rounds``: a whole number from 1 to `MAX_ROUNDS`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to {MAX_ROUNDS}, not {text!r}")
    return value


END_TO_END = [("quickstart", ROOT / "studies" / "quickstart.yaml"),
              ("deepseek-v3 per layer", ROOT / "studies" / "deepseek_v3_per_layer.yaml"),
              ("deepseek-v3 fault tol.", ROOT / "studies" / "deepseek_v3_fault_tolerance.yaml")]
#: the child process: `dse run` through its CLI, `write_results` timed where the command calls it
CHILD = """
import json, resource, sys, time
import dse.cli.run_cmd as run_cmd
from dse.cli import main
inner, spent = run_cmd.write_results, {}
def timed(*args, **kwargs):
    start = time.perf_counter()
    out = inner(*args, **kwargs)
    spent["write_s"] = time.perf_counter() - start
    return out
run_cmd.write_results = timed
try:
    main(["run", sys.argv[1], "--out", sys.argv[2], "--quiet"])
except SystemExit as exc:
    if exc.code:
        raise
spent["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # Linux: KiB
with open(sys.argv[3], "w") as f:
    json.dump(spent, f)
"""


def dse_run(study: Path, folder: Path) -> dict:
    """One ``dse run`` in a fresh process: wall and CPU seconds of the process, seconds writing results
    and the process's peak resident memory in MiB (its own ru_maxrss, read just before it exits)."""
    times = folder / "times.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CHILD, str(study), str(folder / "results"), str(times)], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, **json.loads(times.read_text())}


TIMES = ("wall_s", "cpu_s", "write_s")        # `least_runs` keeps each one's least over the rounds


def least_runs(studies: list[tuple[str, Path]], rounds: int, run=None, warmup: bool = True) -> dict[str, dict]:
    """Per study (name, study file), its `dse_run` figures over ``rounds`` rounds that run every study in
    turn, after one untimed run of each (``warmup``): each of `TIMES` its least over the rounds, the peak
    memory its largest. ``run(study, folder)`` stands in for `dse_run` (a test's)."""
    run = run or dse_run
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if warmup:
            for _, study in studies:
                run(study, Path(tmp))
        for _ in range(rounds):
            for name, study in studies:
                t = run(study, Path(tmp))
                if name not in best:
                    best[name] = dict(t)
                    continue
                for key in TIMES:
                    best[name][key] = min(best[name][key], t[key])
                best[name]["peak_mib"] = max(best[name]["peak_mib"], t["peak_mib"])
    return best


def end_to_end(warmup: bool = True, rounds: int = ROUNDS) -> None:
    best = least_runs(END_TO_END, rounds, warmup=warmup)
    first = best[END_TO_END[0][0]]
    print(f"{'study':<22} {'wall s':>7} {'CPU s':>7} {'writing s':>9} {'wall ratio':>10} {'CPU ratio':>9} "
          f"{'peak MiB':>8}")
    for name, _ in END_TO_END:
        t = best[name]
        print(f"{name:<22} {t['wall_s']:>7.1f} {t['cpu_s']:>7.1f} {t['write_s']:>9.1f} "
              f"{t['wall_s'] / first['wall_s']:>10.2f} {t['cpu_s'] / first['cpu_s']:>9.2f} "
              f"{t['peak_mib']:>8.0f}")
    print(f"each time its least of {rounds} round{'s' if rounds > 1 else ''}, the studies run in turn; ratio: over\n"
          "the quickstart's (issues 38 and 52's goal: within 2x); writing s: wall time of\n"
          "write_results (tables, design files, placements, plots, report); peak MiB: the\n"
          "run's largest peak resident memory (issue 52's goal: within 2 GiB)")
    for name, _ in END_TO_END[1:]:
        t = best[name]
        wall, cpu = t["wall_s"] / first["wall_s"], t["cpu_s"] / first["cpu_s"]
        verdict = "within 2x" if max(wall, cpu) <= 2.0 else "over 2x"
        memory = "within 2 GiB" if t["peak_mib"] <= 2048 else "over 2 GiB"
        print(f"{name}: {verdict} (wall {wall:.2f}x, CPU {cpu:.2f}x), memory {memory}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", action="store_true", help="issue 16's designs/s table only")
    parser.add_argument("--end-to-end", action="store_true", help="issue 38's dse run table only")
    parser.add_argument("--no-warmup", action="store_true", help="time each study's first run")
    parser.add_argument("--rounds", type=rounds_count, default=ROUNDS,
                        help=f"rounds of the end-to-end runs, the studies in turn (1-{MAX_ROUNDS}; default {ROUNDS})")
    args = parser.parse_args()
    both = not (args.rates or args.end_to_end)
    if args.rates or both:
        rates()
    if args.end_to_end or both:
        end_to_end(warmup=not args.no_warmup, rounds=args.rounds)


if __name__ == "__main__":
    main()
