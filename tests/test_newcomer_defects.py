"""Issue 49's defects: a hand-edited results folder in `dse compare`, one ownership rule for every
command that writes (dse.results.ownership), plain CSV, the umask, flags refused or acting, widths."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from dse.errors import StudyError
from dse.results.folder import check_results_target
from dse.results.swap import new_temporary, write_marker

from test_compare import FRONT_A, FRONT_B, results_folder


# 1. dse compare on a hand-edited results folder: one line naming folder, file and column, exit 2
@pytest.mark.parametrize("edit, column", [
    (lambda f: f.drop(columns=["energy_j_per_token"]), "energy_j_per_token"),
    (lambda f: f.assign(latency_s=["abc"] + list(f["latency_s"].astype(str))[1:]), "latency_s"),
    (lambda f: f[["design_id", "latency_s"]], "energy_j_per_token"),
    (lambda f: f.assign(area_mm2=["abc"] + list(f["area_mm2"].astype(str))[1:]), "area_mm2"),
])
def test_compare_names_the_folder_file_and_column_of_a_hand_edited_front(tmp_path, dse_cli, edit, column):
    a, b = results_folder(tmp_path / "A", FRONT_A), results_folder(tmp_path / "B", FRONT_B)
    edit(pd.read_csv(b / "pareto.csv")).to_csv(b / "pareto.csv", index=False)
    code, out, err = dse_cli("compare", a, b)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(b / "pareto.csv") in err and column in err


def test_compare_fault_tolerance_column_missing(tmp_path, dse_cli):
    objectives = ("latency", "fault_tolerance")
    a = results_folder(tmp_path / "A", FRONT_A, objectives=objectives)
    b = results_folder(tmp_path / "B", FRONT_B, objectives=objectives)
    for folder in (a, b):
        front = pd.read_csv(folder / "pareto.csv")
        front["fault_tolerance_frac"] = 0.5
        front.to_csv(folder / "pareto.csv", index=False)
    front.drop(columns=["fault_tolerance_frac"]).to_csv(b / "pareto.csv", index=False)
    code, _, err = dse_cli("compare", a, b)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(b / "pareto.csv") in err and "fault_tolerance_frac" in err


# 2 + 3. one ownership rule: a file dse did not write is never replaced; every file dse writes is known
def test_a_csv_is_dses_by_the_manifest_and_an_edit_makes_it_the_users(tmp_path):
    from dse.results import ownership
    path = tmp_path / "a.csv"
    path.write_text("x,y\n1,2\n")
    assert not ownership.written_by_dse(path)
    ownership.record_files([path])
    assert ownership.written_by_dse(path)
    assert json.loads((tmp_path / ownership.MANIFEST).read_text())["files"]["a.csv"] == ownership.digest(path)
    path.write_text("x,y\n1,3\n")                                   # edited by hand: no longer dse's
    assert not ownership.written_by_dse(path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text("{}")
    assert ownership.foreign_file(tmp_path / "sub") == tmp_path / "sub" / "b.json"
    ownership.record_tree(tmp_path / "sub")
    assert ownership.foreign_file(tmp_path / "sub") is None


def test_compare_out_into_a_results_folder_keeps_it_replaceable(tmp_path, dse_cli):
    """`dse compare A B --out A` writes compare.html into a results folder; `dse run --out A` (its check,
    dse.results.folder.check_results_target) still takes the folder as dse's; a file of the user's there
    is still refused."""
    a, b = results_folder(tmp_path / "A", FRONT_A), results_folder(tmp_path / "B", FRONT_B)
    (a / "evaluations.csv").write_text((a / "pareto.csv").read_text())
    write_marker(a, "tiny", complete=True)
    check_results_target(a)
    code, _, err = dse_cli("compare", a, b, "--out", a)
    assert code == 0, err
    assert (a / "compare.html").is_file()
    check_results_target(a)                                        # the old code: "holds 'compare.html'"
    (a / "notes.txt").write_text("mine")
    with pytest.raises(StudyError, match="notes.txt"):
        check_results_target(a)


def test_timeline_out_checks_each_file_it_writes(tmp_path):
    """The files `dse timeline --out` writes are checked one by one, as `dse compare --out`'s: the user's
    own timeline.md is refused; a file of another name is left alone."""
    from dse.cli.timeline_cmd import check_out
    folder = tmp_path / "tl"
    folder.mkdir()
    (folder / "keep.txt").write_text("not ours")
    check_out(folder)                                               # the old code: refused the folder
    (folder / "timeline.md").write_text("my notes")
    with pytest.raises(StudyError, match="--out: .*timeline.md"):
        check_out(folder)


# 4. CSV as other tools read it: tests/test_file_safety.py::test_the_written_files_still_read (characterize
#    --out, workload --ops-out and --scalesim load with pandas.read_csv and csv.DictReader defaults)


# 10. folders and files follow the umask
@pytest.mark.parametrize("mask, mode", [(0o022, 0o755), (0o027, 0o750)])
def test_results_folders_follow_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        tmp = new_temporary(tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(tmp.stat().st_mode) == mode


# 9. output within 80 columns, labels that say their unit, one number format per column
def test_models_rows_fit_80_columns(dse_cli):
    code, out, _ = dse_cli("models")
    assert code == 0 and out.count("\n") >= 14
    assert max(len(line) for line in out.splitlines()) <= 80


def test_run_baseline_line_fits_80_columns(capsys):
    """`dse run`'s "baseline to beat" line (185 characters on the tiny study) is broken into lines."""
    from types import SimpleNamespace
    from dse.cli.run_cmd import _print_summary
    objectives = ["latency", "energy", "area"]
    ev = pd.DataFrame({"design_id": ["d00000", "d00001"], "n_chiplets": [1, 2], "hbm_stacks": [2, 0],
                       "ddr_channels": [1, 2], "latency_s": [0.002716, 0.0031], "energy_j_per_token": [0.004723, 0.004145],
                       "area_mm2": [84.7, 15.88], "feasible": [True, True]})
    result = SimpleNamespace(evaluations=ev, pareto=ev, convergence=None, baseline="d00000",
                             study=SimpleNamespace(name="tiny", system=None,
                                                   search=SimpleNamespace(objectives=objectives)))
    _print_summary(result, Path("results/tiny"))
    out = capsys.readouterr().out
    assert "baseline to beat" in out and "area_mm2 84.7 (best 15.88)" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_timeline_totals_label_their_unit_and_columns_keep_one_format(timeline_prepared, timeline_design):
    """Totals printed `mean_latency_s 266.654 ms` (a name in s holding ms); tokens/s mixed `52` and `54.76`."""
    import re
    from dse.runtime import run_timeline
    from dse.runtime.report import table_rows, totals_rows
    from dse.runtime.scenario import scenario_from_dict
    scenario = scenario_from_dict({"name": "t", "horizon_s": 600, "window_s": 60,
                                   "popularity": {"drift": "rotate", "rate_per_s": 1 / 120}})
    tl = run_timeline(timeline_prepared, timeline_design, scenario, "periodic", 120)
    for row in totals_rows(tl):
        label, _, unit = row.split()
        suffix = {"_s": "s", "_j": "J", "_bytes": "bytes"}
        assert all(unit == want for end, want in suffix.items() if label.endswith(end)), row
    rows = table_rows(tl)
    for name in ("latency (s)", "tokens/s"):
        end = rows[0].index(name) + len(name)
        cells = [r[end - 11:end].strip() for r in rows[1:]]
        assert len({len(c.partition(".")[2]) for c in cells}) == 1, cells
        assert all(re.fullmatch(r"[\d,]+(\.\d+)?", c) for c in cells), cells


