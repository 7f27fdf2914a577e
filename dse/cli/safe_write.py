"""Files the CLI writes: never over a file dse did not write, never half a file.

Every command that writes (``--out``, ``--plot``, ``--ops-out``, ``--scalesim``, ``--chakra``'s traces,
``dse compare --out``, ``dse timeline --out``) follows one rule, dse.results.ownership's: dse never
replaces a file it did not write. A file is dse's when it carries dse's mark where its format has room
(YAML comment, PNG text chunk, Parquet metadata, SVG/HTML comment, Chakra metadata) or when the manifest
``.dse-written`` of its folder lists it with the digest of its bytes (CSV and JSON: no comment lines, so
they load with ``pandas.read_csv(path)`` and ``csv.DictReader`` as they are).

`check_replace` refuses (a `StudyError` naming the flag: one line, exit 2) a path that exists and is not
dse's, unless ``force``; commands call it before their work starts. `replacing` gives a temporary
``.NAME.tmp-<pid>-<hex>NAME-SUFFIX`` in the target's folder for the writer, marks it, ``os.replace``s it
over the target and records it in the folder's manifest, so a kill at any moment leaves the old file whole
or the new one (and at most the hidden temporary); the rename is atomic on one file system (POSIX
rename(2)). Files are created with the user's umask.
"""
from __future__ import annotations

import os
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import StudyError
from ..results.ownership import digest, mark, marker, record, written_by_dse

__all__ = ["check_replace", "replacing", "replacing_in_folder", "write_text", "marker", "written_by_dse"]


def check_replace(path: str | Path, flag: str, force: bool | None) -> Path:
    """``path`` as a Path, after refusing (StudyError on ``flag``) a folder, a missing folder, or a file
    dse did not write (unless ``force``; None: the command has no ``--force``, the error does not offer it)."""
    path = Path(path)
    if path.is_dir():
        raise StudyError(f"{path} is a folder; give a file name", key=flag)
    if not path.parent.resolve().is_dir():
        raise StudyError(f"folder {path.parent} does not exist", key=flag)
    if (path.exists() or path.is_symlink()) and not force and not written_by_dse(path):
        way = "--force replaces it" if force is not None else f"give another {flag}"
        raise StudyError(f"{path} exists and dse did not write it; refusing to replace it ({way})", key=flag)
    return path


@contextmanager
def replacing(path: str | Path, flag: str, force: bool | None, style: str = "auto") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write; then mark it (``style``: auto, none), rename it
    over ``path`` and record it in the folder's manifest. The check of `check_replace` is made again first."""
    path = check_replace(path, flag, force)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}{path.suffix}")
    try:
        yield tmp
        mark(tmp, style)
        written = digest(tmp)
        os.replace(tmp, path)
        record(path.parent, {path.name: written})
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def replacing_in_folder(folder: str | Path, names: list[str], flag: str, force: bool | None) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder`` for a writer of the files ``names``; then mark each
    where its format has room (or the writer did), rename each over ``folder/name`` and record it in the
    folder's manifest. Each existing one is checked as by `check_replace`; other files are left alone."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise StudyError(f"{folder} is a file; give a folder", key=flag)
    for name in names:
        if folder.is_dir():
            check_replace(folder / name, flag, force)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".dse.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        yield tmp
        for name in names:
            mark(tmp / name)
        written = {name: digest(tmp / name) for name in names}
        for name in names:
            os.replace(tmp / name, folder / name)
        record(folder, written)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | Path, text: str, flag: str, force: bool) -> Path:
    """Write ``text`` to ``path`` through `replacing` (marked as its format allows)."""
    with replacing(path, flag, force) as tmp:
        tmp.write_text(text)
    return Path(path)
