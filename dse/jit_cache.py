"""Numba's on-disk cache, keyed by every source file of the project rather than by each function's own.

Numba checks a cached function against its own file only: "Cache invalidation fails to recognize changes
in symbols defined in a different file" (numba's developer notes, "Notes on Caching", Caching
Limitations; numba/numba pull request 8396 to track them is unmerged). Other numba code run in the same
process caches in the same folder. The kernels here inline functions of other modules
(``dse.serving.closed_form.continuous`` calls ``dse.serving.closed_form.fixed_point``, ``dse.model`` calls
``arch.area_cost``), so after a ``git pull`` or an edit of one module the others' cached machine code
would silently keep the old callee. `key_cache_by_sources` points ``numba.config.CACHE_DIR`` at a folder
named by a hash of the contents of every ``.py`` file of the five packages (about 10 ms to hash), under
``NUMBA_CACHE_DIR`` if the user set one, else under the ``dse`` package's ``__pycache__``: any change
compiles afresh; older folders of ours (``numba-<hash>`` in that ``__pycache__``) are removed.

Only functions decorated after it runs use the folder: ``import dse`` runs it first. A base package
imported alone before ``dse`` (``import arch``) keeps numba's per-file cache.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import numba

PACKAGES = ("dse", "workloads", "arch", "memory", "noc")
FOLDER = re.compile(r"numba-[0-9a-f]{16}")


def sources_hash(root: Path) -> str:
    """First 16 hex digits of the SHA-256 of every ``.py`` file of the packages under ``root`` (paths and contents)."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def key_cache_by_sources(root: Path | None = None) -> str:
    """Set numba's cache folder for this version of the sources under ``root`` (default: the project this
    module is in; module docstring); returns it."""
    root = root or Path(__file__).resolve().parents[1]
    name = f"numba-{sources_hash(root)}"
    user = os.environ.get("NUMBA_CACHE_DIR")
    own = root / "dse" / "__pycache__"
    folder = Path(user) / name if user else own / name
    numba.config.CACHE_DIR = str(folder)
    if not user and own.is_dir():
        for old in own.iterdir():
            if old.is_dir() and FOLDER.fullmatch(old.name) and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return str(folder)
