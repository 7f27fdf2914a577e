"""Chiplet fields a study leaves open (``options``) become library variants the search chooses among."""
import pytest
import yaml

import arch
import dse


def _study(tiny_dict, **options):
    data = dict(tiny_dict)
    data["hardware"] = dict(data["hardware"])
    chiplets = [dict(c) for c in data["hardware"]["chiplets"]]
    chiplets[1]["options"] = options
    data["hardware"]["chiplets"] = chiplets
    return data


def test_every_combination_is_a_variant_with_its_own_costs(tiny_dict):
    study = dse.Study.from_dict(_study(tiny_dict, array=[[16, 16], [32, 32]], sram_mb=[2, 4]))
    names = [c.name for c in study.hardware.library()]
    assert names == ["big", "small[array=16x16,sram_mb=2]", "small[array=16x16,sram_mb=4]",
                     "small[array=32x32,sram_mb=2]", "small[array=32x32,sram_mb=4]"]
    prepared = dse.prepare(study)
    t = prepared.tables
    assert t.kind_names == names
    # a larger array is bigger (arch area model) and no slower on the same work
    area = dict(zip(names, t.kind_area_mm2))
    assert area["small[array=32x32,sram_mb=2]"] > area["small[array=16x16,sram_mb=2]"]
    assert area["small[array=16x16,sram_mb=4]"] > area["small[array=16x16,sram_mb=2]"]
    lib = study.hardware.library()
    assert lib[3].rows == 32 and lib[3].sram_bytes == 2 * 2**20
    assert (t.unit_time_s[:, 3] <= t.unit_time_s[:, 1] + 1e-15).all()
    assert arch.chiplet_area_mm2(lib[3]) == pytest.approx(area[names[3]])
    assert prepared.space.upper[prepared.space.slices["kind"]].max() == len(names) - 1
    # the resolved study keeps the options and loads again to the same library
    again = dse.Study.from_dict(yaml.safe_load(yaml.safe_dump(study.resolved())))
    assert [c.name for c in again.hardware.library()] == names


@pytest.mark.parametrize("options,words", [
    ({"colour": [1]}, "options: 'colour' cannot be left open"),
    ({"name": ["x"]}, "options: 'name' cannot be left open"),
    ({"sram_mb": []}, "options.sram_mb needs at least one value"),
    ({"sram_mb": [2, -1]}, "options: sram_mb=-1: Input should be greater than 0"),
    ({"dataflow": ["os", "xs"]}, "options: dataflow='xs'"),
])
def test_bad_options_name_the_chiplet(dse_cli, tiny_dict, tmp_path, options, words):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_study(tiny_dict, **options)))
    code, _, err = dse_cli("validate", path)
    assert code == 2
    assert "hardware.chiplets[1]: " in err and words in err, err
