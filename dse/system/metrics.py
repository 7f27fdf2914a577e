"""The metric columns a system evaluation returns: the package evaluator's (dse.model.metrics.METRICS,
for the whole system) and the system's own. Units are in the names."""
import numpy as np

from ..model.metrics import METRICS
from ..model.objectives import MONTE_CARLO_METRICS
from ..study.spec import Study

#: metrics only a study with a ``system`` section varies (one package: 1, 1, 0, 0)
LAYOUT_METRICS = ("packages", "nodes", "comm_fabric_s", "comm_network_s")
SYSTEM_METRICS = METRICS + ["carbon_g_per_token", "carbon_operational_g_per_token", "carbon_embodied_g_per_token",
                            "embodied_kg", *LAYOUT_METRICS]
#: column index of each metric
C = {name: i for i, name in enumerate(SYSTEM_METRICS)}


def mean_power_w(metrics, study: Study | None = None):
    """Mean power at the study's operating point: energy per step over step time, i.e. energy per token x
    tokens per second (the whole system's, a training iteration's for a training study). Unlike
    ``peak_power_w`` (every unit busy, memories at full bandwidth), what the design draws running the
    study's workload. ``metrics``: a row or frame of the evaluator's columns. A serving study's energy per
    token is the server's at its ``request_rate`` (dse.serving.package), so its tokens per second are
    that rate's output tokens, the rate capped at ``saturation_req_s``."""
    sv = study.serving if study is not None else None
    if sv is None or "saturation_req_s" not in metrics:
        return metrics["energy_j_per_token"] * metrics["throughput_tok_s"]
    served = np.minimum(sv.request_rate, metrics["saturation_req_s"])
    return metrics["energy_j_per_token"] * served * sv.output_len


def reported_metrics(study: Study, names=None) -> list[str]:
    """The metric columns results, reports and ``dse evaluate`` show for ``study``: every one of ``names``
    (the evaluator's columns; default SYSTEM_METRICS) but the Monte Carlo ones when the study has no
    Monte Carlo failures (NaN in every row) and the layout ones when it has no ``system`` section
    (constant for one package)."""
    hidden = set()
    if not study.faults.monte_carlo.samples:
        hidden.update(MONTE_CARLO_METRICS)
    if study.system is None:
        hidden.update(LAYOUT_METRICS)
    return [m for m in (SYSTEM_METRICS if names is None else list(names)) if m not in hidden]
