"""Systems beyond one package: identical packages in nodes joined by a scale-up fabric, nodes joined by a
scale-out network, the parallel layout across packages (pipeline stages, expert parallelism, replicas),
collectives per level (alpha-beta), and carbon (ACT). `prepare` turns a study into a `Prepared` study
whose evaluator is a `SystemEvaluator`; a study without a ``system`` section is one package."""
from .carbon import CarbonFactors
from .evaluator import SystemEvaluator
from .hardware import SystemHardware
from .layout import Layout
from .metrics import SYSTEM_METRICS
from .prepare import prepare

__all__ = ["CarbonFactors", "SYSTEM_METRICS", "SystemEvaluator", "SystemHardware", "Layout", "prepare"]
