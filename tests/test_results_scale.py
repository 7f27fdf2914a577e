"""The results folder at scale (issue 38): CSV cells spreadsheets and Python's csv module accept, design
files written compactly by role and layer that ``dse evaluate`` reads back to the same metrics, the
placements of every design in placements.parquet, and design files of the old form still read.

The cap is Excel's: "Total number of characters that a cell can contain: 32,767" (Microsoft, Excel
specifications and limits); Python's csv module refuses a field over ``csv.field_size_limit()``, 131,072
characters by default (Python docs, csv.field_size_limit)."""
import csv
import io
import json
import random
from pathlib import Path

import pandas as pd
import pytest
import yaml

import dse
from dse.errors import StudyError
from dse.results import placement_store
from dse.results.design_file import design_from_dict, read_design
from dse.results.design_yaml import compact_placement, design_text, expand_placement, placement_yaml
from dse.results.placement_store import (MAX_CELL, cap_cells, placement_cell, placement_digest, placement_of,
                                         placement_text, placements_table)
from dse.study.yaml_input import load_yaml

EXCEL_CELL_LIMIT = 32_767          # Microsoft, Excel specifications and limits
CSV_DEFAULT_FIELD_LIMIT = 131_072  # Python docs, csv.field_size_limit


def deepseek_like(rng: random.Random, layers: int = 61, experts: int = 256, slots: int = 64) -> dict:
    """A DeepSeek-V3-sized per-layer placement (three dense layers, then 256 routed experts and a shared
    expert per layer: 14,972 units), random, some experts with two copies, one index missing."""
    p = {"embed": [0]}
    for layer in range(layers):
        p[f"L{layer}.attn"] = [rng.randrange(slots) if layer == 5 else 0]
        if layer < 3:
            p[f"L{layer}.ffn"] = [1]
            continue
        for e in range(experts):
            if (layer, e) == (7, 4):
                continue
            copies = [rng.randrange(slots)]
            if rng.random() < 0.05:
                copies.append(rng.randrange(slots))
            p[f"L{layer}.e{e}"] = copies
        p[f"L{layer}.shared"] = [2]
    p.update({"lm_head": [0], "L0-31.e3": [4], "yes": [1], "m/L3.e12": [3], "m/L4.e12": [3], "L3.e012": [5]})
    return p


@pytest.mark.parametrize("structured", [False, True])
def test_compact_placement_round_trips(structured):
    rng = random.Random(3)
    p = deepseek_like(rng)
    if structured:       # expert e on slot e % 64 in every layer, a few moved: the role encoding's case
        p.update({u: [int(u.rsplit(".e", 1)[1]) % 64] for u in p if ".e" in u and u[1:2].isdigit()})
        p["L7.e4"], p["L9.e12"] = [4], [63]
    compact = compact_placement(p)
    text = placement_yaml(compact)
    assert expand_placement(load_yaml(text)["placement"]) == p
    assert len(text) < 60_000                       # the flat form writes about 270,000 characters
    if structured:
        assert "L{3..60}.e#" in compact and compact["L9.e12"] == [63] and len(compact) < 20


def test_compact_placement_shares_the_most_common_row_first_met_on_a_tie():
    """Expert 0 sits on slot 5 in layers 0 and 3, on 6 in layers 1 and 2: a tie, the slot met first is shared
    and the two other layers deviate by name (a whole row would write more); expert 3's two copies join by +."""
    p = {f"L{layer}.e{e}": [5 if layer in (0, 3) else 6] if e == 0 else [2, 3] if e == 3 else [0]
         for layer in range(4) for e in range(4)}
    compact = compact_placement(p)
    assert compact == {"L{0..3}.e#": [5, 0, 0, [2, 3]], "L1.e0": [6], "L2.e0": [6]}
    assert placement_yaml(compact) == 'placement:\n  L{0..3}.e#: "5 0 0 2+3"\n  L1.e0: [6]\n  L2.e0: [6]\n'
    assert expand_placement(load_yaml(placement_yaml(compact))["placement"]) == p


