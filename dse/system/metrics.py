"""The metric columns a system evaluation returns: the package evaluator's (dse.model.evaluator.METRICS,
for the whole system) and the system's own. Units are in the names."""
from ..model.evaluator import METRICS

SYSTEM_METRICS = METRICS + ["carbon_g_per_token", "carbon_operational_g_per_token", "carbon_embodied_g_per_token",
                            "embodied_kg", "packages", "nodes", "comm_fabric_s", "comm_network_s"]
#: column index of each metric
C = {name: i for i, name in enumerate(SYSTEM_METRICS)}
