"""Run SCALE-Sim v3 on a spread of GEMMs and arrays and write tests/data/scalesim_fixture.csv.

SCALE-Sim (the PyPI package ``scalesim``, https://github.com/scalesim-project/SCALE-Sim) needs
``numpy<2``, so it lives in a venv of its own; this script only drives that venv's Python::

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim "numpy<2"
    python tools/make_scalesim_fixtures.py --scalesim-python /tmp/scalesim-venv/bin/python

Three groups of runs (every row records its full configuration):

* ``compute``   (CALC bandwidth mode, 512 KB per buffer): many shapes, array sizes and all three
  dataflows; checks cycles, SRAM accesses and mapping efficiency;
* ``refetch``   (CALC mode, 2-16 KB buffers): operands larger than their SRAM; checks DRAM reads;
* ``bandwidth`` (USER mode, 1-8 words/cycle): inputs fit their SRAM, outputs overflow a small ofmap
  SRAM, so DRAM writes stall the array; checks stall cycles and DRAM traffic.

``--refetch-bandwidth`` writes a fourth group to its own file (tests/data/scalesim_bandwidth_refetch.csv):

* ``bw_refetch`` (USER mode, 2-8 KB buffers, 1-4 words/cycle): inputs larger than half their SRAM, so
  the read buffers re-fetch them from DRAM while the array waits; checks DRAM reads and total cycles.

Each configuration is one SCALE-Sim run over a GEMM topology (rows ``name, M, N, K,``) with a
layout file of one dummy row per layer (v3 insists on one even with custom layouts off). Runs go
through the package's ``scalesim.scale_sim.scalesim`` class (what ``python -m scalesim.scale`` calls)
with trace saving off. The whole spread takes about two to four minutes of one core.
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CFG = """[general]
run_name = run

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_kb}
FilterSramSzkB: {filter_kb}
OfmapSramSzkB: {ofmap_kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bandwidth}
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bandwidth}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bandwidth}
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
# In USER mode SCALE-Sim takes the ifmap and filter DRAM bandwidth from the [layout] bank bandwidths
# and the ofmap bandwidth from Bandwidth (single_layer_sim.py); all three are set to the same value.

DRIVER = r"""
import contextlib, io, json, sys, time, importlib.metadata
from scalesim.scale_sim import scalesim
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    t0 = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        s = scalesim(save_disk_space=True, verbose=False, config=job["cfg"], topology=job["topo"],
                     layout=job["layout"], input_type_gemm=True)
        s.run_scale(top_path=job["out"])
    print(job["out"], round(time.process_time() - t0, 2), flush=True)
print("version", importlib.metadata.version("scalesim"))
"""

COLUMNS = ["group", "mode", "rows", "cols", "dataflow", "ifmap_kb", "filter_kb", "ofmap_kb", "bandwidth",
           "M", "N", "K", "total_cycles_incl_prefetch", "total_cycles", "stall_cycles", "overall_util_pct",
           "mapping_efficiency_pct", "compute_util_pct", "sram_ifmap_reads", "sram_filter_reads",
           "sram_ofmap_writes", "dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes"]


def configurations():
    """(group, mode, rows, cols, dataflow, ifmap_kb, filter_kb, ofmap_kb, bandwidth, gemms) per run."""
    flows = ("os", "ws", "is")
    compute_gemms = [(1, 64, 96), (7, 30, 20), (17, 9, 3), (33, 65, 17), (64, 64, 64), (100, 37, 130),
                     (128, 256, 64), (200, 48, 100)]
    for (r, c), df in itertools.product([(8, 8), (16, 16), (8, 32), (12, 20)], flows):
        yield ("compute", "CALC", r, c, df, 512, 512, 512, 10, compute_gemms)
    refetch_gemms = [(128, 64, 256), (256, 32, 128), (96, 128, 64), (64, 200, 160), (150, 100, 90)]
    for (r, c), df, kb in itertools.product([(16, 16), (8, 32)], flows, (4, 16)):
        yield ("refetch", "CALC", r, c, df, kb, kb, kb, 10, refetch_gemms)
    bandwidth_gemms = [(96, 128, 64), (128, 200, 48), (200, 96, 40), (64, 300, 32)]
    for (r, c), df, (ofmap_kb, bw) in itertools.product([(16, 16), (8, 32)], flows,
                                                         [(4, 1), (4, 4), (16, 2), (16, 8)]):
        yield ("bandwidth", "USER", r, c, df, 64, 64, ofmap_kb, bw, bandwidth_gemms)