def test_patterns_read_by_hand():
    """Layer ranges, rows as a string or a YAML list, later entries overriding earlier ones."""
    text = """placement:
      embed: [0]
      L{0..2}.attn: [1]
      L{1..2}.e#: "0 1+2 -"
      L2.e#: [3, [4, 5]]
      L1.e2: 6
    """
    assert expand_placement(load_yaml(text)["placement"]) == {
        "embed": [0], "L0.attn": [1], "L1.attn": [1], "L2.attn": [1], "L1.e0": [0], "L1.e1": [1, 2],
        "L2.e0": [3], "L2.e1": [4, 5], "L1.e2": [6]}


@pytest.mark.parametrize("placement, key", [({"L{5..1}.attn": [0]}, "L{5..1}.attn"),
                                            ({"L1.e#": "0 x 1"}, "L1.e#"),
                                            ({"L1.e##": "0"}, "L1.e##"),
                                            ({"L{0..1}{0..1}.e": [0]}, "L{0..1}{0..1}.e"),
                                            ({"L1.attn": ["a"]}, "L1.attn")])
def test_bad_patterns_name_the_key(placement, key):
    with pytest.raises(StudyError, match="placement"):
        expand_placement(placement)


def test_cells_stay_under_the_cap_and_load_with_csv_defaults():
    rng = random.Random(0)
    p = deepseek_like(rng)
    assert len(placement_text(p)) > CSV_DEFAULT_FIELD_LIMIT        # what pareto.csv held before (185,014)
    cell = placement_cell(p, 64, "designs/d00001.yaml and placements.parquet")
    assert len(cell) <= EXCEL_CELL_LIMIT and MAX_CELL == EXCEL_CELL_LIMIT
    assert f"sha256 {placement_digest(p)}" in cell and "designs/d00001.yaml" in cell
    per_slot = dict(item.split(":") for item in cell.split("copies per slot ")[1].split(";")[0].split())
    assert sum(map(int, per_slot.values())) == sum(len(s) for s in p.values())
    small = {"embed": [0], "L0.e1": [1, 2]}
    assert placement_cell(small, 4, "x") == "embed=0;L0.e1=1+2"
    table = cap_cells(pd.DataFrame({"placement": [cell, "y" * 200_000], "latency_s": [1.0, 2.0]}))
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    rows = list(csv.reader(io.StringIO(buffer.getvalue())))       # the csv module's default field limit
    assert max(len(c) for row in rows for c in row) <= EXCEL_CELL_LIMIT
    assert rows[2][0].startswith("yyy") and "200000 characters" in rows[2][0]


def test_digest_ignores_unit_order():
    assert placement_digest({"a": [0], "b": [1, 2]}) == placement_digest({"b": [1, 2], "a": [0]})
    assert placement_digest({"a": [0], "b": [1, 2]}) != placement_digest({"a": [0], "b": [2, 1]})


def test_digest_is_the_documented_hash():
    """placement_digest against its definition written out here: SHA-256 of the sorted names, each with a
    newline, then the copy counts and the slots in that order as 32-bit little-endian integers."""
    import hashlib
    import struct
    rng = random.Random(5)
    p = {f"L{rng.randrange(60)}.e{i}": [rng.randrange(64) for _ in range(rng.choice([1, 1, 2, 3]))]
         for i in range(400)}
    names = sorted(p)
    blob = "".join(n + "\n" for n in names).encode() + struct.pack(f"<{len(names)}i", *(len(p[n]) for n in names))
    slots = [s for n in names for s in p[n]]
    blob += struct.pack(f"<{len(slots)}i", *slots)
    assert placement_digest(p) == hashlib.sha256(blob).hexdigest()[:16]
    assert placement_digest({}) == hashlib.sha256(b"").hexdigest()[:16]


