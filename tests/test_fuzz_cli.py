"""Seeded fuzzing of the ``dse`` command (issue 15): a few hundred mutations of the bundled studies and of a
design, each given to the CLI in-process. A mutation either is a valid study (exit 0) or ends with exactly
one line ``error: ...`` and exit status 2, never a traceback or another exit status.

Mutations: a value replaced by a nasty one (non-finite, negative, huge, of the wrong type, a path), a key
deleted or added, a node wrapped in a list or mapping, a line repeated, the text cut short, a stray
character, and deep nesting. The seed is fixed, so a failure reproduces; the whole file runs in about
30 s on one core.
"""
from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
import yaml

STUDIES = ["tests/data/tiny.yaml", "tests/data/tiny_moe.yaml", "tests/data/moe_small.yaml",
           "tests/data/enumerable.yaml", "studies/quickstart.yaml", "benchmarks/evaluate_mixtral.yaml"]
NASTY = [-1, 0, 10**12, -(10**12), 2.5, float("inf"), float("-inf"), float("nan"), 1e-300, 1e300, True, False,
         "yes", "", None, [], {}, [1, 2, 3], [[[[1]]]], {"a": 1}, "x" * 300, "../../etc/passwd", "1e400", "\t",
         "big", [0, 10**9], [5, 1]]
STRAY = ["\x00", "\t", ":", "[", "{", "&a", "*a", "!!python/object", "- ", "'", '"', "\\"]
SEED = 15
STUDY_MUTATIONS = 300
DESIGN_MUTATIONS = 100
RUNS = 12                      # valid mutations of the tiny study also run (a search of 24 designs)


def _paths(node, prefix=()):
    """Every path to a node of a YAML tree (mapping keys and list indices)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _at(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def _mutate_tree(rng: random.Random, data):
    data = copy.deepcopy(data)
    paths = [p for p in _paths(data) if p]
    path = rng.choice(paths)
    parent, last = _at(data, path[:-1]), path[-1]
    kind = rng.randrange(5)
    if kind == 0 or kind == 1:
        parent[last] = copy.deepcopy(rng.choice(NASTY))
    elif kind == 2 and isinstance(parent, dict):
        del parent[last]
    elif kind == 3 and isinstance(parent, dict):
        parent[rng.choice(["colour", "Name", "seeds", "__class__", "links "])] = rng.choice(NASTY)
    else:
        parent[last] = [parent[last]] if rng.random() < 0.5 else {"value": parent[last]}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _mutate_text(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    kind = rng.randrange(4)
    if kind == 0:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])                          # a key written twice, or a list item repeated
        return "".join(lines)
    if kind == 1:
        return text[: rng.randrange(len(text))]          # cut short
    if kind == 2:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(STRAY) + text[i:]
    return text.replace(": ", ": " + "[" * 40, 1) + "]" * 40   # nested past the cap


def _mutations(rng: random.Random, source: str, count: int):
    text = Path(source).read_text()
    data = yaml.safe_load(text)
    for _ in range(count):
        yield _mutate_tree(rng, data) if rng.random() < 0.7 else _mutate_text(rng, text)


def _check(code, out, err, what):
    assert code in (0, 2), f"exit {code} for {what}: {err[-2000:]}"
    assert "Traceback" not in out + err, what
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, f"{what}: {err[:2000]!r}"


def test_mutated_studies_are_valid_or_one_line_errors(dse_cli, tmp_path):
    rng = random.Random(SEED)
    outcomes = {0: 0, 2: 0}
    runs = 0
    for n in range(STUDY_MUTATIONS):
        source = STUDIES[n % len(STUDIES)]
        text = next(_mutations(rng, source, 1))
        path = tmp_path / f"m{n}.yaml"
        path.write_text(text)
        code, out, err = dse_cli("validate", path)
        _check(code, out, err, f"mutation {n} of {source}:\n{text[:3000]}")
        outcomes[code] += 1
        if code == 0 and source == STUDIES[0] and runs < RUNS:
            runs += 1
            code, out, err = dse_cli("run", path, "--out", tmp_path / f"out{n}", "--quiet")
            _check(code, out, err, f"run of mutation {n}:\n{text}")
    assert outcomes[2] > STUDY_MUTATIONS // 2, outcomes          # most mutations break the study
    assert outcomes[0] > 0 and runs > 0, outcomes


@pytest.fixture
def design_text():
    design = yaml.safe_load(Path("tests/data/exports/tiny_2x2.yaml").read_text())
    design["hbm_stacks"] = [1, 0, 1, 0]            # within tiny.yaml's 0..2 stacks
    return yaml.safe_dump(design, sort_keys=False)


def test_mutated_designs_are_valid_or_one_line_errors(dse_cli, tmp_path, tiny_path, design_text):
    base = tmp_path / "base.yaml"
    base.write_text(design_text)
    code, out, err = dse_cli("evaluate", tiny_path, "--design", base, "--json")
    assert code == 0, err
    rng = random.Random(SEED + 1)
    errors = 0
    for n, text in enumerate(_mutations(rng, str(base), DESIGN_MUTATIONS)):
        path = tmp_path / f"d{n}.yaml"
        path.write_text(text)
        code, out, err = dse_cli("evaluate", tiny_path, "--design", path, "--json")
        _check(code, out, err, f"design mutation {n}:\n{text}")
        errors += code == 2
    assert errors > DESIGN_MUTATIONS // 2
