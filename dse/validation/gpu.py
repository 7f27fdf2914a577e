"""The whole step model against measured GPU servers: every case of data/gpu_cases.yaml.

A case is a model served on ``gpus`` identical GPUs with tensor parallelism over all of them, as a user
of the toolkit would describe it: one ``a100-like`` or ``h100-like`` chiplet per GPU with the GPU's
HBM stacks, the GPUs joined all-to-all through the node's NVSwitch (a graph package, every GPU pair
sharing the GPU's NVLink bandwidth: `GPUS`), ``workload.tp`` = gpus, one shard of each unit on each GPU.
The modelled figure is the step latency of dse's evaluator: the first-token latency for a prefill
case (``phase: prefill``, ``context`` = prompt length) and the time per output token for a decode case.

``python -m dse.validation.gpu [--write docs/validation.md]`` prints (and writes) the table of every
case: measured, modelled, ratio, the set it belongs to (calibration or validation) and its source;
``dse fidelity --suite gpu`` prints its cases (`cases`).
"""
from __future__ import annotations

import atexit
import shutil
import sys
from pathlib import Path

import memory

from .common import DATA, Case, read_data, summary_lines, write_command

CASES = DATA / "gpu_cases.yaml"
TITLE = "whole-step latency against measured GPU servers"
#: the markdown file ``--write`` fills by default, and the marker after which its table stands
DOC, MARKER = Path("docs/validation.md"), "<!-- table -->"

#: per GPU: chiplet preset, HBM kind, stacks, per-pin data rate (Gb/s) and NVLink technology.
#: A100 SXM 80 GB: 5 HBM2e stacks, 2,039 GB/s (NVIDIA A100 datasheet) -> 3.186 Gb/s per pin;
#: H100 SXM 80 GB: 5 HBM3 stacks, 3,352 GB/s (NVIDIA H100 datasheet) -> 5.24 Gb/s per pin.
#: The NVSwitch: every GPU pair is a graph link whose bandwidth is the GPU's NVLink bandwidth, at the
#: fraction NCCL reaches (8 x A100 nccl-tests all-reduce busbw 234.9 of 300 GB/s, S. Bekman ml-engineering;
#: 8 x H100 ring 370 of 450, NVIDIA/nccl issue 1455), shared by its p - 1 peers: all-to-all traffic out of
#: a GPU then crosses its NVLink ports at the measured rate.
GPUS = {
    "a100": dict(chiplet="a100-like", memory="hbm2e", stacks=5, data_rate_gbps=3.186, link="nvlink3",
                 link_gbps=300.0, collective_efficiency=0.783),
    "h100": dict(chiplet="h100-like", memory="hbm3", stacks=5, data_rate_gbps=5.24, link="nvlink4",
                 link_gbps=450.0, collective_efficiency=0.822),
    # H200 SXM: 6 HBM3e stacks, 4.8 TB/s (NVIDIA H200 datasheet) -> 800 GB/s a stack, 6.25 Gb/s per pin
    "h200": dict(chiplet="h200-like", memory="hbm3e", stacks=6, data_rate_gbps=6.25, link="nvlink4",
                 link_gbps=450.0, collective_efficiency=0.822),
}


#: each preset accelerator's datasheet memory (kind, stacks, per-pin data rate; the sources are in
#: arch/data/chiplets.yaml beside each preset): the GPUs above, and B200 (8 HBM3e stacks, 8 TB/s), MI300X
#: (8 HBM3 stacks, 5.3 TB/s) and TPU v5e (2 HBM2e stacks, 819 GB/s). `dse gemm --chiplet`'s default memory.
DATASHEET_MEMORY = {
    **{g["chiplet"]: dict(memory=g["memory"], stacks=g["stacks"], data_rate_gbps=g["data_rate_gbps"], source=name)
       for name, g in GPUS.items()},
    # SRAM-resident parts: the tier below their SRAM (arch/data/chiplets.yaml); groq-lpu-like and
    # cerebras-wse3-like have none on the package (MemoryX is external)
    "sn40l-like": dict(memory="hbm3", stacks=4, data_rate_gbps=3.125, source="sn40l"),
    "ipu-bow-like": dict(memory="ddr4", stacks=2, data_rate_gbps=3.2, source="ipu-bow"),
    "b200-like": dict(memory="hbm3e", stacks=8, data_rate_gbps=7.8, source="b200"),
    "mi300x-like": dict(memory="hbm3", stacks=8, data_rate_gbps=5.2, source="mi300x"),
    "tpu-v5e-like": dict(memory="hbm2e", stacks=2, data_rate_gbps=3.2, source="tpu-v5e"),
    "gaudi2-like": dict(memory="hbm2e", stacks=6, data_rate_gbps=3.2, source="gaudi2"),
    "gaudi3-like": dict(memory="hbm2e", stacks=8, data_rate_gbps=3.6, source="gaudi3"),
    "tpu-v5p-like": dict(memory="hbm2e", stacks=6, data_rate_gbps=3.6, source="tpu-v5p"),
    "tpu-v6e-like": dict(memory="hbm3", stacks=2, data_rate_gbps=6.4, source="tpu-v6e"),
    "trainium2-like": dict(memory="hbm3", stacks=4, data_rate_gbps=5.66, source="trainium2"),
}



