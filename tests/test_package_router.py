"""The package routers' model (study key ``hardware.package.router``): BookSim2's iSLIP router by default."""
from pathlib import Path

import numpy as np
import pytest
import yaml

import dse
import noc


def _prepare(router: str | None):
    study = yaml.safe_load(Path("tests/data/tiny_moe.yaml").read_text())
    study["hardware"]["package"]["mesh"] = {"rows": 2, "cols": 2}
    if router:
        study["hardware"]["package"]["router"] = router
    return dse.prepare(dse.Study.from_dict(study))


def _design(prepared, expert_chiplet: int):
    tables = prepared.tables
    names = tables.unit_names
    experts = {u for u in names if ".e" in u or "expert" in u}
    placement = {u: [expert_chiplet] if u in experts else [0] for u in names}
    return dse.Design(rows=2, cols=2, chiplets=[tables.kind_names[0]] * 4, hbm_stacks=[9] * 4, ddr_channels=1,
                      link=prepared.package_evaluator.link, mapping="many-to-many", placement=placement)


def test_hand_offs_cross_islip_routers_at_the_allocators_efficiency():
    """By default a link delivers eta = 0.836 of its bandwidth to a hand-off (BookSim2's iSLIP router), so
    a design whose stages hand off across the package is slower than with ideal routers; one that keeps
    every unit on one chiplet never touches the network and is unchanged."""
    default, islip, ideal = _prepare(None), _prepare("islip"), _prepare("ideal")
    assert default.study.hardware.package.router == "islip"
    eta = noc.SWITCH_EFFICIENCY_ISLIP
    np.testing.assert_allclose(default.package_evaluator.routes.link_inv_bw * eta,
                               ideal.package_evaluator.routes.link_inv_bw, rtol=1e-12)

    def latency(prepared, chiplet):
        design = _design(prepared, chiplet)
        return prepared.package_evaluator.evaluate_designs([design], with_faults=False).iloc[0]["latency_s"]

    assert latency(islip, 1) > latency(ideal, 1)
    assert latency(islip, 1) == pytest.approx(latency(default, 1), rel=1e-12)
    assert latency(islip, 0) == pytest.approx(latency(ideal, 0), rel=1e-12)
