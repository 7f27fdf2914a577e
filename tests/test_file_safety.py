"""Issue 34, item 7: no command replaces a file dse did not write (exit 2 naming the flag and the file,
the file left byte for byte) unless --force; a file dse wrote is replaced; every write goes through a
temporary file and a rename (dse/cli/safe_write.py)."""
from __future__ import annotations

import io
from csv import DictReader

import pandas as pd
import pytest
from PIL import Image

from dse.cli import safe_write
from dse.errors import StudyError

MEASURED = "arch/data/calibration/a100_gemm_vidur.csv"
FOREIGN = b"# my system\nsystem: {pipeline: 1, replicas: 64}\n"


def _calibrate(out, *extra):
    return ("calibrate", "--chiplet", "a100-like", "--measurements", MEASURED, "--memory-bandwidth-gbps", "2039",
            "--out", out, *extra)


def _characterize(flag, path, *extra):
    return ("characterize", "tests/data/tiny.yaml", flag, path, *extra)


def _workload(flag, path, *extra):
    return ("workload", "gpt2", "--format", "json", flag, path, *extra)


# each writing command and flag: (arguments given the path, the file name to write)
WRITERS = {
    "calibrate --out": (_calibrate, "chiplet.yaml"),
    "characterize --out csv": (lambda p, *e: _characterize("--out", p, *e), "attrs.csv"),
    "characterize --out parquet": (lambda p, *e: _characterize("--out", p, *e), "attrs.parquet"),
    "characterize --plot": (lambda p, *e: _characterize("--plot", p, *e), "roofline.png"),
    "workload --ops-out": (lambda p, *e: _workload("--ops-out", p, *e), "ops.csv"),
    "workload --scalesim": (lambda p, *e: _workload("--scalesim", p, *e), "topology.csv"),
}


def _flag(name):
    return name.split()[1]


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_foreign_file_is_refused_then_forced_then_replaced(name, tmp_path, dse_cli):
    args, file_name = WRITERS[name]
    target = tmp_path / file_name
    target.write_bytes(FOREIGN)
    code, _, err = dse_cli(*args(target))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and _flag(name) in err and str(target) in err
    assert "--force" in err
    assert target.read_bytes() == FOREIGN                          # left byte for byte
    code, _, err = dse_cli(*args(target, "--force"))
    assert code == 0, err
    assert target.read_bytes() != FOREIGN and safe_write.written_by_dse(target)
    first = target.read_bytes()
    code, _, err = dse_cli(*args(target))                          # dse's own file: replaced, no --force
    assert code == 0, err
    assert safe_write.written_by_dse(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dse-written", file_name]    # no temporary left
    if target.suffix in (".yaml", ".csv"):
        assert target.read_bytes() == first                        # the same content, written again


def test_chakra_traces_are_checked_file_by_file(tmp_path, dse_cli):
    pytest.importorskip("chakra")
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "gpt2.1.et").write_bytes(FOREIGN)
    (folder / "notes.txt").write_bytes(FOREIGN)                    # not a name it writes: untouched
    code, _, err = dse_cli("workload", "gpt2", "--format", "json", "--chakra", folder, "--npus", "2")
    assert code == 2 and "--chakra" in err and "gpt2.1.et" in err
    assert sorted(p.name for p in folder.iterdir()) == ["gpt2.1.et", "notes.txt"]
    assert (folder / "gpt2.1.et").read_bytes() == FOREIGN
    code, _, err = dse_cli("workload", "gpt2", "--format", "json", "--chakra", folder, "--npus", "2", "--force")
    assert code == 0, err
    assert all(safe_write.written_by_dse(folder / f"gpt2.{i}.et") for i in range(2))
    code, _, err = dse_cli("workload", "gpt2", "--format", "json", "--chakra", folder, "--npus", "2")
    assert code == 0, err
    assert sorted(p.name for p in folder.iterdir()) == [".dse-written", "gpt2.0.et", "gpt2.1.et", "notes.txt"]
    assert (folder / "notes.txt").read_bytes() == FOREIGN


def test_the_written_files_still_read(tmp_path, dse_cli):
    csv, parquet, png = tmp_path / "a.csv", tmp_path / "a.parquet", tmp_path / "r.png"
    assert dse_cli(*_characterize("--out", csv, "--plot", png))[0] == 0
    assert dse_cli(*_characterize("--out", parquet))[0] == 0
    assert not csv.read_text().startswith("#")                    # plain CSV: the manifest vouches for it
    table = pd.read_csv(csv)
    assert {"unit", "chiplet", "time_s"} <= set(table.columns)     # the header, not a comment line (issue 49)
    with open(csv, newline="") as f:
        assert list(next(DictReader(f))) == list(table.columns)
    ops = tmp_path / "ops.csv"
    assert dse_cli("workload", "gpt2", "--format", "json", "--ops-out", ops)[0] == 0
    assert {"unit", "flops"} <= set(pd.read_csv(ops).columns) and safe_write.written_by_dse(ops)
    assert len(table) == 8
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), table, check_dtype=False)
    image = Image.open(io.BytesIO(png.read_bytes()))
    image.load()                                                   # CRCs checked: the inserted chunk is valid
    assert image.info["Comment"].startswith("written by dse ")
    topology = tmp_path / "t.csv"
    assert dse_cli("workload", "gpt2", "--format", "json", "--scalesim", topology)[0] == 0
    header, first_row = topology.read_text().splitlines()[:2]
    assert header == "Layer name, M, N, K," and safe_write.written_by_dse(topology)
    assert first_row.count(",") == 4


def test_a_plot_of_another_tool_is_not_ours(tmp_path):
    foreign = tmp_path / "other.png"
    Image.new("RGB", (4, 4)).save(foreign, pnginfo=None)
    assert not safe_write.written_by_dse(foreign)
    legacy = tmp_path / "old.yaml"
    legacy.write_text("# dse calibrate --chiplet a100-like --measurements m.csv: geometric-mean error 5%\npreset: x\n")
    assert safe_write.written_by_dse(legacy)                       # calibrated chiplets of earlier versions
    assert not safe_write.written_by_dse(tmp_path / "missing.yaml")


def test_a_writer_killed_midway_leaves_the_old_file(tmp_path):
    target = tmp_path / "chiplet.yaml"
    safe_write.write_text(target, "preset: a\n", "--out", False)
    before = target.read_bytes()
    with pytest.raises(RuntimeError):
        with safe_write.replacing(target, "--out", False) as tmp:
            tmp.write_text("preset: half")
            raise RuntimeError("killed")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dse-written", "chiplet.yaml"]


def test_a_folder_or_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(StudyError, match="--plot: .* is a folder"):
        safe_write.check_replace(tmp_path, "--plot", True)
    with pytest.raises(StudyError, match="--out: folder .* does not exist"):
        safe_write.check_replace(tmp_path / "no" / "a.yaml", "--out", True)
