"""What the commands print: tables that fit 80 columns with whole cells and one number format per column,
the compile notice on a cold cache, one-line errors for missing serve lengths and binary model files, and
the README's install line for the Chakra exports and links to the docs."""
from __future__ import annotations

import re
from pathlib import Path

import numba
import pytest
import yaml

import dse
from dse.cli import output

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_design(tmp_path_factory) -> Path:
    p = dse.prepare(dse.load_study("tests/data/tiny.yaml"))
    design = p.evaluator.designs(p.space.upper[None, :])[0]
    path = tmp_path_factory.mktemp("design") / "d.yaml"
    path.write_text(yaml.safe_dump(design.to_dict()))
    return path


def _fits(text: str) -> None:
    """No cell cut, and every line of a table (its borders, rows and title) within 80 columns."""
    assert text.strip()
    assert "…" not in text, text
    wide = [line for line in text.splitlines() if len(line) > 80 and (set(line) & set("│┃━─") or
                                                                       line.startswith(" "))]
    assert not wide, "\n".join(wide)


def _system_study(tmp_path) -> Path:
    study = yaml.safe_load((ROOT / "tests/data/tiny.yaml").read_text())
    study["system"] = {"fabric": "nvlink4", "parallel": {"pipeline": [1, 2], "replicas": [1, 2]}}
    study["search"].update(objectives=["latency", "energy", "area", "carbon"], population=8, generations=2)
    path = tmp_path / "tiny_system.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


@pytest.mark.parametrize("command", ["characterize", "evaluate", "run", "run-system", "serve", "train"])
def test_tables_fit_80_columns_with_whole_cells(command, dse_cli, monkeypatch, tmp_path, tiny_design):
    monkeypatch.setenv("COLUMNS", "80")
    args = {
        "characterize": ["characterize", "studies/quickstart.yaml"],
        "evaluate": ["evaluate", "tests/data/tiny.yaml", "--design", tiny_design],
        "run": ["run", "tests/data/tiny.yaml", "--out", tmp_path / "r", "--quiet"],
        "run-system": ["run", _system_study(tmp_path), "--out", tmp_path / "s", "--quiet"],
        "serve": ["serve", "tests/data/tiny.yaml", "--design", tiny_design, "--input-len", "128", "--output-len",
                  "16", "--request-rate", "4", "--num-prompts", "50", "--max-batch", "8"],
        "train": ["train", "llama-3-8b", "--system", "dgx-h100-80gb", "--devices", "8", "--tp", "8", "--pp", "1",
                  "--dp", "1", "--global-batch", "8", "--seq", "2048", "--tokens", "1e9"],
    }[command]
    code, out, err = dse_cli(*args)
    assert code == 0, err
    _fits(out)
    if command == "characterize":      # whole names, units in the headers
        for name in ("embed", "sa-big", "sa-small", "time [", "energy [", "compute [%]"):
            assert name in out


def test_a_column_has_one_format_and_its_unit_in_the_header():
    unit, cells = output.format_column([6680.0, 16990.0, 120.5], "W")
    assert unit == "kW" and cells == ["6.68", "16.99", "0.12"]
    unit, cells = output.format_column([0.0213, 0.0004, 1.2], "s")
    assert unit == "s" and len({len(c.split(".")[1]) for c in cells}) == 1 and all("e" not in c for c in cells)
    unit, cells = output.format_column([2e-6, 3e-3, 0.5], "J")          # a span beyond 1e4: all engineering
    assert unit == "mJ" and cells == ["2.00e-3", "3.00", "500"]       # three significant digits each
    assert output.format_column([3 * 2**30, 2**29], "B") == ("GiB", ["3.000", "0.500"])
    assert output.format_column([3, 12000], "")[1] == ["3", "12,000"]
    assert output.format_column([0.059, 0.304], "frac") == ("%", ["5.90", "30.40"])


def test_a_wide_table_is_split_into_whole_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    rows = [{"name": f"unit-{i}", **{f"c{j}": 1.5 * (i + 1) * j for j in range(1, 13)}} for i in range(3)]
    output.print_table(rows, [output.Col("name", "name", "text", left=True)] +
                       [output.Col(f"c{j}", f"column {j}", "s") for j in range(1, 13)], title="wide")
    out = capsys.readouterr().out
    assert "…" not in out and max(map(len, out.splitlines())) <= 60
    assert out.count("unit-2") >= 2 and all(f"column {j} [s]" in out for j in range(1, 13))


@pytest.mark.parametrize("command", ["evaluate", "characterize", "serve", "train", "run"])
def test_a_cold_cache_is_announced_once(command, dse_cli, monkeypatch, tmp_path, tiny_design):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))   # this version's cache, empty
    monkeypatch.setattr(output, "NOTICE_AFTER_S", 0.0)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")                                # stderr as a terminal
    args = {"evaluate": ["evaluate", "tests/data/tiny.yaml", "--design", tiny_design],
            "characterize": ["characterize", "tests/data/tiny.yaml", "--format", "csv"],
            "serve": ["serve", "tests/data/tiny.yaml", "--design", tiny_design, "--input-len", "64", "--output-len",
                      "8", "--num-prompts", "20", "--json"],
            "train": ["train", "llama-3-8b", "--system", "dgx-h100-80gb", "--devices", "8", "--tp", "8", "--pp",
                      "1", "--dp", "1", "--global-batch", "8", "--seq", "2048", "--json"],
            "run": ["run", "tests/data/tiny.yaml", "--out", tmp_path / "r"]}[command]
    code, _, err = dse_cli(*args)
    assert code == 0, err
    notices = [line for line in err.splitlines() if "compiling the models (first run only" in line]
    assert len(notices) == 1, err
    code, _, err = dse_cli(*args)                       # warm: nothing
    assert code == 0 and "compiling the models (first run only" not in err


def test_the_notice_stays_off_a_pipe_and_off_bad_input(dse_cli, monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    code, _, err = dse_cli("evaluate", "tests/data/tiny.yaml", "--design", tmp_path / "missing.yaml")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_serve_without_lengths_names_the_length_flags(dse_cli, tiny_design):
    code, _, err = dse_cli("serve", "tests/data/tiny.yaml", "--design", tiny_design, "--output-len", "16")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --input-len:") and "--output-len" in err
    code, _, err = dse_cli("serve", "tests/data/tiny.yaml", "--design", tiny_design, "--input-len", "16")
    assert code == 2 and err.startswith("error: --output-len:")


def test_train_with_a_binary_model_file_is_one_line(dse_cli, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(bytes(range(256)) * 4)
    code, _, err = dse_cli("train", path, "--system", "dgx-a100-80gb", "--devices", "8", "--tp", "1", "--pp", "1",
                           "--dp", "8", "--global-batch", "8", "--seq", "128")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "not a text file" in err and str(path) in err


def test_readme_names_the_chakra_extra_and_links_the_docs():
    text = (ROOT / "README.md").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^chakra = \[", pyproject, re.M)
    export_row = next(line for line in text.splitlines() if line.startswith("| `dse export "))
    assert "pip install 'chiplet-dse[chakra]'" in export_row
    for match in re.finditer(r"docs/[a-z_]+\.md", text):
        before = text[max(match.start() - 2, 0):match.start()]
        assert before.endswith("[") or before == "](", f"plain docs name at {text[match.start() - 40:match.end()]!r}"
