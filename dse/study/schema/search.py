"""Study schema: the ``constraints`` and ``search`` sections (budgets, objectives, algorithm)."""
from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, ValidationInfo, field_validator, model_validator

from . import limits
from .common import StrictModel, invalid_at

#: objectives only a serving study (workload.phase: serve) measures
SERVING_OBJECTIVES = ("ttft_p99", "tpot_p99", "goodput", "max_rate_at_slo")
#: objectives only a training study with a token budget (workload.phase: train, workload.tokens) measures
TRAINING_OBJECTIVES = ("time_to_train",)
#: objectives only a study with a ``runtime`` section measures (dse.runtime.search: a design through a scenario)
RUNTIME_OBJECTIVES = ("tokens_over_horizon", "availability", "migration_energy")
OBJECTIVES = ("latency", "throughput", "energy", "area", "cost", "fault_tolerance", "carbon", "quality",
              *SERVING_OBJECTIVES, *TRAINING_OBJECTIVES, *RUNTIME_OBJECTIVES)
#: objectives that are fractions, better high, at most 1 (their reference lies below 1)
FRACTION_OBJECTIVES = ("fault_tolerance", "availability", "quality")
#: precisions ``search.precision`` may list: the workload's number formats whose quality is modelled
#: (dse.quality: bf16 keeps the score; fp8, int8 and int4 from Kurtic et al. 2024)
SEARCH_PRECISIONS = ("bf16", "fp8", "int8", "int4")
#: cap on the precision assignments ``search.precision`` spans (each is a package variant, tables built once)
PRECISION_VARIANTS = limits.Cap(64, "each assignment is a package variant whose operator tables are built "
                                    "and kept")
#: pymoo algorithms by name, then the two baselines (see dse.search.algorithms)
#: the search's encodings of a design (dse.search.roles)
ENCODINGS = ("unit", "role")
ALGORITHMS = ("nsga2", "nsga3", "agemoea2", "smsemoa", "moead", "random", "exhaustive")


class ConstraintsSpec(StrictModel):
    """Budgets; ``power_w``, the name before peak and mean power were told apart, reads as
    ``peak_power_w`` (the peak: every unit busy, memories at full bandwidth)."""

    #: silicon area budget, mm²
    area_mm2: PositiveFloat | None = None
    #: peak power budget (every unit busy), W
    peak_power_w: PositiveFloat | None = None
    #: cost budget, USD
    cost_usd: PositiveFloat | None = None
    min_quality: float | None = Field(
        None, gt=0.0, le=1.0, description="least fraction of the 16-bit, all-experts model's benchmark score a "
                                          "design may keep (dse.quality, docs/quality.md)")

    @model_validator(mode="before")
    @classmethod
    def _old_power_name(cls, value):
        if isinstance(value, dict) and "power_w" in value:
            if "peak_power_w" in value:
                raise ValueError("power_w is the old name of peak_power_w; give one of them")
            value = {("peak_power_w" if k == "power_w" else k): v for k, v in value.items()}
        return value


