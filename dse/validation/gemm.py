"""GEMM kernel times by shape, per source: the model fitted by `dse calibrate` on some rows, checked on the rest.

The model (arch.calibrate.predict_us, the step model's kernel): output tiles over the SMs in waves, split-K
when the tiles do not fill them (arch.gpu), each thread block's prologue and epilogue (``tile_overhead_us``),
the DRAM traffic at ``mem_efficiency`` of the memory's sustained bandwidth (as the step model: memory.
effective_bandwidth_Bps of the datasheet memory, dse.validation.gpu.sustained_bandwidth_Bps: A100 SXM 80 GB
2,039 GB/s peak -> 1,789 GB/s, H100 SXM 3,354 -> 3,022 GB/s), overlapped in the kernel's pipeline, plus
``kernel_overhead_us`` (arch.roofline). From the datasheet: SMs, tensor-core FLOPs per SM per clock, clock,
L2 and shared memory (the preset).
Fitted per source on its calibration rows (`SOURCES`): the fields its times measure (arch.calibrate.INCLUDES).

Sources (arch/data/calibration/, each file names its origin):
- ``vidur-h100``, ``vidur-a100``: Vidur's kernel times of Llama-2-7B's projections (Kineto, M = 1-4,096);
  calibration rows M = 1, 512 and 2,048 (12 of 40), as the H200 sweep's.
- ``llmcompass-a100``: LLMCompass's torch.matmul sweep (wall clock with PyTorch's dispatch, a floor per
  kernel): every other row (10 of 20).
The H200 sweeps (bf16, fp8, attention) are dse.validation.h200's, on the h200-like preset.

``python -m dse.validation.gemm [--write docs/validation.md]`` prints (and writes) the table;
``dse fidelity --suite gemm`` prints its cases (`cases`).
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .common import Case, summary_lines, write_command
from .gpu import sustained_bandwidth_Bps

TITLE = "GEMM kernel times by shape: Vidur H100 and A100, LLMCompass A100"
DOC, MARKERS = Path("docs/validation.md"), ("<!-- gemm table -->", "<!-- /gemm table -->")
CALIBRATION = Path(__file__).resolve().parents[2] / "arch" / "data" / "calibration"
#: per source: measurements file, preset (its datasheet memory, sustained), fitted fields, calibration rows
SOURCES = {
    "vidur-h100": dict(file="h100_gemm_vidur.csv", chiplet="h100-like",
                       fields=("max_efficiency", "tile_overhead_us", "mem_efficiency", "kernel_overhead_us"),
                       calibration=lambda r: r["M"].isin([1, 512, 2048])),
    "vidur-a100": dict(file="a100_gemm_vidur.csv", chiplet="a100-like",
                       fields=("max_efficiency", "tile_overhead_us", "mem_efficiency", "kernel_overhead_us"),
                       calibration=lambda r: r["M"].isin([1, 512, 2048])),
    "llmcompass-a100": dict(file="a100_gemm_llmcompass.csv", chiplet="a100-like",
                            fields=("max_efficiency", "tile_overhead_us", "mem_efficiency", "dispatch_us"),
                            calibration=lambda r: pd.Series(np.arange(len(r)) % 2 == 0, index=r.index)),
}
#: `fit` of each source (tests/test_gemm_shapes.py re-fits them): what `dse calibrate --fit` chooses on
#: its calibration rows
FITS = {
    "vidur-h100": {"max_efficiency": 0.9194, "tile_overhead_us": 6.965, "mem_efficiency": 0.9711,
                   "kernel_overhead_us": 4.294},
    "vidur-a100": {"max_efficiency": 0.7157, "tile_overhead_us": 0.0, "mem_efficiency": 0.9152,
                   "kernel_overhead_us": 4.042},
    "llmcompass-a100": {"max_efficiency": 0.9392, "tile_overhead_us": 4.701, "mem_efficiency": 0.933,
                        "dispatch_us": 32.46},
}


def rows(source: str) -> pd.DataFrame:
    """The source's measured GEMMs with their ``set`` (calibration or validation)."""
    from arch.calibrate import read_measurements

    s = SOURCES[source]
    r = read_measurements(CALIBRATION / s["file"]).reset_index(drop=True)
    return r.assign(set=np.where(s["calibration"](r), "calibration", "validation"))


def fit(source: str) -> dict[str, float]:
    """`dse calibrate`'s fit of the source's fields on its calibration rows."""
    import arch
    from arch import calibrate as C

    s = SOURCES[source]
    r = rows(source)
    cal = r[r["set"] == "calibration"].reset_index(drop=True)
    fitted, _ = C.fit(arch.preset(s["chiplet"]), cal, sustained_bandwidth_Bps(s["chiplet"]), s["fields"])
    return {f: float(C.current(fitted, f)) for f in s["fields"]}


@lru_cache(maxsize=1)
def table() -> tuple[dict, ...]:
    """Every measured GEMM of every source with the model at the source's `FITS`."""
    import arch
    from arch import calibrate as C

    out = []
    for source, s in SOURCES.items():
        r = rows(source)
        model = C.predict_us(C.with_values(arch.preset(s["chiplet"]), FITS[source]), r,
                             sustained_bandwidth_Bps(s["chiplet"]))
        for x, m in zip(r.itertuples(), model):
            out.append(dict(id=f"m{x.M:g}-n{x.N:g}-k{x.K:g}", source=source, set=x.set, measured=float(x.measured_us),
                            modelled=float(m), ratio=float(m / x.measured_us)))
    return tuple(out)


def cases() -> list[Case]:
    """Every measured GEMM as a `Case` (metric: the source)."""
    return [Case(r["id"], r["source"], "us", r["measured"], r["modelled"], r["set"], r["source"]) for r in table()]


def markdown(all_rows) -> str:
    out = ["| source | fitted on its calibration rows |", "|---|---|"]
    out += [f"| {source} | " + ", ".join(f"`{k}` {v:.4g}" for k, v in FITS[source].items()) + " |"
            for source in SOURCES]
    for source in SOURCES:
        part = [r for r in all_rows if r["source"] == source]
        out += ["", f"**{source}** (us)", "", "| id | set | measured us | modelled us | ratio |",
                "|---|---|---|---|---|"]
        out += [f"| {r['id']} | {r['set']} | {r['measured']:.4g} | {r['modelled']:.4g} | {r['ratio']:.3f} |"
                for r in part]
        out += [""] + summary_lines(part)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()), DOC, *MARKERS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
