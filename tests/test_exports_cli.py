"""``dse export`` on the command line: files written, bad input in one line with exit status 2."""
from results_helpers import DESIGN_ID, tiny_results_folder


def test_export_writes_the_files(dse_cli, tmp_path):
    folder = tiny_results_folder(tmp_path / "res")
    code, out, err = dse_cli("export", folder, "--design", DESIGN_ID, "--to", "booksim")
    assert code == 0, err
    target = folder / "exports" / DESIGN_ID / "booksim"
    assert (target / f"{DESIGN_ID}.anynet").exists() and "4 files for booksim" in out
    code, out, err = dse_cli("export", folder, "--design", DESIGN_ID, "--to", "gem5", "--out", tmp_path / "g")
    assert code == 0, err
    assert (tmp_path / "g" / "command.txt").exists()


def test_export_bad_input_is_one_line(dse_cli, tmp_path):
    folder = tiny_results_folder(tmp_path / "res")
    code, _, err = dse_cli("export", folder, "--design", "d99999", "--to", "booksim")
    assert code == 2 and err.startswith("error: --design: no design 'd99999'") and DESIGN_ID in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = dse_cli("export", folder, "--design", DESIGN_ID, "--to", "noxim")
    assert code == 2 and "noxim" in err
    code, _, err = dse_cli("export", tmp_path, "--design", DESIGN_ID, "--to", "booksim")
    assert code == 2 and err.startswith("error:")
    (folder / "designs" / "dbad.yaml").write_text("rows: 2\ncols: 2\n")
    code, _, err = dse_cli("export", folder, "--design", "dbad", "--to", "booksim")
    assert code == 2 and "required key is missing" in err and len(err.strip().splitlines()) == 1
