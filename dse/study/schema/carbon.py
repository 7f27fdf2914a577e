"""Study schema: the ``carbon`` section (operational and embodied carbon, dse.system.carbon after ACT).

``grid`` and ``fab_grid`` are a named grid of ACT's table (``usa``, ``taiwan``, ``coal``, ...; the list is
in dse/system/data/carbon.yaml) or a carbon intensity in g CO2e per kWh. Defaults and their sources:

* ``grid: usa`` (380 g CO2e/kWh, ACT carbon_intensity/location.json) where the system runs;
* ``fab_grid: taiwan`` (583 g/kWh) and ``gas_abatement: 97``: ACT's defaults for where dies are made;
* ``board_mm2: 16830`` and ``board_layers: 12``: the board under each package, an OCP Accelerator Module
  (102 x 165 mm; the layer count is an estimate), costed by ACT's PCB model;
* ``lifetime_years: 6`` and ``utilisation: 0.85``: the replacement rate and average use Luccioni,
  Viguier & Ligozat assume for GPU servers ("Estimating the Carbon Footprint of BLOOM", JMLR 2023).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .common import StrictModel


def _grid(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a grid is a name (usa, taiwan, coal, ...) or g CO2e per kWh")
    if not 0 <= value <= 2000:          # also refuses NaN and infinities
        raise ValueError("a grid intensity is 0 to 2000 g CO2e per kWh")
    return float(value)


class CarbonSpec(StrictModel):
    #: where it runs: a grid name (usa, world, europe, taiwan, coal, solar, ...) or g CO2e per kWh
    grid: str | float = "usa"
    #: where its dies are made: a grid name or g CO2e per kWh
    fab_grid: str | float = "taiwan"
    #: share of fab gases abated, %
    gas_abatement: Literal[95, 97, 99] = 97
    #: the board under each package, mm²
    board_mm2: float = Field(16830.0, ge=0, le=1e6)
    #: layers of that board (ACT's PCB model)
    board_layers: int = Field(12, ge=1, le=64)
    #: years the embodied carbon is spread over
    lifetime_years: float = Field(6.0, gt=0, le=30)
    #: share of the lifetime spent serving
    utilisation: float = Field(0.85, gt=0, le=1)

    _grids = field_validator("grid", "fab_grid", mode="before")(_grid)
