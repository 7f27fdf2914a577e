"""``dse fidelity``: its figures are the docs' tables (docs/validation.md: GPU cases, energy, training;
docs/serving.md: serving), every suite reports its geometric-mean error, its tables fit 80 columns, and a
bad --suite is click's one-line error."""
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dse.cli import cli
from dse.validation import energy, gemm, gpu, h200, serving, training

ROOT = Path(__file__).resolve().parents[1]


#: the suites these tests read (serving-vllm, minutes of simulation, is tests/test_serving_request_path.py's)
SUITES = ("gpu", "energy", "serving", "serving-runs", "training", "h200", "gemm", "noc", "systolic")


@pytest.fixture(scope="module")
def report():
    out = {}
    for name in SUITES:
        result = CliRunner().invoke(cli, ["fidelity", "--suite", name, "--json"])
        assert result.exit_code == 0, result.output
        out.update(json.loads(result.output))
    return out


def section(doc: Path, start: str, end: str | None = None) -> str:
    text = doc.read_text().split(start, 1)[1]
    return text.split(end, 1)[0] if end else text


def table_rows(text: str) -> list[list[str]]:
    """The cells of every markdown table row in ``text`` (header and separator rows left out)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return [r for r in rows if r[0] not in ("id", "case", "GPUs")]


def by_key(report: dict, suite: str) -> dict:
    return {(c["id"], c["metric"]): c for c in report[suite]["cases"]}


def summary_error(text: str, label: str) -> str:
    """The geometric-mean error a summary line of the docs gives, e.g. '- validation: ... error 25.5%'."""
    return re.search(rf"- {re.escape(label)}: .*?geometric-mean error ([\d.]+%)", text).group(1)


def test_gpu_figures_are_the_docs_table(report):
    text = section(ROOT / "docs" / "validation.md", gpu.MARKER)
    cases = by_key(report, "gpu")
    rows = table_rows(text)
    assert len(rows) == len(cases) == len(gpu.load_cases())
    for r in rows:
        c = cases[(r[0], f"{r[4]} step")]
        assert [c["set"], f"{c['measured']:.4g}", f"{c['modelled']:.4g}", f"{c['ratio']:.2f}", c["source"]] == \
            [r[1], r[8], r[9], r[10], r[11]], r[0]
    for name in ("calibration", "validation"):
        assert f"{report['gpu']['geomean_error'][name]:.1%}" == summary_error(text, name)


def test_energy_figures_are_the_docs_tables(report):
    text = section(ROOT / "docs" / "validation.md", *energy.MARKERS)
    cases = by_key(report, "energy")
    runs = [r for r in table_rows(text) if len(r) == 13]
    assert len(runs) == len(energy.load_cases())
    formats = {"power": ".0f", "energy per output token": ".3g", "median ITL": ".4g", "output throughput": ".0f"}
    for r in runs:
        for (metric, fmt), measured, ratio in zip(formats.items(), r[5::2], r[6::2]):
            c = cases[(r[0], metric)]
            assert [c["set"], format(c["measured"], fmt), f"{c['ratio']:.2f}"] == [r[1], measured, ratio], \
                (r[0], metric)
    splitwise = [r for r in table_rows(text) if len(r) == 4]
    assert len(splitwise) == 3
    for gpus, measured, modelled, ratio in splitwise:
        c = cases[(f"sw-a100-tp{gpus}-power", "power per GPU")]
        assert [f"{c['measured']:.0f}", f"{c['modelled']:.0f}", f"{c['ratio']:.2f}"] == [measured, modelled, ratio]
    by_metric = report["energy"]["geomean_error_by_metric"]
    assert f"{by_metric['power']['calibration']:.1%}" == summary_error(text, "calibration")
    for metric in formats:
        assert f"{by_metric[metric]['validation']:.1%}" == summary_error(text, f"validation, {metric}")


def test_training_figures_are_the_docs_tables(report):
    text = section(ROOT / "docs" / "validation.md", *training.MARKERS)
    cases = {c["id"]: c for c in report["training"]["cases"]}
    rows = table_rows(text)
    assert len(rows) == len(cases) == len(training.load_cases())
    # columns of (measured, modelled, ratio) and the number format, by the table's width: Megatron-LM's
    # Table 1, Llama 2, NeMo 24.12, Llama 3, the H200 memory measurement
    layout = {10: (7, ".4g"), 7: (3, ",.0f"), 11: (8, ",.0f"), 8: (5, ".4g"), 6: (3, ".2f")}
    for r in rows:
        c = cases[r[0]]
        first, fmt = layout[len(r)]
        measured, modelled, ratio = r[first:first + 3]
        assert [c["set"], format(c["measured"], fmt), format(c["modelled"], fmt), f"{c['ratio']:.2f}"] == \
            [r[1], measured, modelled, ratio], r[0]
    for name in ("calibration", "validation"):
        assert f"{report['training']['geomean_error'][name]:.1%}" == summary_error(text, name)


def test_serving_figures_are_the_docs_table(report):
    text = section(ROOT / "docs" / "serving.md", *serving.MARKERS)
    cases = by_key(report, "serving")
    rows = table_rows(text)
    assert len(rows) == len(cases)
    for case, metric, measured, modelled, ratio, source in rows:
        c = cases[(case, serving.METRICS[metric])]
        assert [f"{c['measured']:.4g}", f"{c['modelled']:.4g}", f"{c['ratio']:.2f}", c["source"]] == \
            [measured, modelled, ratio, source], (case, metric)
    error = re.search(r"Geometric-mean error ([\d.]+) %", text).group(1)
    assert f"{report['serving']['geomean_error']['validation'] * 100:.1f}" == error


def test_h200_figures_are_the_docs_tables(report):
    text = section(ROOT / "docs" / "validation.md", *h200.MARKERS)
    cases = by_key(report, "h200")
    rows = table_rows(text)
    assert len(rows) == len(cases)
    for r in rows:
        metric = next(m for (i, m) in cases if i == r[0] and f"{cases[(i, m)]['measured']:.4g}" == r[2])
        c = cases[(r[0], metric)]
        assert [c["set"], f"{c['measured']:.4g}", f"{c['modelled']:.4g}", f"{c['ratio']:.3f}"] == r[1:5], r[0]


def test_gemm_figures_are_the_docs_tables(report):
    text = section(ROOT / "docs" / "validation.md", *gemm.MARKERS)
    cases = report["gemm"]["cases"]
    rows = [r for r in table_rows(text) if r[0] not in gemm.SOURCES and r[0] != "source"]
    assert len(rows) == len(cases)
    for r, c in zip(rows, cases):
        assert [c["id"], c["set"], f"{c['measured']:.4g}", f"{c['modelled']:.4g}", f"{c['ratio']:.3f}"] == r[:5]
    for source in gemm.SOURCES:
        errors = report["gemm"]["geomean_error_by_metric"][source]
        for name in ("calibration", "validation"):
            assert f"{errors[name]:.1%}" == summary_error(text.split(f"**{source}**", 1)[1], name)


def test_every_suite_reports_its_errors(report):
    assert set(report) == set(SUITES)
    for name, suite in report.items():
        assert suite["cases"] and math.isfinite(suite["geomean_error"]["validation"]), name
        for case in suite["cases"]:
            assert case["set"] in ("calibration", "validation") and case["source"] and case["unit"]
            assert case["ratio"] == pytest.approx(case["modelled"] / case["measured"])
        assert suite["verdict"]


def test_tables_fit_80_columns():
    result = CliRunner().invoke(cli, ["fidelity", "--suite", "training"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("TFLOP/s" in line for line in lines) and any(line.startswith("verdict:") for line in lines)
    assert "mt-39.1b" in result.output and "calibration" in result.output


def test_a_bad_suite_is_one_line(dse_cli):
    code, out, err = dse_cli("fidelity", "--suite", "cpu")
    assert code == 2 and "--suite" in err and len(err.strip().splitlines()) == 1


def test_validation_tables_page_is_current(report):
    """docs/reference/validation-tables.md is what `dse fidelity` prints today (python
    tools/validation_tables.py rewrites it)."""
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import validation_tables
    finally:
        sys.path.remove(str(ROOT / "tools"))
    committed = validation_tables.PAGE.read_text()
    for name, suite in report.items():     # the suites this file runs (serving-vllm's is checked by its own test)
        assert validation_tables.section(name, suite) in committed, \
            f"suite {name}: run python tools/validation_tables.py"


def test_readme_energy_figures_are_what_fidelity_prints(report):
    """The README's energy sentence: the energy suite's validation geometric-mean errors of power, output
    throughput and median inter-token latency (it said 18 % for the latency where the suite prints 19.7 %)."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    power, throughput, itl = re.search(r"power within ([\d.]+) %, throughput within ([\d.]+) % and inter-token "
                                       r"latency within ([\d.]+) %", readme).groups()
    errors = report["energy"]["geomean_error_by_metric"]
    assert [power, throughput, itl] == [f"{100 * errors[m]['validation']:.1f}"
                                        for m in ("power", "output throughput", "median ITL")]
