"""Run SCALE-Sim v3 on a small generated grid of GEMMs and set it against ``dse gemm`` (arch.systolic).

SCALE-Sim v3 is the PyPI package ``scalesim`` 3.0.0 (``pip install -e .[validate]``); it runs here in
process. The grid: every dataflow, arrays of 4 x 4 and 8 x 4, SRAM of 1-4 KB per buffer and unlimited
(1 MB, far above every operand), DRAM bandwidth of 1-64 words per cycle per buffer (USER mode) and
unlimited (CALC mode), and GEMMs whose operands fit half a buffer and that do not. Each row holds
SCALE-Sim's figures and ours from ``dse gemm --rows R --cols C --dataflow D --sram-kb S --bandwidth W
--no-accumulate`` (SCALE-Sim's output accounting: every partial sum written), with the read buffer
chosen by ``--read-buffer`` (``tile`` or ``scalesim``).

    python tools/scalesim_v3_grid.py [--out tests/data/scalesim_v3_grid.csv]

tests/test_scalesim_v3.py runs a part of the grid live (skipped without the package).

NumPy 2: SCALE-Sim 3.0.0 converts ``max`` of a 2-D array (a one-element row) with ``int()``, which
NumPy 2 refuses; ``numpy2_compatible`` gives its modules a ``max`` that returns that row as a 0-d array.
"""
from __future__ import annotations

import argparse
import builtins
import contextlib
import csv
import importlib
import io
import itertools
import json
import math
import pkgutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CFG = """[general]
run_name = run

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {kb}
FilterSramSzkB: {kb}
OfmapSramSzkB: {kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bw}
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""
#: "unlimited" SRAM: 1 MB per buffer holds every operand of the grid
UNLIMITED_KB = 1024
FITS, OVERFLOWS = (12, 16, 20), (48, 40, 36)     # (M, N, K): 320 words a side vs 1,920 / 1,440 / 1,728
COLUMNS = ["rows", "cols", "dataflow", "sram_kb", "bandwidth", "M", "N", "K", "scalesim_total_cycles",
           "scalesim_stall_cycles", "scalesim_dram_ifmap_reads", "scalesim_dram_filter_reads",
           "scalesim_dram_ofmap_writes", "our_total_cycles", "our_stall_cycles", "our_dram_ifmap_reads",
           "our_dram_filter_reads", "our_dram_ofmap_writes"]


def grid(full: bool = True) -> list[tuple]:
    """(rows, cols, dataflow, sram_kb or None, bandwidth or None, (M, N, K)) per run."""
    runs = []
    arrays = [(4, 4), (8, 4)] if full else [(4, 4)]
    for (r, c), df in itertools.product(arrays, ("os", "ws", "is")):
        runs.append((r, c, df, None, None, FITS))                       # stall-free
        runs.append((r, c, df, None, None, OVERFLOWS))
        for kb, bw in ([(1, 1), (1, 8), (4, 2), (4, 64), (UNLIMITED_KB, 1)] if full else [(1, 2), (4, 8)]):
            runs.append((r, c, df, kb, bw, OVERFLOWS))
        runs.append((r, c, df, 1, 4, FITS))
    return runs


def numpy2_compatible() -> None:
    """Let SCALE-Sim 3.0.0 run under NumPy 2 (module docstring)."""
    import scalesim

    def one_max(*args, **kw):
        r = builtins.max(*args, **kw)
        return r.reshape(()) if isinstance(r, np.ndarray) and r.size == 1 else r

    for m in pkgutil.walk_packages(scalesim.__path__, "scalesim."):
        with contextlib.suppress(Exception):
            importlib.import_module(m.name).max = one_max


def run_scalesim(run: tuple, workdir: Path) -> dict:
    """SCALE-Sim v3's total and stall cycles and DRAM words of one run."""
    from scalesim.scale_sim import scalesim

    rows, cols, df, kb, bw, (m, n, k) = run
    d = workdir / f"{rows}x{cols}-{df}-{kb}-{bw}-{m}x{n}x{k}"
    d.mkdir(parents=True, exist_ok=True)
    mode = "USER" if bw else "CALC"
    (d / "scale.cfg").write_text(CFG.format(rows=rows, cols=cols, kb=kb or UNLIMITED_KB, bw=bw or 10,
                                            dataflow=df, mode=mode))
    (d / "topo.csv").write_text(f"Layer, M, N, K,\ng0, {m}, {n}, {k},\n")
    (d / "layout.csv").write_text("Layer, a, b, c, d, e, f,\ng0, 1, 1, 1, 1, 1, 1,\n")
    with contextlib.redirect_stdout(io.StringIO()):
        s = scalesim(save_disk_space=True, verbose=False, config=str(d / "scale.cfg"), topology=str(d / "topo.csv"),
                     layout=str(d / "layout.csv"), input_type_gemm=True)
        s.run_scale(top_path=str(d / "out"))

    def table(name):
        with open(d / "out" / "run" / f"{name}.csv") as f:
            return [[x.strip() for x in row if x.strip()][1:] for row in list(csv.reader(f))[1:]][0]
    comp, det = table("COMPUTE_REPORT"), table("DETAILED_ACCESS_REPORT")
    return {"scalesim_total_cycles": float(comp[1]), "scalesim_stall_cycles": float(comp[2]),
            "scalesim_dram_ifmap_reads": float(det[11]), "scalesim_dram_filter_reads": float(det[14]),
            "scalesim_dram_ofmap_writes": float(det[17])}