# 6. the message of --pp-layers under one stage
def test_pp_layers_needs_two_stages(dse_cli):
    code, out, err = dse_cli("train", "llama-3-8b", "--system", "dgx-h100-80gb", "--devices", "8", "--tp", "8",
                             "--pp", "1", "--dp", "1", "--global-batch", "8", "--seq", "2048", "--pp-layers", "10,10")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--pp-layers" in err and "--pp of at least 2" in err and "middle stages" not in err


# 7. flags that would be silently ignored are refused in one line
TRAIN = ("train", "llama-3-8b", "--system", "dgx-h100-80gb", "--devices", "8", "--tp", "8", "--pp", "1", "--dp",
         "1", "--global-batch", "8", "--seq", "2048")


@pytest.mark.parametrize("extra, flag", [
    (("--storage", "local-nvme"), "--storage"),
    (("--async-checkpoint",), "--async-checkpoint"),
    (("--mtbf-hours", "1e-9"), "--mtbf-hours"),
])
def test_train_flags_without_effect_are_refused(dse_cli, extra, flag):
    code, out, err = dse_cli(*TRAIN, *extra)
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {flag}")
    if flag == "--mtbf-hours":
        assert "at least" in err and "None" not in err


def test_train_storage_acts_with_a_failure_rate(dse_cli):
    rows = []
    for storage in ("local-nvme", "tectonic"):
        code, out, err = dse_cli(*TRAIN, "--failures-per-day", "2", "--storage", storage, "--json")
        assert code == 0, err
        rows.append(json.loads(out)["checkpoint_write_s"])
    assert rows[0] != rows[1]


