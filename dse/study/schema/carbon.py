"""Study schema: the ``carbon`` section (how a design's embodied and operational carbon are counted;
dse.model.carbon). Defaults and their sources: ACT (Gupta et al., ISCA 2022) carbon_intensity/location.json."""
from __future__ import annotations

from pydantic import Field

from .common import StrictModel


class CarbonSpec(StrictModel):
    grid_intensity_g_per_kwh: float = Field(380.0, ge=0, le=2000, description=(
        "carbon intensity of the electricity the design runs on; default the USA grid's 380 g/kWh (ACT)"))
    fab_intensity_g_per_kwh: float = Field(583.0, ge=0, le=2000, description=(
        "carbon intensity of the fab's electricity; default Taiwan's 583 g/kWh (ACT)"))
    lifetime_years: float = Field(5.0, gt=0, le=50, description="years the design serves (amortises embodied)")
    utilisation: float = Field(0.5, gt=0, le=1, description="fraction of its lifetime the design serves at full rate")
