"""Serving: request workloads, a design's step latencies, and a discrete-event simulation of continuous,
chunked and static batching with vLLM benchmark_serving's metrics (`dse serve`)."""
from .analytic import SteadyState, max_rate, steady_state
from .requests import Requests, from_file, synthetic
from .simulate import SCHEDULERS, Outcome, simulate
from .steps import StepTable, step_figures, step_latency_s

__all__ = ["SteadyState", "max_rate", "steady_state", "Requests", "from_file", "synthetic", "SCHEDULERS", "Outcome",
           "simulate", "StepTable", "step_figures", "step_latency_s"]