def streaming_fraction(chiplet: str, kind: str | None = None) -> float:
    """Sustained fraction of peak of a streaming read (memory.efficiency) from memory ``kind``, by default
    preset ``chiplet``'s datasheet memory at its per-pin data rate (`DATASHEET_MEMORY`)."""
    sheet = DATASHEET_MEMORY.get(chiplet)
    if kind is None and sheet is None:
        raise KeyError(chiplet)
    own = sheet is not None and kind in (None, sheet["memory"])
    return memory.efficiency(memory.memory_preset(sheet["memory"], {"data_rate_gbps": sheet["data_rate_gbps"]})
                             if own else memory.memory_preset(kind))


def sustained_bandwidth_Bps(chiplet: str) -> float:
    """Sustained streaming bandwidth (memory.effective_bandwidth_Bps) of preset ``chiplet``'s datasheet
    memory: what the step model's tables charge (dse.model.tables), so the chiplet's ``mem_efficiency``
    means one thing in a kernel fit (arch.calibrate) and in a step."""
    sheet = DATASHEET_MEMORY[chiplet]
    spec = memory.memory_preset(sheet["memory"], {"data_rate_gbps": sheet["data_rate_gbps"]})
    return memory.effective_bandwidth_Bps(spec, sheet["stacks"])


def load_cases() -> list[dict]:
    """The measured cases of data/gpu_cases.yaml."""
    return read_data(CASES.name)["cases"]


#: chiplet fields per software stack (case key ``stack``), on top of the preset. The presets describe a
#: runtime whose host issue time is negligible (CUDA graphs, TensorRT-LLM) at the GEMM rates of Vidur's
#: kernel times. ``eager``: PyTorch issuing one kernel at a time from the server's host CPU, ahead of the
#: GPU; its time per kernel is the server's (DGX A100: 2 x AMD EPYC 7742; DGX H100: 2 x Intel Xeon
#: Platinum 8480C), fitted on each server's 8-GPU decode of one sequence (sw-a100-tp8-d512, sw-h100-tp8-d512:
#: the host binds), and the framework's time per sequence on the DGX A100's decode of 32
#: (sw-a100-tp8-d512x32), both by `calibrate_eager`. ``llmcompass-isolated``: LLMCompass's A100 and harness
#: (eager torch, each operator timed on its own: a floor per kernel), calibrated on the same lab's GEMM
#: sweep (`dse calibrate` on arch/data/calibration/a100_gemm_llmcompass.csv
#: --fit max_efficiency,mem_efficiency,dispatch_us; 0.803 of the peak 2,039 GB/s = 0.915 of the sustained);
#: its kernels run at the full clock (``power_limit_w: 0``): each operator is timed alone between
#: synchronisations, too briefly to settle at the power-limited clock, as its GEMM sweep shows (269 TFLOP/s at
#: 8192 x 4096 x 4096, above the 257 an A100 sustains under 400 W: H. He, thonking.ai 2024, dse.validation.
#: a100_power), and the stack's kernel rates were fitted on that sweep at the full clock.
#: ``pytorch-graphs``: a plain PyTorch forward replayed as a
#: CUDA graph (dse.validation.h200's steps, whose workload runs plain PyTorch's kernels: ``elementwise:
#: unfused``, 24 a layer): its time per kernel inside the graph (launch, ramp and drain of back-to-back
#: kernels, below the 5 us of one GEMM timed alone), fitted on the H200's Llama-2-7B decode of one sequence
#: at 1,024 tokens (`fit_host_us(case, "kernel_overhead_us")`); its attention is PyTorch's
#: scaled_dot_product_attention, which splits the keys of a decode only for grouped-query heads
#: (``split_kv: gqa``, arch.gpu.flash_attention).
#: ``vllm``: vLLM V1 (v0.11 on; ``cudagraph_mode`` FULL_AND_PIECEWISE) replays a decode step as one full
#: CUDA graph, so a kernel costs its time inside a graph, not the 7 us of a GEMM timed alone (the presets'
#: Vidur fit): on the GH100 die (H100, H200) the ``pytorch-graphs`` figure measured on the H200, not
#: fitted again; on the A100 no in-graph figure is measured, so the preset's (issue 50,
#: dse.validation.serving_vllm).
STACKS: dict[str, dict] = {
    "graphs": {},
    "eager": {"a100": {"dispatch_us": 42.7, "sequence_us": 265.1},
              "h100": {"dispatch_us": 28.3, "sequence_us": 265.1}},
    "llmcompass-isolated": {"a100": {"max_efficiency": 0.870, "mem_efficiency": 0.915, "dispatch_us": 35.2,
                                     "dispatch_mode": "per_kernel", "power_limit_w": 0.0}},
    "pytorch-graphs": {"h200": {"kernel_overhead_us": 3.38, "split_kv": "gqa"}},
}
STACKS["vllm"] = {gpu: {"kernel_overhead_us": STACKS["pytorch-graphs"]["h200"]["kernel_overhead_us"]}
                  for gpu in ("h100", "h200")}


