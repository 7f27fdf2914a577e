"""The study schema, one module per section of the study file."""
from .carbon import CarbonSpec
from .common import IntRange
from .faults import FaultsSpec, MonteCarloSpec
from .chiplets import ChipletSpec
from .hardware import HardwareSpec, MemoryEntry
from .package import LinkSpec, MeshSpec, PackageSpec
from .mapping import MAPPINGS, MappingSpec
from .search import ALGORITHMS, OBJECTIVES, ConstraintsSpec, SearchSpec
from .runtime import RuntimeSpec
from .serving import ServingSpec, SloSpec
from .system import MAX_PACKAGES, ParallelSpec, SystemSpec
from .training import TrainingSpec
from .workload import RoutingSpec, WorkloadSpec

__all__ = ["CarbonSpec", "MAX_PACKAGES", "ParallelSpec", "SystemSpec", "TrainingSpec", "ServingSpec", "SloSpec",
           "IntRange", "FaultsSpec", "MonteCarloSpec", "ChipletSpec", "HardwareSpec", "LinkSpec", "MemoryEntry",
           "MeshSpec", "PackageSpec", "MAPPINGS", "MappingSpec", "ALGORITHMS", "OBJECTIVES", "ConstraintsSpec",
           "SearchSpec", "RoutingSpec", "WorkloadSpec"]
