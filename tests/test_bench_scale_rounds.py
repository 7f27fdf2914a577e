"""benchmarks/bench_scale.py's end-to-end rounds: the studies run in turn, each time its least over the
rounds and the peak memory its largest (the figures issue 52's budgets are read from)."""
import argparse
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
bench_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_scale)


def test_least_runs_takes_each_time_least_and_peak_largest():
    figures = {  # per study, one dict per call: the warm-up's, then one per round
        "a": [dict(wall_s=99.0, cpu_s=99.0, write_s=99.0, peak_mib=1.0),
              dict(wall_s=10.0, cpu_s=12.0, write_s=5.0, peak_mib=500.0),
              dict(wall_s=9.0, cpu_s=13.0, write_s=6.0, peak_mib=510.0),
              dict(wall_s=11.0, cpu_s=11.5, write_s=4.0, peak_mib=505.0)],
        "b": [dict(wall_s=99.0, cpu_s=99.0, write_s=99.0, peak_mib=9999.0),
              dict(wall_s=20.0, cpu_s=25.0, write_s=8.0, peak_mib=700.0),
              dict(wall_s=18.0, cpu_s=26.0, write_s=9.0, peak_mib=760.0),
              dict(wall_s=19.0, cpu_s=24.0, write_s=7.5, peak_mib=740.0)]}
    calls = []

    def run(study, folder):
        calls.append(study.name)
        return figures[study.name][sum(1 for c in calls if c == study.name) - 1]

    best = bench_scale.least_runs([("a", Path("a")), ("b", Path("b"))], 3, run=run)
    assert calls == ["a", "b"] * 4                     # warm-up, then three rounds, the studies in turn
    assert best["a"] == dict(wall_s=9.0, cpu_s=11.5, write_s=4.0, peak_mib=510.0)
    assert best["b"] == dict(wall_s=18.0, cpu_s=24.0, write_s=7.5, peak_mib=760.0)   # not the warm-up's peak


def test_least_runs_without_warmup_times_every_run():
    calls = []

    def run(study, folder):
        calls.append(study.name)
        return dict(wall_s=float(len(calls)), cpu_s=1.0, write_s=1.0, peak_mib=1.0)

    best = bench_scale.least_runs([("a", Path("a"))], 2, run=run, warmup=False)
    assert calls == ["a", "a"] and best["a"]["wall_s"] == 1.0


@pytest.mark.parametrize("text", ["0", "21", "x", "2.5", "-1"])
def test_rounds_refused_outside_one_to_cap(text):
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 20"):
        bench_scale.rounds_count(text)


def test_rounds_accepted():
    assert bench_scale.rounds_count("1") == 1 and bench_scale.rounds_count("20") == 20


def test_end_to_end_table_and_verdicts_fit_80_columns(monkeypatch, capsys):
    seconds = {"quickstart": 10.0, "deepseek_v3_per_layer": 14.0, "deepseek_v3_fault_tolerance": 21.04}
    monkeypatch.setattr(bench_scale, "dse_run", lambda study, folder: dict(
        wall_s=seconds[study.stem], cpu_s=1.1 * seconds[study.stem], write_s=5.0, peak_mib=777.0))
    bench_scale.end_to_end(rounds=2)
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[-2] == "deepseek-v3 per layer: within 2x (wall 1.40x, CPU 1.40x), memory within 2 GiB"
    assert lines[-1] == "deepseek-v3 fault tol.: over 2x (wall 2.10x, CPU 2.10x), memory within 2 GiB"
