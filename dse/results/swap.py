"""Replacing a results folder whole, so that a process killed at any moment loses nothing.

A results folder ``OUT`` is written into a hidden sibling ``.OUT.tmp-<pid>-<random>`` and swapped into
place. Every folder dse writes carries a marker file, `MARKER` (``.dse-results``, JSON: toolkit, version,
study, ``complete``), which is how dse recognises its own folders: ``complete`` is false while the
folder is being written and set true (atomically, by ``os.replace``) once every file is in.

The steps of a write (dse.results.folder.write_results, then `swap_in`) and what a kill after each
leaves (`STEPS`, in order; `FAULT_HOOK` is called with each name, so tests can kill the process there):

==============  ===============================================  ==========================================
step            done                                             the next run (`recover`)
==============  ===============================================  ==========================================
``created``     temporary folder made, marker says incomplete    removes the temporary
``written``     every file written, marker still incomplete      removes the temporary
``complete``    marker says complete                             removes the temporary (OUT intact), or
                                                                 moves it in if there is no OUT yet
``moved-away``  OUT renamed to ``.OUT.old-<pid>-<random>``       finishes: complete temporary -> OUT
``moved-in``    temporary renamed to OUT                         removes the old folder
``removing``    old folder partly deleted (marker last)          removes the rest
==============  ===============================================  ==========================================

`recover` runs before every write (`write_results`, ``dse run``). It looks only at siblings named
``.OUT.tmp-*`` / ``.OUT.old-*`` whose process is gone (the pid in the name is not running) and that
are dse's own: they hold the marker, or are empty, or (folders of toolkit versions before the marker,
named ``.OUT.tmp-XXXXXXXX`` / ``.OUT.old-<pid>``) hold nothing but names dse writes (`DSE_ENTRIES`).
Anything else is left alone. If OUT is missing it is first restored: from the newest complete
temporary (finishing the swap), else from the newest old folder (rolling it back). Deleting a folder
of ours removes the marker last, so a deletion cut short still leaves a folder recognisably ours, or
an empty one.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from .ownership import MANIFEST

MARKER = ".dse-results"
#: every top-level entry dse writes into a results folder (exports/: `dse export`'s default place;
#: MANIFEST: the digests of the files, dse.results.ownership)
DSE_ENTRIES = frozenset({MARKER, MANIFEST, "pareto.csv", "evaluations.csv", "convergence.csv", "screening.json", "study.yaml",
                         "summary.md", "designs", "plots", "report.md", "report.html", "exports",
                         "placements.parquet", "baseline.json"})
STEPS = ("created", "written", "complete", "moved-away", "moved-in", "removing")

#: called with each step's name as `swap_in` passes it (tests install one that kills the process)
FAULT_HOOK: Callable[[str], None] | None = None


def fault_point(name: str) -> None:
    """Step ``name`` of the swap is done (see `STEPS`): call `FAULT_HOOK`."""
    if FAULT_HOOK is not None:
        FAULT_HOOK(name)


def read_marker(folder: Path) -> dict | None:
    """The marker of a folder dse wrote (None: no readable marker)."""
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("toolkit") == "chiplet-dse" else None


def write_marker(folder: Path, study: str, complete: bool) -> None:
    """Write (atomically replace) the marker of ``folder``."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        toolkit_version = version("chiplet-dse")
    except PackageNotFoundError:
        toolkit_version = "unknown"
    data = {"toolkit": "chiplet-dse", "version": toolkit_version, "study": study, "complete": complete}
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, folder / MARKER)


def new_temporary(out: Path) -> Path:
    """An empty hidden sibling of ``out`` to write into, marked as this process's, with the permissions
    a folder made under the user's umask has (``mkdtemp`` makes it ``rwx------`` whatever the umask)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    tmp.chmod(0o777 & ~current_umask())
    return tmp


def current_umask() -> int:
    """The process's umask (read by setting it and setting it back: POSIX has no read-only call)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def swap_in(tmp: Path, out: Path) -> None:
    """Replace ``out`` (if any) by the complete folder ``tmp``; the old one is deleted once the new is in."""
    if not out.exists():
        os.replace(tmp, out)
        fault_point("moved-in")
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
    os.replace(out, old)
    fault_point("moved-away")
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)            # put the previous results back before giving up
        raise
    fault_point("moved-in")
    remove_ours(old)


def remove_ours(folder: Path) -> None:
    """Delete a folder dse made, its marker last (see the module docstring)."""
    for entry in sorted(folder.iterdir(), key=lambda p: p.name == MARKER):
        if entry.name == MARKER:
            fault_point("removing")
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    folder.rmdir()


_SIBLING = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?:(?P<pid>\d+)(?:-(?P<token>[A-Za-z0-9_]+))?"
                      r"|(?P<legacy>[A-Za-z0-9_]{8}))$")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _ours(folder: Path) -> bool:
    """A folder dse made: marked, empty, or (written before the marker existed) only dse's names."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    if read_marker(folder) is not None:
        return True
    return all(entry.name in DSE_ENTRIES for entry in folder.iterdir())


def stale_siblings(out: Path) -> list[tuple[str, Path]]:
    """(``tmp`` or ``old``, path) of the hidden siblings of ``out`` left by dse processes no longer running."""
    found = []
    if not out.parent.is_dir():
        return found
    for entry in out.parent.iterdir():
        match = _SIBLING.match(entry.name)
        if match is None or match["name"] != out.name:
            continue
        pid = match["pid"]
        if match["legacy"] is not None and match["kind"] != "tmp":
            continue
        if pid is not None and _alive(int(pid)):
            continue
        if _ours(entry):
            found.append((match["kind"], entry))
    return sorted(found, key=lambda kv: kv[1].stat().st_mtime, reverse=True)


def _complete(folder: Path) -> bool:
    marker = read_marker(folder)
    if marker is not None:
        return bool(marker.get("complete"))
    names = {entry.name for entry in folder.iterdir()}
    return {"study.yaml", "pareto.csv", "evaluations.csv"} <= names


def recover(out: Path) -> str | None:
    """Finish or roll back a swap into ``out`` that a killed process left, then delete the stale siblings
    (see the module docstring). Returns what was done to ``out`` ("finished", "restored") or None."""
    stale = stale_siblings(out)
    done = None
    if not out.exists() and not out.is_symlink():
        for kind, wanted in (("tmp", "finished"), ("old", "restored")):
            candidate = next((p for k, p in stale if k == kind and _complete(p)), None)
            if candidate is not None:
                os.replace(candidate, out)
                stale = [(k, p) for k, p in stale if p != candidate]
                done = wanted
                break
    for _, folder in stale:
        remove_ours(folder)
    return done