#: stacks that run plain PyTorch's elementwise kernels (workload.elementwise) unless a case says otherwise
PLAIN_KERNELS = {"pytorch-graphs": "unfused"}


def case_study(case: dict, technology: dict | None = None):
    """The study of one case (see module docstring); ``technology`` overrides node figures of its chiplet."""
    from ..study.spec import Study

    gpu = GPUS[case["gpu"]]
    chiplet = {"preset": gpu["chiplet"], **STACKS[case.get("stack", "graphs")].get(case["gpu"], {})}
    if technology:    # on top of the preset's own overrides (the GH100 presets' switching energy)
        from arch.presets import preset_spec

        chiplet["overrides"] = {**preset_spec(gpu["chiplet"]).get("overrides", {}), **technology}
    p = int(case["gpus"])
    share = gpu["link_gbps"] * gpu["collective_efficiency"] / max(p - 1, 1)
    # the NVSwitch is a crossbar whose losses the measured collective efficiency already holds: ideal routers
    package = {"topology": "graph", "mesh": {"rows": [1, 1], "cols": [p, p]}, "link": gpu["link"], "router": "ideal",
               "link_overrides": {"bandwidth_gbps": share},
               "links": [{"between": [a, b]} for a in range(p) for b in range(a + 1, p)]} if p > 1 else \
        {"topology": "mesh", "mesh": {"rows": [1, 1], "cols": [1, 1]}, "link": gpu["link"]}
    data = {
        "name": "gpu-case",
        "workload": {"model": case["model"], "phase": case["phase"], "batch": int(case["batch"]),
                     "context": int(case["context"]), "precision": case["precision"], "tp": p,
                     "attention": case.get("attention", "unfused"),
                     "elementwise": case.get("elementwise", PLAIN_KERNELS.get(case.get("stack"), "fused")),
                     **({"moe_form": case["moe_form"]} if case.get("moe_form") else {})},
        "hardware": {"chiplets": [chiplet],
                     "memory": [{"kind": gpu["memory"], "stacks": [gpu["stacks"] * p] * 2,
                                 "overrides": {"data_rate_gbps": gpu["data_rate_gbps"]}}],
                     "package": package},
        "mapping": {"kind": "many-to-one"},
        "faults": {},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1},
    }
    return Study.from_dict(data, source=f"case {case['id']}")


def case_design(case: dict, prepared):
    """Shard i of every unit on GPU i; unsharded units (routed experts) spread round robin."""
    from ..study.space import Design

    p = int(case["gpus"])
    placement = {}
    spread = 0
    for unit in prepared.tables.unit_names:
        if ".tp" in unit:
            placement[unit] = [int(unit.rsplit(".tp", 1)[1])]
        else:
            placement[unit] = [spread % p]
            spread += 1
    gpu = GPUS[case["gpu"]]
    return Design(rows=1, cols=p, chiplets=[prepared.tables.kind_names[0]] * p, hbm_stacks=[gpu["stacks"]] * p,
                  ddr_channels=0, link=gpu["link"], mapping="many-to-one", placement=placement)


def modelled_s(case: dict) -> float:
    """The evaluator's step latency for the case, in seconds (of one decoder layer for ``one_layer``
    cases: the model cut to two layers less the model cut to one)."""
    if case.get("one_layer"):
        return step_s({**case, "model": _cut(case["model"], 2)}) - step_s({**case, "model": _cut(case["model"], 1)})
    return step_s(case)


