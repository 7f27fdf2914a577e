"""Study schema: the ``runtime`` section (docs/runtime.md, dse.runtime.search): a scenario file and a runtime
policy, so the search ranks designs by how they live through the scenario (objectives
``tokens_over_horizon``, ``availability``, ``migration_energy``). The scenario file itself is read, as
strictly as a study, when the study is prepared (dse.runtime.scenario)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .common import StrictModel
from .workload import relative_to_study

#: the runtime policies (dse.runtime.policies.POLICIES)
POLICY_NAMES = ("static", "periodic", "threshold", "on-failure")


class RuntimeSpec(StrictModel):
    """``scenario``: a scenario YAML (relative to the study file's folder); ``policy`` and its options:
    ``every_s`` (periodic: seconds between rebalances, default 600; threshold: the least gap) and ``bound``
    (threshold: max / mean chiplet load that triggers a rebalance, default 1.2)."""

    #: the scenario file (relative to the study's folder)
    scenario: str = Field(min_length=1, max_length=4096)
    #: the runtime policy: static, periodic, threshold or on-failure
    policy: Literal[POLICY_NAMES] = "static"
    #: periodic: seconds between rebalances; threshold: the least gap between them
    every_s: float | None = Field(None, gt=0, le=1e9)
    #: threshold: the max / mean chiplet load that triggers a rebalance
    bound: float | None = Field(None, gt=1, le=1e6)

    _scenario = field_validator("scenario")(lambda value, info: relative_to_study(value, info))
