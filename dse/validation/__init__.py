"""The model against published measurements, one module per suite, each a list of `Case`s (common.py:
measured, modelled, ratio, calibration or validation set, source) from the measured data in data/:

- gpu: whole-step latency against measured GPU servers (Splitwise, TensorRT-LLM, LLMCompass)
- energy: power, energy per token and latency of ML.ENERGY's H100 serving runs, served by dse.serving
- serving: dse serve's simulation against published serving benchmarks (NVIDIA NIM, vLLM)
- serving_runs (`serving-runs`): dse serve's simulation against measured vLLM 0.6.0 serving runs (Lambda)
- serving_vllm (`serving-vllm`): dse serve against measured vLLM 0.15.1 servers under Poisson load, stage by
  stage: mean, p90 and p99 TTFT and E2E, mean ITL (inference-sim's calibration runs)
- training: dse train against Megatron-LM's Table 1 and Llama 2's GPU hours
- h200: GEMMs, attention kernels, Llama-2-7B steps and their power measured on one H200

`dse fidelity` prints them; ``python -m dse.validation.<suite> --write <doc>`` regenerates a suite's
table in the docs (docs/validation.md; the serving suite's in docs/serving.md).
"""
from .common import Case, errors_by_set, geomean_error

SUITES = ("gpu", "energy", "serving", "serving-runs", "serving-vllm", "training", "h200")

__all__ = ["Case", "SUITES", "errors_by_set", "geomean_error"]
