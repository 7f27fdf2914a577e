"""The generated reference pages are current, and the option lists the docs show are the code's.

docs/reference/study-keys.md is what tools/study_keys.py generates from the study schema (every key with
its type, default, range and meaning); the commented study of docs/getting-started/first-study.md names
every chiplet preset (the README's copy left out h200-, b200-, mi300x- and tpu-v5e-like), memory kind,
link technology, mapping, algorithm and system preset the code knows.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_STUDY = ROOT / "docs" / "getting-started" / "first-study.md"


def _tool(name: str):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_study_keys_page_is_current():
    study_keys = _tool("study_keys")
    assert study_keys.PAGE.read_text() == study_keys.page(), "run python tools/study_keys.py"


def test_study_keys_page_lists_every_key_once():
    from dse.study.spec import Study
    rows = _tool("study_keys").rows(Study)
    keys = [r[0] for r in rows]
    assert len(keys) == len(set(keys))
    assert {"name", "workload.batch", "search.population", "hardware.chiplets[].preset",
            "training.resilience.storage", "runtime.policy", "serving.slo.ttft_ms"} <= set(keys)
    batch = next(r for r in rows if r[0] == "workload.batch")
    assert batch[2] == "`1`" and batch[3] == "[1, 65,536]"       # default, and the cap of limits.BATCH


def test_first_study_lists_the_codes_options():
    import arch
    import memory
    import noc
    from dse.study.schema import ALGORITHMS, MAPPINGS
    from dse.system import hardware
    text = FIRST_STUDY.read_text()

    def listed(pattern: str) -> list[str]:
        return re.search(pattern, text, re.M).group(1).replace("|", " ").split()

    assert [n.rstrip(",") for n in listed(r"# presets: (.*)$")] == list(arch.preset_names())
    hbm = listed(r"stacks: \[1, 8\]\}\s+# (.*)$")
    ddr = listed(r"channels: \[0, 8\]\}\s+# (.*)$")
    assert sorted(hbm + ddr) == sorted(memory.memory_kinds())
    assert listed(r"link: ucie-advanced\s+# (.*)$") == list(noc.link_kinds())
    assert listed(r"max_replicas: 2\}\s+# (.*)$") == list(MAPPINGS)
    assert listed(r"algorithm: nsga2\s+# (.*)$") == list(ALGORITHMS)
    assert listed(r"preset: dgx-h100-80gb\s+# ([a-z0-9 -]+);")[:len(hardware.preset_names())] == \
        list(hardware.preset_names())
    assert listed(r"fabric: nvlink4-nvswitch\s+# (.*)$") == list(hardware.fabric_names())
    assert listed(r"network: infiniband-ndr\s+# (.*)$") == list(hardware.network_names())


def test_fidelity_page_names_every_suite():
    """docs/concepts/fidelity.md's table of suites is `dse fidelity --suite`'s choices, in order."""
    from dse.cli.fidelity_cmd import SUITES
    text = (ROOT / "docs" / "concepts" / "fidelity.md").read_text()
    assert re.findall(r"^\| `([a-z0-9-]+)` \|", text, re.M) == list(SUITES)


def test_every_study_key_has_a_meaning():
    """Each key of the schema says what it means (a description, or a ``#:`` comment above the field)."""
    from dse.study.spec import Study
    missing = [r[0] for r in _tool("study_keys").rows(Study) if not r[4]]
    assert not missing, f"study keys without a meaning: {missing}"
