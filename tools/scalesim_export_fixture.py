"""Regenerate tests/data/peers/scalesim_tiny_2x2: export the tiny test design for SCALE-Sim and run it.

SCALE-Sim v3 needs numpy<2, so it lives in its own venv:

    python3 -m venv /tmp/scalesim-venv && /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy<2"
    python tools/scalesim_export_fixture.py /tmp/scalesim-venv/bin/python

Takes a few minutes (SCALE-Sim simulates every cycle of the two GEMMs).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

import dse
from dse.exports import export_design

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"                 # the tests' data files (read, not imported)
FIXTURE = DATA / "peers" / "scalesim_tiny_2x2"
DESIGN_ID = "dtiny"                            # tests/results_helpers.py's design id
SLOT = 2


def tiny_results_folder(folder: Path) -> Path:
    """``folder`` made a results folder of the tests' tiny study and design (tests/data/tiny.yaml,
    exports/tiny_2x2.yaml), as tests/results_helpers.py makes it."""
    (folder / "designs").mkdir(parents=True, exist_ok=True)
    study = dse.load_study(DATA / "tiny.yaml")
    (folder / "study.yaml").write_text(yaml.safe_dump(study.resolved(), sort_keys=False))
    shutil.copy(DATA / "exports" / "tiny_2x2.yaml", folder / "designs" / f"{DESIGN_ID}.yaml")
    return folder


def main(scalesim_python: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        export_design(tiny_results_folder(tmp / "res"), DESIGN_ID, "scalesim", tmp / "out")
        out = tmp / "out"
        subprocess.run([scalesim_python, "-m", "scalesim.scale", "-c", f"chiplet{SLOT}.cfg", "-t",
                        f"chiplet{SLOT}_gemm.csv", "-l", f"chiplet{SLOT}_layout.csv", "-i", "gemm", "-p",
                        f"out_chiplet{SLOT}", "-s", "N"], cwd=out, check=True, stdout=subprocess.DEVNULL)
        FIXTURE.mkdir(parents=True, exist_ok=True)
        for name in (f"chiplet{SLOT}.cfg", f"chiplet{SLOT}_gemm.csv", f"chiplet{SLOT}_layout.csv"):
            shutil.copy(out / name, FIXTURE / name)
        shutil.copy(out / f"out_chiplet{SLOT}" / f"{DESIGN_ID}_chiplet{SLOT}" / "COMPUTE_REPORT.csv", FIXTURE)
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "python")