@pytest.fixture(scope="module")
def tiny_design_file(tmp_path_factory):
    import yaml
    import dse
    p = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    design = p.evaluator.designs(p.space.upper[None, :])[0]
    path = tmp_path_factory.mktemp("design") / "d.yaml"
    path.write_text(yaml.safe_dump(design.to_dict()))
    return path


SERVE = ("serve", "tests/data/tiny.yaml", "--input-len", "64", "--output-len", "8", "--num-prompts", "20")


@pytest.mark.parametrize("extra, flag", [
    (("--max-num-batched-tokens", "16"), "--max-num-batched-tokens"),
    (("--scheduler", "continuous", "--max-num-batched-tokens", "16"), "--max-num-batched-tokens"),
    (("--scheduler", "chunked", "--disaggregate", "1:1", "--request-rate", "4"), "--scheduler"),
    (("--max-num-batched-tokens", "64", "--disaggregate", "1:1", "--request-rate", "4"), "--max-num-batched-tokens"),
    (("--request-rate", "nan"), "--request-rate"),
    (("--request-rate", "0"), "--request-rate"),
])
def test_serve_flags_without_effect_are_refused(dse_cli, tiny_design_file, extra, flag):
    code, out, err = dse_cli(*SERVE, "--design", tiny_design_file, *extra)
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: {flag}")


# 8. --request-rate inf: every request at once, at t = 0 (vLLM's benchmark_serving)
def test_request_rate_inf_sends_every_request_at_once(dse_cli, tiny_design_file):
    import math
    from dse.serving.requests import synthetic
    reqs = synthetic(50, 64, 8, math.inf, seed=3)
    assert (reqs.arrival_s == 0).all()
    code, out, err = dse_cli(*SERVE, "--design", tiny_design_file, "--request-rate", "inf", "--json")
    assert code == 0, err
    inf = json.loads(out)
    code, out, err = dse_cli(*SERVE, "--design", tiny_design_file, "--request-rate", "1000000", "--json")
    assert code == 0, err
    fast = json.loads(out)                       # a finite rate far above the server's: nearly the same
    assert inf["completed"] == fast["completed"] == 20
    assert inf["mean_ttft_ms"] == pytest.approx(fast["mean_ttft_ms"], rel=0.05)
    assert inf["duration_s"] <= fast["duration_s"]
    code, _, err = dse_cli(*SERVE, "--design", tiny_design_file, "--request-rate", "inf", "--max-concurrency", "4")
    assert code == 0, err                        # vLLM's usual pair: all at once, at most 4 in flight


def test_checkpoint_and_written_files_follow_the_umask(tmp_path):
    from dse.cli.safe_write import write_text
    from dse.search import checkpoint
    old = os.umask(0o022)
    try:
        state = checkpoint.save(tmp_path / "res.checkpoint", {"generation": 1})
        written = write_text(tmp_path / "a.yaml", "a: 1\n", "--out", False)
    finally:
        os.umask(old)
    assert stat.S_IMODE(state.stat().st_mode) == 0o644
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "res.checkpoint").stat().st_mode) == 0o755


def test_export_checks_each_file_and_leaves_others_alone(tmp_path, dse_cli):
    """`dse export --out DIR` follows the same rule: a folder holding a file of another name is written
    into (the old code refused the folder), the user's README.md there is refused, dse's own replaced."""
    from results_helpers import DESIGN_ID, tiny_results_folder
    results = tiny_results_folder(tmp_path / "res")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ("export", results, "--design", DESIGN_ID, "--to", "booksim", "--out", out)
    code, _, err = dse_cli(*args)
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "README.md").is_file()
    code, _, err = dse_cli(*args)
    assert code == 0, err                                           # dse's own files: replaced
    (out / "README.md").write_text("my readme")
    code, _, err = dse_cli(*args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "README.md" in err
    assert (out / "README.md").read_text() == "my readme"