def test_placements_table_round_trips():
    placements = [{"a": [0], "b": [1, 2]}, {"b": [3], "a": [1]}]
    table = placements_table(["d00000", "d00001"], placements)
    assert table.num_rows == 4
    assert placement_of(table, "d00001") == placements[1] and placement_of(table, "d00009") == {}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A per-layer Mixtral-8x7B study (290 units, benchmarks/evaluate_mixtral.yaml) searched briefly,
    with a 400-character cell cap: its placements are summarised as DeepSeek-V3's are at 32,767."""
    data = yaml.safe_load(Path("benchmarks/evaluate_mixtral.yaml").read_text())
    data["search"] = {"objectives": ["latency", "energy"], "population": 8, "generations": 2, "seed": 1}
    out = tmp_path_factory.mktemp("results") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(placement_store, "MAX_CELL", 400)
        dse.write_results(dse.Study.from_dict(data).run(), out, report=False)
    path = tmp_path_factory.mktemp("study") / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return out, path


def test_results_folder_loads_with_csv_defaults(small_run):
    out, _ = small_run
    for name in ("pareto.csv", "evaluations.csv"):
        with open(out / name, newline="") as f:
            rows = list(csv.DictReader(f))                         # csv defaults: fields up to 131,072
        assert rows and all(len(v) <= 400 for row in rows for v in row.values())
        assert all(row["placement"].startswith("290 units") for row in rows)
        assert len(pd.read_csv(out / name)) == len(rows)
    loaded = dse.load_results(out)
    assert loaded.placements is not None and loaded.placements.num_rows == 290 * len(loaded.evaluations)


def test_design_file_reproduces_its_pareto_row(small_run, dse_cli):
    out, study_path = small_run
    pareto = pd.read_csv(out / "pareto.csv")
    row = pareto.iloc[0]
    path = out / "designs" / f"{row['design_id']}.yaml"
    text = path.read_text()
    assert ".e#: " in text and "L0.e0:" not in text                # experts written as rows by layer
    design = read_design(path, strict=True)
    assert f"sha256 {placement_digest(design.placement)}" in row["placement"]
    table = dse.load_results(out).placements
    assert placement_of(table, row["design_id"]) == design.placement
    code, stdout, err = dse_cli("evaluate", study_path, "--design", path, "--json")
    assert code == 0, err
    metrics = json.loads(stdout)["metrics"]
    for name in ("latency_s", "energy_j_per_token", "area_mm2", "cost_usd", "fault_tolerance_frac"):
        assert metrics[name] == pytest.approx(row[name], rel=1e-9), name


def test_old_design_files_still_read(small_run, tmp_path):
    """A design file of the form every earlier version wrote (PyYAML's block style, one key per unit)
    reads to the same design as the compact file."""
    out, _ = small_run
    path = next((out / "designs").glob("*.yaml"))
    design = read_design(path)
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(design.to_dict(), sort_keys=False))
    assert "\n  L0.attn:\n  - " in old.read_text()                   # block style, one key per unit
    assert read_design(old, strict=True) == design
    assert design_from_dict(load_yaml(design_text(design))) == design


def _flow_entry_by_entry(value) -> str:
    """The row text as written before rows carried it (issue 52, sixth round): each entry formatted in turn."""
    text = " ".join(map(str, value))
    if "[" not in text and "None" not in text:
        return f'"{text}"'
    return '"' + " ".join("-" if e is None else "+".join(map(str, e)) if isinstance(e, list) else str(e)
                          for e in value) + '"'


@pytest.mark.parametrize("structured", [False, True])
def test_rows_written_from_codes_equal_rows_written_entry_by_entry(structured):
    """A row's text made once per distinct placement (`_Slots.text`) is what formatting each entry gave,
    rows with gaps (``-``) and copies (``+``) included; the design file's text is unchanged."""
    from dse.results import design_yaml
    rng = random.Random(5)
    p = deepseek_like(rng)
    if structured:
        p.update({u: [int(u.rsplit(".e", 1)[1]) % 64] for u in p if ".e" in u and u[1:2].isdigit()})
    compact = compact_placement(p)
    rows = [v for v in compact.values() if isinstance(v, design_yaml._Row)]
    assert rows and all(r.text is not None for r in rows)
    if not structured:                              # random: gaps (expert 4 of layer 7) and copies
        assert any("-" in r.text.split() for r in rows) and any("+" in r.text for r in rows)
    for r in rows:
        assert design_yaml._flow(r) == _flow_entry_by_entry(r)
        plain = design_yaml._Row(r)                  # the same entries without the text: the fallback
        assert design_yaml._flow(plain) == _flow_entry_by_entry(r)


