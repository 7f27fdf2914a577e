"""The notebooks in studies/ run top to bottom, headless, with a small search budget."""
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

STUDIES = Path(__file__).resolve().parents[1] / "studies"
SMALL_BUDGET = {"POPULATION": 8, "GENERATIONS": 2}


def with_small_budget(nb):
    """Rewrite the parameters cell (the first code cell) to the small budget."""
    cell = next(c for c in nb.cells if c.cell_type == "code")
    lines = []
    for line in cell.source.splitlines():
        name = line.split("=")[0].strip()
        lines.append(f"{name} = {SMALL_BUDGET[name]}" if name in SMALL_BUDGET else line)
    cell.source = "\n".join(lines)
    assert all(f"{k} = {v}" in cell.source for k, v in SMALL_BUDGET.items()), "parameters cell not found"
    return nb


def unsupported(nb) -> list[str]:
    """Study keys a notebook needs (metadata ``dse.requires``, dotted) that this toolkit's schema lacks."""
    from dse.study import Study
    missing = []
    for key in nb.metadata.get("dse", {}).get("requires", []):
        model = Study
        for part in key.split("."):
            fields = getattr(model, "model_fields", {})
            if part not in fields:
                missing.append(key)
                break
            annotation = fields[part].annotation
            inner = [a for a in getattr(annotation, "__args__", ()) if hasattr(a, "model_fields")]
            model = inner[0] if inner else annotation
    return missing


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = with_small_budget(nbformat.read(path, as_version=4))
    missing = unsupported(nb)
    if missing:
        pytest.skip(f"{path.name} needs study keys this toolkit does not have yet: {', '.join(missing)}")
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(STUDIES)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    plotting = [c for c in nb.cells if c.cell_type == "code" and ".plot_" in c.source]
    assert len(figures) >= len(plotting) > 0          # every plot call shows a figure
    tables = [o for o in outputs if "text/html" in o.get("data", {})]
    assert tables                                      # DataFrames render