class SearchSpec(StrictModel):
    #: what to optimise: 2 to 7 of the objectives (serving, training and runtime ones need their sections)
    objectives: list[Literal[OBJECTIVES]] = Field(
        default=["latency", "energy", "area", "fault_tolerance"], min_length=2, max_length=7)
    #: the pymoo algorithm, or the random and exhaustive baselines
    algorithm: Literal[ALGORITHMS] = "nsga2"
    #: designs per generation
    population: int = Field(48, ge=4, le=100_000)
    #: generations of the search
    generations: int = Field(30, ge=1, le=100_000)
    #: random seed of the search
    seed: Annotated[NonNegativeInt, limits.at_most(limits.SEED)] = 1
    #: worst value of interest per objective, in the metric's own unit (latency_s, throughput_tok_s,
    #: energy_j_per_token, area_mm2, cost_usd, fault_tolerance_frac, carbon_g_per_token, quality_frac,
    #: ttft_p99_s, tpot_p99_s,
    #: goodput_req_s, max_rate_at_slo_req_s, tokens_over_horizon, availability_frac, migration_energy_j);
    #: objectives left out
    #: are derived (dse.search.hypervolume.reference_point)
    reference_point: dict[Literal[OBJECTIVES], float] = Field(default_factory=dict)
    #: save the search state every this many generations (0: never); see dse.search.checkpoint
    checkpoint_every: int = Field(5, ge=0)
    #: search at the screening fidelity (failures keep the intact hand-off routes) and evaluate the front and
    #: the final population again exactly for the results folder; see dse.search.screening
    screening: bool = False
    #: share of offspring that also move one per-layer role in every layer (per-layer studies; 0: off);
    #: see dse.search.variables
    layer_moves: float = Field(0.5, ge=0.0, le=1.0)
    #: the genes the search varies: ``unit`` (a placement gene per unit, as the space lists them) or ``role``
    #: (one gene per role shared by every layer, plus sparse per-layer deviations); see dse.search.roles
    encoding: Literal[ENCODINGS] = "unit"
    #: precisions the search may give the units (a decision: dse.model.unit_precision): a list (every unit
    #: at one of them) or role -> list, a role being a unit kind (attention, ffn, expert, shared_expert,
    #: embedding, lm_head), ``hot_experts`` / ``cold_experts`` (the more / less selected half of each
    #: layer's routed experts) or a unit's name; units no role names keep workload.precision. Each
    #: assignment is a package variant (a ``precision`` gene); quality, latency, energy and memory follow it
    precision: list[str] | dict[str, list[str]] | None = None

    @field_validator("objectives")
    @classmethod
    def _distinct(cls, value):
        if len(set(value)) != len(value):
            raise ValueError("objectives must not repeat")
        return value

    @model_validator(mode="after")
    def _precisions(self):
        if self.precision is None:
            return self
        lists = {"": self.precision} if isinstance(self.precision, list) else self.precision
        if not lists:
            raise invalid_at(("precision",), "give a list of precisions or role -> list of precisions", {})
        combos = 1
        for role, choices in lists.items():
            loc = ("precision", role) if role else ("precision",)
            bad = [p for p in choices if p not in SEARCH_PRECISIONS]
            if bad or not choices or len(set(choices)) != len(choices):
                what = f"unknown precision {bad[0]!r}" if bad else \
                    "list at least one precision" if not choices else "precisions must not repeat"
                raise invalid_at(loc, f"{what}; allowed: {', '.join(SEARCH_PRECISIONS)}", list(choices))
            combos *= len(choices)
        if combos > PRECISION_VARIANTS.limit:
            raise invalid_at(("precision",), f"{combos:,} precision assignments; " + PRECISION_VARIANTS.message(),
                             self.precision)
        return self

    def precision_assignments(self) -> list[dict[str, str]]:
        """Every assignment ``search.precision`` spans: role -> precision (``""``: every unit, the list
        form); ``[{}]`` when it is not given."""
        if self.precision is None:
            return [{}]
        lists = {"": self.precision} if isinstance(self.precision, list) else self.precision
        return [dict(zip(lists, combo)) for combo in itertools.product(*lists.values())]

    @field_validator("reference_point")
    @classmethod
    def _reference_of_objectives(cls, value, info: ValidationInfo):
        objectives = info.data.get("objectives", [])
        extra = [k for k in value if k not in objectives]
        if extra:
            raise ValueError(f"{', '.join(extra)} is not among the objectives ({', '.join(objectives)})")
        for objective, bound in value.items():
            if objective in FRACTION_OBJECTIVES and not bound < 1.0:
                raise ValueError(f"{objective} is a fraction kept: its reference must be below 1 (got {bound!r})")
            if objective not in FRACTION_OBJECTIVES and not bound > 0.0:
                raise ValueError(f"the reference {objective} must be greater than 0 (got {bound!r})")
        return value

    @model_validator(mode="after")
    def _evaluations(self):
        if self.algorithm != "exhaustive" and self.population * self.generations > limits.EVALUATIONS.limit:
            raise ValueError(f"population x generations is {self.population * self.generations:,} evaluations; "
                             + limits.EVALUATIONS.message())
        return self
