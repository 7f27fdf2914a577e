"""Export a design to SCALE-Sim v3: per chiplet a config (array, dataflow, SRAM) and a GEMM topology of
the matrix operators of the units it holds, plus the layout file SCALE-Sim v3 insists on.

* ``chiplet<slot>.cfg``: the chiplet kind's array rows x columns (ArrayHeight x ArrayWidth), dataflow,
  and its SRAM split evenly over SCALE-Sim's ifmap, filter and ofmap buffers (kB);
* ``chiplet<slot>_gemm.csv``: one ``name, M, N, K,`` row (trailing comma, SCALE-Sim's GEMM format) per
  matrix operator of every unit on the chiplet, named ``<unit>:<operator>``; shapes are one GEMM
  instance of the workload's operator table, (M x K) @ (K x N), rounded up to whole rows;
* ``chiplet<slot>_layout.csv``: a header and one default row per GEMM (custom layouts are off);
* ``chiplet<slot>_counts.csv``: how often each GEMM runs per step (instances per layer, identical
  layers, probability, share of a replicated unit's work), to scale SCALE-Sim's cycles to a step;
* ``chiplets.csv``: the index: slot, row, column, kind, HBM stacks and units of every chiplet.
"""
from __future__ import annotations

import math
from pathlib import Path

from .common import ExportContext, write_readme

TOOL = "SCALE-Sim"
TARGET = "v3 (PyPI scalesim 3.0.0; run it in its own venv with numpy<2)"
LAYOUT_FIELDS = 20          # SCALE-Sim v3 layout rows: a name and 20 intraline/interline factors and orders


def config_text(run_name: str, rows: int, cols: int, dataflow: str, sram_bytes: float) -> str:
    third_kb = max(1, int(sram_bytes / 3 / 1024))
    return "\n".join([
        "[general]", f"run_name = {run_name}", "",
        "[architecture_presets]", f"ArrayHeight : {rows}", f"ArrayWidth : {cols}",
        f"IfmapSramSzkB : {third_kb}", f"FilterSramSzkB : {third_kb}", f"OfmapSramSzkB : {third_kb}",
        "IfmapOffset : 0", "FilterOffset : 10000000", "OfmapOffset : 20000000", f"Dataflow : {dataflow}",
        "Bandwidth : 10", "ReadRequestBuffer : 32", "WriteRequestBuffer : 32", "",
        "[layout]", "IfmapCustomLayout : False", "FilterCustomLayout : False",
        "IfmapSRAMBankBandwidth : 10", "IfmapSRAMBankNum : 10", "IfmapSRAMBankPort : 2",
        "FilterSRAMBankBandwidth : 10", "FilterSRAMBankNum : 10", "FilterSRAMBankPort : 2", "",
        "[sparsity]", "SparsitySupport : false", "SparseRep : ellpack_block", "OptimizedMapping : false",
        "BlockSize : 8", "RandomNumberGeneratorSeed : 40", "",
        "[run_presets]", "InterfaceBandwidth : CALC", "UseRamulatorTrace : False", ""])


def export(ctx: ExportContext, out: Path) -> list[Path]:
    d = ctx.design
    t = ctx.prepared.tables
    specs = {c.name: c for c in ctx.study.hardware.library()}
    skipped = []
    ops = t.workload.ops
    matrix = ops[ops["engine"] == "matrix"]
    written: list[Path] = []
    index = ["slot,row,col,kind,hbm_stacks,units,config,gemm_topology"]
    commands = []
    for s in range(ctx.n):
        kind = specs[d.chiplets[s]]
        units = ctx.units_on(s)
        if not hasattr(kind, "dataflow"):          # SCALE-Sim models systolic arrays only
            skipped.append(f"{s} ({d.chiplets[s]})")
            continue
        cfg = out / f"chiplet{s}.cfg"
        cfg.write_text(config_text(f"{ctx.design_id}_chiplet{s}", kind.rows, kind.cols, kind.dataflow,
                                   kind.sram_bytes))
        written.append(cfg)
        gemms = matrix[matrix["unit"].isin(units)]
        topo_name = ""
        if len(gemms):
            topo = out / f"chiplet{s}_gemm.csv"
            layout = out / f"chiplet{s}_layout.csv"
            counts = out / f"chiplet{s}_counts.csv"
            names = [f"{r.unit}:{r.name}" for r in gemms.itertuples()]
            topo.write_text("Layer, M, N, K,\n" + "".join(
                f"{name}, {math.ceil(r.M)}, {math.ceil(r.N)}, {math.ceil(r.K)},\n"
                for name, r in zip(names, gemms.itertuples())))
            layout.write_text("Layer name," + ",".join(f"f{i}" for i in range(LAYOUT_FIELDS)) + ",\n" + "".join(
                f"{name}," + ",".join(["1"] * LAYOUT_FIELDS) + ",\n" for name in names))
            counts.write_text("layer,instances_per_layer,layers,prob,share\n" + "".join(
                f"{name},{int(r.batch)},{int(r.layers)},{r.prob:.6g},{1.0 / len(d.placement[r.unit]):.6g}\n"
                for name, r in zip(names, gemms.itertuples())))
            written += [topo, layout, counts]
            topo_name = topo.name
            commands.append(f"python -m scalesim.scale -c {cfg.name} -t {topo.name} -l {layout.name} -i gemm "
                            f"-p out_chiplet{s}")
        r, c = divmod(s, d.cols)
        index.append(f"{s},{r},{c},{d.chiplets[s]},{d.hbm_stacks[s]},{' '.join(units)},{cfg.name},{topo_name}")
    (out / "chiplets.csv").write_text("\n".join(index) + "\n")
    written.append(out / "chiplets.csv")
    written.append(write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`: one SCALE-Sim run per compute chiplet that "
        "holds matrix operators. In a venv with `pip install scalesim \"numpy<2\"`, from this folder:", "",
        *[f"    {c}" for c in commands], "",
        "Cycles per step of a chiplet = sum over its GEMMs of SCALE-Sim's total cycles x instances_per_layer x "
        "layers x prob x share (chipletN_counts.csv). Vector operators (norms, softmax, lookups) are not GEMMs "
        "and are not exported.",
        *([f"Chiplets that are not systolic arrays (SCALE-Sim cannot model them): {', '.join(skipped)}."]
          if skipped else [])]))
    return written