def step_s(case: dict) -> float:
    """The evaluator's latency (s) of one step of the case's whole model (faults off)."""
    from ..system.prepare import prepare

    prepared = prepare(case_study(case))
    design = case_design(case, prepared)
    return float(prepared.evaluator.evaluate_designs([design], with_faults=False)["latency_s"].iloc[0])


def fit_host_us(case: dict, field: str = "dispatch_us") -> float:
    """The value (us) of the chiplet field ``field`` of the case's stack and GPU at which the model meets
    the measured figure (scipy's brentq on 0-2,000 us): how the ``eager`` figures in `STACKS` are
    calibrated (`calibrate_eager`)."""
    from scipy.optimize import brentq

    stack, gpu = case.get("stack", "graphs"), case["gpu"]
    saved = STACKS[stack].get(gpu)
    target = float(case["measured_ms"]) * 1e-3

    def gap(us: float) -> float:
        STACKS[stack][gpu] = {**(saved or {}), field: us}
        return modelled_s(case) - target
    try:
        return brentq(gap, 0.0, 2000.0, xtol=0.01)
    finally:
        STACKS[stack][gpu] = saved


def calibrate_eager(cases: dict[str, dict]) -> dict[str, dict]:
    """The ``eager`` stack's fields fitted on the calibration cases: each server's time per kernel on its
    8-GPU batch-1 decode, the framework's time per sequence on the DGX A100's batch-32 decode (the same
    software on both servers), alternated until both settle (three rounds)."""
    saved = dict(STACKS["eager"])
    fitted = {gpu: dict(STACKS["eager"][gpu]) for gpu in ("a100", "h100")}
    for _ in range(3):
        for gpu in ("a100", "h100"):
            STACKS["eager"][gpu] = fitted[gpu]
            fitted[gpu] = {**fitted[gpu], "dispatch_us": round(fit_host_us(cases[f"sw-{gpu}-tp8-d512"]), 1)}
            STACKS["eager"][gpu] = fitted[gpu]
        per_sequence = round(fit_host_us(cases["sw-a100-tp8-d512x32"], "sequence_us"), 1)
        for gpu in ("a100", "h100"):
            fitted[gpu] = {**fitted[gpu], "sequence_us": per_sequence}
            STACKS["eager"][gpu] = fitted[gpu]
    STACKS["eager"] = saved
    return fitted


def _cut(model: str, layers: int) -> str:
    """A config.json of a preset with only its first ``layers`` decoder layers (in a temporary folder)."""
    import json
    import tempfile

    import workloads

    config = dict(workloads.read_config(model)[0])
    for key in ("n_layer", "num_hidden_layers", "num_layers"):
        if key in config:
            config[key] = layers
    global _CUT_DIR
    if _CUT_DIR is None:                 # one folder per process, removed when it exits
        _CUT_DIR = tempfile.mkdtemp(prefix="dse-case-")
        atexit.register(shutil.rmtree, _CUT_DIR, True)
    path = Path(_CUT_DIR) / f"{model}-{layers}l.json"
    path.write_text(json.dumps(config))
    return str(path)


_CUT_DIR: str | None = None


def table(cases: list[dict] | None = None) -> list[dict]:
    """Each case (default: every one) with ``modelled_ms`` and ``ratio`` (modelled / measured)."""
    rows = []
    for case in cases or load_cases():
        model = modelled_s(case)
        measured = float(case["measured_ms"]) * 1e-3
        rows.append({**case, "modelled_ms": model * 1e3, "ratio": model / measured})
    return rows


def cases() -> list[Case]:
    """Every case as a `Case`: the measured and modelled step (ms): first token (prefill), per output
    token (decode)."""
    return [Case(r["id"], f"{r['phase']} step", "ms", float(r["measured_ms"]), r["modelled_ms"], r["set"],
                 r["source"]) for r in table()]


def markdown(rows: list[dict]) -> str:
    head = ("| id | set | model | GPUs | phase | batch | context | precision | measured ms | modelled ms | "
            "ratio | source |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    body = [f"| {r['id']} | {r['set']} | {r['model']} | {r['gpus']} x {r['gpu'].upper()} | {r['phase']} | "
            f"{r['batch']} | {r['context']} | {r['precision']} | {r['measured_ms']:.4g} | {r['modelled_ms']:.4g} | "
            f"{r['ratio']:.2f} | {r['source']} |" for r in rows]
    return "\n".join([head] + body) + "\n\n" + "\n".join(summary_lines(rows)) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_command(__doc__, lambda: markdown(table()), DOC, MARKER, None, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
