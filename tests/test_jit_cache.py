"""Numba's cache keyed by every source file (dse.jit_cache): numba itself checks a cached kernel against
its own file only, so an edit of a function it inlines from another module would leave stale machine
code (numba's "Notes on Caching", Caching Limitations)."""
import os
import subprocess
import sys
from pathlib import Path

import numba

import dse
from dse import jit_cache

ROOT = Path(dse.__file__).resolve().parents[1]


def _tree(tmp_path, callee_body):
    for package in jit_cache.PACKAGES:
        (tmp_path / package).mkdir(parents=True)
    (tmp_path / "dse" / "caller.py").write_text("from arch.callee import g\n\ndef f():\n    return g()\n")
    (tmp_path / "arch" / "callee.py").write_text(f"def g():\n    {callee_body}\n")
    return tmp_path


def test_the_key_changes_with_a_file_the_caller_does_not_live_in(tmp_path):
    before = jit_cache.sources_hash(_tree(tmp_path / "a", "return 1"))
    after = jit_cache.sources_hash(_tree(tmp_path / "b", "return 2"))
    assert before != after
    assert jit_cache.sources_hash(_tree(tmp_path / "c", "return 1")) == before     # contents, not times


RUN = """import sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "keyed":
    from pathlib import Path
    from dse.jit_cache import key_cache_by_sources
    key_cache_by_sources(Path(sys.argv[1]))
from dse.caller import f
print(f())
"""


def _kernels(tmp_path, callee_value):
    (tmp_path / "dse" / "caller.py").write_text(
        "import numba\nfrom arch.callee import g\n\n\n@numba.njit(cache=True)\ndef f():\n    return g()\n")
    (tmp_path / "arch" / "callee.py").write_text(
        f"import numba\n\n\n@numba.njit(cache=True)\ndef g():\n    return {callee_value}\n")


def _run(tree, how):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    return subprocess.run([sys.executable, "-c", RUN, str(tree), how], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def test_an_edit_of_an_inlined_kernel_in_another_file_is_compiled_afresh(tmp_path):
    # a cached kernel (dse/caller.py) calling one of another file (arch/callee.py), the callee then edited
    for how, expected in (("per file", "1"), ("keyed", "2")):
        tree = tmp_path / how.replace(" ", "_")
        for package in ("dse", "arch", "workloads", "memory", "noc"):
            (tree / package).mkdir(parents=True)
            (tree / package / "__init__.py").write_text("")
        (tree / "dse" / "jit_cache.py").write_text(Path(jit_cache.__file__).read_text())
        _kernels(tree, 1)
        assert _run(tree, how) == "1"
        _kernels(tree, 2)
        assert _run(tree, how) == expected, how        # numba alone keeps the stale callee: 1


def test_import_dse_caches_kernels_in_the_folder_of_these_sources():
    folder = Path(numba.config.CACHE_DIR)
    assert folder.name == f"numba-{jit_cache.sources_hash(ROOT)}"
    assert folder.parent == Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else \
        folder.parent == ROOT / "dse" / "__pycache__"


def test_a_user_cache_folder_is_kept_and_used(tmp_path):
    # NUMBA_CACHE_DIR set by the user: our folder goes inside it and nothing of theirs is removed
    theirs = tmp_path / "numba-0123456789abcdef"
    theirs.mkdir()
    code = "import dse, numba; print(numba.config.CACHE_DIR)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}).stdout.strip()
    assert Path(out).parent == tmp_path and Path(out).name.startswith("numba-")
    assert theirs.is_dir()


def test_folders_of_older_sources_are_removed_from_our_pycache_only_theirs():
    own = ROOT / "dse" / "__pycache__"
    old, other = own / "numba-0000000000000000", own / "numba-notours"
    old.mkdir(parents=True, exist_ok=True)
    other.mkdir(exist_ok=True)
    try:
        if os.environ.get("NUMBA_CACHE_DIR"):
            return
        current = Path(jit_cache.key_cache_by_sources())
        assert not old.exists() and other.is_dir() and current.name == Path(numba.config.CACHE_DIR).name
    finally:
        other.rmdir()