def _slots_unit_by_unit(values: list) -> tuple:
    """`_Slots`' codes, entries and multi flags as the unit-by-unit form made them (a dict of slot tuples)."""
    import numpy as np
    first: dict[tuple, int] = {}
    codes = np.array([first.setdefault(tuple(v), k) for k, v in enumerate(values)], np.int64)
    entry = {c: s[0] if len(s) == 1 else list(s) for s, c in first.items()}
    return codes, entry, sorted(c for s, c in first.items() if len(s) != 1)


@pytest.mark.parametrize("big", [False, True])
def test_slots_coded_on_arrays_equal_the_unit_by_unit_coding(big):
    """`_Slots` codes a placement on arrays (each unit's slots as one integer, or a row past int64): the same
    codes (the first unit holding the same slots), entries, copy flags and texts as coding unit by unit,
    copies, units without slots and slots past 2^31 included."""
    import numpy as np
    from dse.results import design_yaml
    rng = random.Random(11)
    values = list(deepseek_like(rng).values()) + [[], [3, 9], [9, 3], [3, 9], [], [7]]
    if big:
        values += [[2**40, 5, 2**40 + 1], [2**40, 5, 2**40 + 1], [2**40]]
    slots = design_yaml._Slots(values)
    codes, entry, multi = _slots_unit_by_unit(values)
    assert np.array_equal(slots.codes, codes)
    assert {c: list(slots.entry[c]) if slots.multi[c] else slots.entry[c] for c in entry} == entry
    assert np.flatnonzero(slots.multi).tolist() == multi
    assert [slots.text[c] for c in entry] == [design_yaml._entry_text(e) for e in entry.values()]


def _common_by_sorting(codes):
    """`design_yaml._common` as it was before it counted on tables (issue 52, eighth round): np.unique."""
    import numpy as np
    if len(codes) == 1:
        return codes[0]
    values, inverse = np.unique(codes, return_inverse=True)
    k, (n_rows, n_cols) = len(values), codes.shape
    keys = (np.arange(n_cols)[None, :] * k + inverse.reshape(codes.shape)).ravel()
    counts = np.bincount(keys, minlength=n_cols * k)
    first = np.full(n_cols * k, n_rows, np.int64)
    seen, at = np.unique(keys, return_index=True)
    first[seen] = at // n_cols
    return values[(counts * (n_rows + 1) - first).reshape(n_cols, k).argmax(axis=1)]


@pytest.mark.parametrize("structured", [False, True])
def test_design_text_writes_rows_from_their_text_alone(structured):
    """`design_text` makes each row's text without its entries (`_Slots.row_text`): the same file as writing
    the compact form with its rows' entries (`compact_placement`), the same keys and texts; `_common`
    counted on tables gives the codes NumPy's sort gave, ties and one-layer runs included."""
    import numpy as np
    from dse.results import design_yaml
    from dse.study.space import Design
    rng = random.Random(8)
    p = deepseek_like(rng)
    if structured:
        p.update({u: [int(u.rsplit(".e", 1)[1]) % 64] for u in p if ".e" in u and u[1:2].isdigit()})
        p["L7.e4"], p["L9.e12"], p["L11.e3"] = [4, 9], [63], []
    design = Design(rows=8, cols=8, chiplets=["a"] * 64, hbm_stacks=[1] * 64, ddr_channels=0, link="ucie",
                    mapping="many-to-many", placement=p)
    full, texts = compact_placement(p), compact_placement(p, texts=True)
    assert list(full) == list(texts)
    for key, value in full.items():
        if isinstance(value, design_yaml._Row):
            assert isinstance(texts[key], design_yaml._RowText) and texts[key] == value.text
        else:
            assert texts[key] == value
    head = design_text(design).split("placement:\n")[0]
    assert design_text(design) == head + placement_yaml(full)
    gen = np.random.default_rng(4)
    for shape, high in [((1, 7), 9), ((5, 256), 3), ((58, 256), 40), ((2, 3), 2)]:
        codes = gen.integers(0, high, shape) * 7
        assert np.array_equal(design_yaml._common(codes), _common_by_sorting(codes))