def refetch_bandwidth_configurations():
    """The bandwidth-limited runs whose inputs overflow their SRAM (15 GEMMs, one per run)."""
    runs = [((16, 16), "os", 4, 2, (128, 96, 64)), ((16, 16), "ws", 4, 2, (128, 96, 64)),
            ((16, 16), "is", 4, 2, (128, 96, 64)), ((8, 32), "os", 8, 4, (96, 128, 96)),
            ((8, 32), "ws", 8, 4, (96, 128, 96)), ((8, 32), "is", 8, 4, (96, 128, 96)),
            ((16, 16), "os", 8, 1, (64, 200, 80)), ((16, 16), "ws", 8, 1, (64, 200, 80)),
            ((16, 16), "is", 8, 1, (64, 200, 80)), ((8, 8), "os", 2, 2, (100, 64, 48)),
            ((8, 8), "ws", 2, 2, (100, 64, 48)), ((8, 8), "is", 2, 2, (100, 64, 48)),
            ((16, 16), "ws", 4, 4, (256, 64, 128)), ((16, 16), "os", 4, 4, (48, 256, 96)),
            ((8, 32), "is", 4, 1, (160, 64, 100))]
    for (r, c), df, kb, bw, gemm in runs:
        yield ("bw_refetch", "USER", r, c, df, kb, kb, kb, bw, [gemm])


def write_inputs(workdir: Path, index: int, cfg: tuple) -> dict:
    group, mode, rows, cols, df, ikb, fkb, okb, bw, gemms = cfg
    d = workdir / f"run{index:03d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "scale.cfg").write_text(CFG.format(rows=rows, cols=cols, ifmap_kb=ikb, filter_kb=fkb, ofmap_kb=okb,
                                            bandwidth=bw, dataflow=df, mode=mode))
    topo = "Layer, M, N, K,\n" + "".join(f"g{i}, {m}, {n}, {k},\n" for i, (m, n, k) in enumerate(gemms))
    (d / "topo.csv").write_text(topo)
    layout = "Layer, a, b, c, d, e, f,\n" + "".join(f"g{i}, 1, 1, 1, 1, 1, 1,\n" for i in range(len(gemms)))
    (d / "layout.csv").write_text(layout)
    return {"cfg": str(d / "scale.cfg"), "topo": str(d / "topo.csv"), "layout": str(d / "layout.csv"),
            "out": str(d / "out")}


def read_reports(out_dir: Path) -> list[list[str]]:
    """Per layer: the 6 compute-report figures followed by the 18 detailed-access figures."""
    def table(name):
        with open(out_dir / "run" / f"{name}.csv") as f:
            return [[x.strip() for x in row if x.strip()][1:] for row in list(csv.reader(f))[1:]]
    return [c + d for c, d in zip(table("COMPUTE_REPORT"), table("DETAILED_ACCESS_REPORT"))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scalesim-python", default=os.environ.get("SCALESIM_PYTHON", "python"),
                    help="Python of a venv with scalesim and numpy<2 installed")
    ap.add_argument("--out", default=None, help="CSV to write (default: the group's file in tests/data)")
    ap.add_argument("--refetch-bandwidth", action="store_true",
                    help="run only the bandwidth-limited runs whose inputs overflow their SRAM")
    args = ap.parse_args(argv)
    data = Path(__file__).resolve().parents[1] / "tests/data"
    name = "scalesim_bandwidth_refetch.csv" if args.refetch_bandwidth else "scalesim_fixture.csv"
    args.out = args.out or str(data / name)

    configs = list(refetch_bandwidth_configurations() if args.refetch_bandwidth else configurations())
    with tempfile.TemporaryDirectory(prefix="scalesim-fixture-") as tmp:
        workdir = Path(tmp)
        jobs = [write_inputs(workdir, i, cfg) for i, cfg in enumerate(configs)]
        (workdir / "jobs.json").write_text(json.dumps(jobs))
        (workdir / "driver.py").write_text(DRIVER)
        proc = subprocess.run([args.scalesim_python, str(workdir / "driver.py"), str(workdir / "jobs.json")],
                              capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return 1
        if os.environ.get("SCALESIM_FIXTURE_TIMES"):
            sys.stderr.write(proc.stdout)
        version = proc.stdout.strip().splitlines()[-1].split()[-1]
        rows = []
        for cfg, job in zip(configs, jobs):
            group, mode, r, c, df, ikb, fkb, okb, bw, gemms = cfg
            for (m, n, k), rep in zip(gemms, read_reports(Path(job["out"]))):
                comp, det = rep[:6], rep[6:]
                rows.append([group, mode, r, c, df, ikb, fkb, okb, bw, m, n, k, *comp,
                             det[2], det[5], det[8], det[11], det[14], det[17]])

    buf = io.StringIO()
    buf.write(f"# SCALE-Sim {version} (PyPI package scalesim), generated by tools/make_scalesim_fixtures.py\n")
    buf.write("# word size 1 byte; SRAM sizes in KB per buffer; bandwidth in words/cycle per buffer (USER mode)\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows)
    Path(args.out).write_text(buf.getvalue())
    print(f"wrote {len(rows)} rows from {len(configs)} SCALE-Sim runs (scalesim {version}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