def run_ours(run: tuple, read_buffer: str) -> dict:
    """``dse gemm``'s figures for the same run, in SCALE-Sim's counting (its Total Cycles is the last
    cycle's index from 0: our stall-free cycles + stalls - 1)."""
    from click.testing import CliRunner

    from dse.cli import cli

    rows, cols, df, kb, bw, (m, n, k) = run
    args = ["gemm", "--m", m, "--n", n, "--k", k, "--rows", rows, "--cols", cols, "--dataflow", df,
            "--no-accumulate", "--read-buffer", read_buffer, "--json"]
    args += ["--sram-kb", kb or UNLIMITED_KB] + (["--bandwidth", bw] if bw else [])
    res = CliRunner().invoke(cli, [str(a) for a in args])
    if res.exit_code != 0:
        raise RuntimeError(res.output)
    f = json.loads(res.output)
    return {"our_total_cycles": f["cycles"] + f["stall_cycles"] - 1, "our_stall_cycles": f["stall_cycles"],
            "our_dram_ifmap_reads": f["dram_ifmap_reads"], "our_dram_filter_reads": f["dram_filter_reads"],
            "our_dram_ofmap_writes": f["dram_ofmap_writes"]}


def compare(runs: list[tuple], read_buffer: str = "scalesim") -> list[dict]:
    numpy2_compatible()
    out = []
    with tempfile.TemporaryDirectory(prefix="scalesim-v3-") as tmp:
        for run in runs:
            rows, cols, df, kb, bw, (m, n, k) = run
            row = dict(rows=rows, cols=cols, dataflow=df, sram_kb=kb or math.inf, bandwidth=bw or math.inf,
                       M=m, N=n, K=k)
            row.update(run_scalesim(run, Path(tmp)))
            row.update(run_ours(run, read_buffer))
            out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "scalesim_v3_grid.csv")
    ap.add_argument("--read-buffer", choices=["tile", "scalesim"], default="scalesim")
    a = ap.parse_args()
    import importlib.metadata
    rows = compare(grid(), a.read_buffer)
    with a.out.open("w") as f:
        f.write(f"# SCALE-Sim {importlib.metadata.version('scalesim')} (PyPI scalesim) against dse gemm "
                f"--read-buffer {a.read_buffer} --no-accumulate; generated by tools/scalesim_v3_grid.py\n")
        f.write("# sram_kb per buffer (inf: unlimited, run with 1 MB); bandwidth words/cycle per buffer "
                "(inf: SCALE-Sim CALC mode)\n")
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} runs to {a.out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
