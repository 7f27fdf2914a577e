"""Files the CLI writes: never over a file dse did not write, never half a file.

Every file a command writes (``--out``, ``--plot``, ``--ops-out``, ``--scalesim``, ``--chakra``'s traces)
carries a content marker, ``written by dse <version>``, where its format keeps it:

* text (YAML, CSV, Markdown): a first line ``# written by dse <version>`` (read such a CSV with
  ``pandas.read_csv(path, comment="#")``); a SCALE-Sim topology keeps it at the end of its header row,
  which SCALE-Sim skips (``style="header"``);
* PNG: a ``tEXt`` chunk ``Comment`` after the header chunk (PNG 1.2, section 11.3.4.3);
* Parquet: the schema's key-value metadata ``written_by``;
* Chakra execution traces (``.et``): a ``written_by`` attribute of the GlobalMetadata message that opens
  the file (the writer puts it there: ``style="none"``).

`check_replace` refuses (a `StudyError` naming the flag: one line, exit 2) a path that exists and
carries no marker, unless ``force``; commands call it before their work starts. `replacing` gives a
temporary ``.NAME.tmp-<pid>-<hex>NAME-SUFFIX`` in the target's folder for the writer, marks it and
``os.replace``s it over the target, so a kill at any moment leaves the old file whole or the new one
(and at most the hidden temporary); the rename is atomic on one file system (POSIX rename(2)).
Earlier versions' calibrated chiplets (first line ``# dse calibrate --chiplet``) count as dse's.
"""
from __future__ import annotations

import os
import secrets
import shutil
import struct
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import StudyError

MARK = "written by dse"
#: first lines of files dse wrote before the marker (``dse calibrate --out``)
LEGACY_FIRST_LINES = ("# dse calibrate --chiplet",)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_KEYWORD = b"Comment"
PARQUET_KEY = b"written_by"
#: bytes read to find a marker at a file's start (text first line, PNG chunks before the image data, Chakra
#: GlobalMetadata)
HEAD_BYTES = 65536


def marker() -> str:
    """``written by dse <version>`` of the installed toolkit."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"{MARK} {version('chiplet-dse')}"
    except PackageNotFoundError:
        return f"{MARK} (unknown version)"


def written_by_dse(path: Path) -> bool:
    """Whether ``path`` carries dse's marker (see the module docstring for each format)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    if head.startswith(PNG_SIGNATURE):
        return any(key == PNG_KEYWORD and text.startswith(MARK.encode()) for key, text in _png_texts(head))
    if head.startswith(b"PAR1"):
        return _parquet_marked(path)
    if Path(path).suffix == ".et":
        return MARK.encode() in head
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    return f"# {MARK} " in first or first.startswith(LEGACY_FIRST_LINES)


def check_replace(path: str | Path, flag: str, force: bool | None) -> Path:
    """``path`` as a Path, after refusing (StudyError on ``flag``) a folder, a missing folder, or a file
    dse did not write (unless ``force``; None: the command has no ``--force``, the error does not offer it)."""
    path = Path(path)
    if path.is_dir():
        raise StudyError(f"{path} is a folder; give a file name", key=flag)
    if not path.parent.resolve().is_dir():
        raise StudyError(f"folder {path.parent} does not exist", key=flag)
    if path.exists() and not force and not written_by_dse(path):
        way = "--force replaces it" if force is not None else f"give another {flag}"
        raise StudyError(f"{path} exists and dse did not write it; refusing to replace it ({way})", key=flag)
    return path


@contextmanager
def replacing(path: str | Path, flag: str, force: bool | None, style: str = "auto") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write; then mark it (``style``: auto, header, none) and
    rename it over ``path``. The check of `check_replace` is made again first."""
    path = check_replace(path, flag, force)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}{path.suffix}")
    try:
        yield tmp
        _mark(tmp, style)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def replacing_in_folder(folder: str | Path, names: list[str], flag: str, force: bool) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder`` for a writer of the files ``names`` (marked by the
    writer); then rename each over ``folder/name``. Each existing one is checked as by `check_replace`."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise StudyError(f"{folder} is a file; give a folder", key=flag)
    for name in names:
        if folder.is_dir():
            check_replace(folder / name, flag, force)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".dse.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        yield tmp
        for name in names:
            os.replace(tmp / name, folder / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | Path, text: str, flag: str, force: bool) -> Path:
    """Write ``text`` to ``path`` through `replacing` (marked with a first-line comment)."""
    with replacing(path, flag, force) as tmp:
        tmp.write_text(text)
    return Path(path)


def _mark(tmp: Path, style: str) -> None:
    if style == "none":
        return
    data = tmp.read_bytes()
    if style == "header":
        first, sep, rest = data.partition(b"\n")
        tmp.write_bytes(first + f" # {marker()}".encode() + sep + rest)
    elif data.startswith(PNG_SIGNATURE):
        tmp.write_bytes(_png_with_text(data, PNG_KEYWORD, marker().encode()))
    elif data.startswith(b"PAR1"):
        import pyarrow.parquet as pq
        table = pq.read_table(tmp)
        meta = dict(table.schema.metadata or {})
        meta[PARQUET_KEY] = marker().encode()
        pq.write_table(table.replace_schema_metadata(meta), tmp)
    else:
        tmp.write_bytes(f"# {marker()}\n".encode() + data)


def _png_texts(head: bytes) -> list[tuple[bytes, bytes]]:
    """(keyword, text) of the tEXt chunks before the image data in the first bytes of a PNG."""
    out, at = [], len(PNG_SIGNATURE)
    while at + 8 <= len(head):
        length, kind = struct.unpack(">I4s", head[at:at + 8])
        if kind == b"IDAT" or at + 12 + length > len(head):
            break
        if kind == b"tEXt":
            key, _, text = head[at + 8:at + 8 + length].partition(b"\0")
            out.append((key, text))
        at += 12 + length
    return out


def _png_with_text(data: bytes, keyword: bytes, text: bytes) -> bytes:
    """``data`` (a PNG) with a tEXt chunk inserted after IHDR (length, type, data, CRC of type + data)."""
    at = len(PNG_SIGNATURE)
    ihdr_len = struct.unpack(">I", data[at:at + 4])[0]
    end = at + 12 + ihdr_len
    body = b"tEXt" + keyword + b"\0" + text
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return data[:end] + chunk + data[end:]


def _parquet_marked(path: Path) -> bool:
    try:
        import pyarrow.parquet as pq
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError):       # not a readable Parquet file (ArrowInvalid is a ValueError): not ours
        return False
    return meta.get(PARQUET_KEY, b"").startswith(MARK.encode())
