"""Every number the README states is tied to the code (issue 49): each sentence holding one is a claim below
(or in the tests named beside it), checked against what the code computes, and a number outside every claim
fails `test_every_number_is_a_claim`. The README stays at most 150 lines and keeps the line .ci/run
executes. It said "11 bundled presets" where `dse models` lists 14 (now `test_counts`)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_LINE = ("python -m venv .venv && . .venv/bin/activate && python -m pip install -e '.[test]' && "
           "python -m pytest -n auto")

#: every sentence of the README that states a number, as a pattern over its text with whitespace joined;
#: the test that ties it to the code
CLAIMS = {
    r"Python (\d+\.\d+) or newer": "test_python_version",
    r"one of the (\d+) bundled model presets": "test_counts",
    r"config\.json` of (\d+) families": "test_counts",
    r"with exit status (\d+)": "test_exit_status",
    r"checked against (\d+) other measured cases .*?: ([\d.]+) % geometric-mean error, (\d+) of (\d+) within "
    r"(25) %; decode within (\d+) %": "test_cli_audit.py::test_readme_gpu_figures_are_what_fidelity_prints",
    r"power within ([\d.]+) %, throughput within ([\d.]+) % and inter-token latency within ([\d.]+) %":
        "test_fidelity_cli.py::test_readme_energy_figures_are_what_fidelity_prints",
    r"memory within (\d+) % of our H200 runs with fused attention, (\d+)-(\d+) % under with unfused":
        "test_cli_audit.py::test_readme_training_memory_claim_is_what_fidelity_prints",
}


def prose() -> str:
    """The README without its fenced code blocks and links' targets, whitespace joined."""
    text = re.sub(r"```.*?```", " ", README.read_text(), flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return " ".join(text.split())


def claim(pattern: str) -> tuple[str, ...]:
    found = re.search(pattern, prose())
    assert found, f"the README no longer says {pattern!r}: change CLAIMS with it"
    return found.groups()


def test_readme_is_short_and_keeps_the_ci_line():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150
    marker = next(i for i, line in enumerate(lines) if line.startswith("<!-- ci: test-command"))
    assert lines[marker + 1] == "```bash" and lines[marker + 2] == CI_LINE


def test_every_number_is_a_claim():
    """A number in the README's prose (not in code, not part of a name such as H100 or Mixtral-8x7B) lies
    inside one of CLAIMS."""
    text = prose()
    spans = [m.span() for pattern in CLAIMS for m in re.finditer(pattern, text)]
    loose = [m.group() for m in re.finditer(r"(?<![\w.\-/])\d[\d,.]*(?![\w\-/])", text)
             if not any(a <= m.start() < b for a, b in spans)]
    assert not loose, f"numbers the README states that no test ties to the code: {loose}"


def test_python_version():
    (version,) = claim(next(iter(CLAIMS)))
    assert f'requires-python = ">={version}"' in (ROOT / "pyproject.toml").read_text()


def test_counts():
    import workloads
    from workloads.config import SUPPORTED_FAMILIES
    (presets,) = claim(r"one of the (\d+) bundled model presets")
    (families,) = claim(r"config\.json` of (\d+) families")
    assert int(presets) == len(workloads.list_presets())
    assert int(families) == len(SUPPORTED_FAMILIES)


def test_exit_status(dse_cli, tmp_path):
    (status,) = claim(r"with exit status (\d+)")
    code, _, err = dse_cli("validate", tmp_path / "missing.yaml")
    assert code == int(status) and len(err.strip().splitlines()) == 1


def test_the_picture_is_the_quickstart_front():
    """The README shows docs/images/quickstart-front.png, drawn by tools/readme_front.py (its PNG
    ``Source`` text says so), of the study the caption names."""
    from PIL import Image
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import readme_front
    finally:
        sys.path.remove(str(ROOT / "tools"))
    path = readme_front.PICTURE.relative_to(ROOT).as_posix()
    text = README.read_text()
    assert f"]({path})" in text and readme_front.STUDY in text and "tools/readme_front.py" in text
    with Image.open(readme_front.PICTURE) as image:
        assert image.text.get("Source") == readme_front.SOURCE


def test_the_picture_tool_draws_a_front(tiny_path):
    """`readme_front.figure` draws a study's front over its axes (on the tests' tiny study)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import readme_front
    finally:
        sys.path.remove(str(ROOT / "tools"))
    import dse
    result = dse.load_study(tiny_path).run()
    fig = readme_front.figure(result)
    labels = " ".join(ax.get_xlabel() + " " + ax.get_ylabel() for ax in fig.axes)
    assert all(axis in labels for axis in readme_front.AXES)


@pytest.mark.parametrize("pattern", list(CLAIMS))
def test_each_claim_is_in_the_readme(pattern):
    claim(pattern)
