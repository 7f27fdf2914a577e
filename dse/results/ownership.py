"""Which files dse wrote: the one rule every command that writes follows.

**dse never replaces or removes a file it did not write** (a command with ``--force`` does when asked).
A file is dse's when either

* it carries dse's mark, ``written by dse <version>``, inside, where its format has room for one:
  YAML (a first-line comment ``# written by dse <version>``), SVG and HTML (an XML comment
  ``<!-- # written by dse <version> -->`` on the first line), PNG (a ``tEXt`` chunk ``Comment`` after the
  header chunk, PNG 1.2 section 11.3.4.3), Parquet (the schema's key-value metadata ``written_by``),
  Chakra execution traces (``.et``: a ``written_by`` attribute of the GlobalMetadata message that opens
  the file); or
* the manifest of its folder, `MANIFEST` (``.dse-written``, JSON: ``toolkit``, ``files``: file name ->
  SHA-256 of the bytes dse wrote), lists its name with the digest of the bytes it holds now.

CSV and JSON have no room for a mark (a comment line would break ``pandas.read_csv``, Excel and
``csv.DictReader``): the manifest alone vouches for them, so every CSV dse writes loads with default
options. Every file dse writes is recorded in its folder's manifest, marked or not (`record`,
`record_tree`); a file dse wrote and someone edited since no longer matches its digest and is theirs.
Copying a folder keeps both the marks and the manifest (digests depend on bytes alone, not on dates).
A folder is dse's when every file under it is (`foreign_file`); a manifest counts as dse's. Earlier
versions' calibrated chiplets (first line ``# dse calibrate --chiplet``) count as dse's too.

The manifest is updated right after the file is renamed into place (through a temporary and a rename of
its own): a kill between the two renames leaves a new file dse no longer recognises, never a foreign file
taken for dse's.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
import zlib
from pathlib import Path

MARK = "written by dse"
#: the manifest of a folder dse writes files into (module docstring)
MANIFEST = ".dse-written"
TOOLKIT = "chiplet-dse"
#: first lines of files dse wrote before the marker (``dse calibrate --out``)
LEGACY_FIRST_LINES = ("# dse calibrate --chiplet",)
#: text formats whose first line may be a ``#`` comment (YAML); CSV, JSON and Markdown get no mark
COMMENT_SUFFIXES = (".yaml", ".yml")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_KEYWORD = b"Comment"
PARQUET_KEY = b"written_by"
#: bytes read to find a marker at a file's start (text first line, PNG chunks before the image data, Chakra
#: GlobalMetadata)
HEAD_BYTES = 65536
CHUNK = 1 << 20


def marker() -> str:
    """``written by dse <version>`` of the installed toolkit."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"{MARK} {version(TOOLKIT)}"
    except PackageNotFoundError:
        return f"{MARK} (unknown version)"


def written_by_dse(path: str | Path) -> bool:
    """Whether ``path`` is a file dse wrote: marked inside, or recorded in its folder's manifest."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return False
    return path.name == MANIFEST or marked(path) or recorded(path)


def marked(path: Path) -> bool:
    """Whether ``path`` carries dse's mark inside (see the module docstring for each format)."""
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


def digest(path: Path) -> str:
    """SHA-256 of the file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder: Path) -> dict[str, str]:
    """File name -> digest of the manifest of ``folder`` ({} when there is none or it is not dse's)."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("toolkit") == TOOLKIT else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def recorded(path: Path) -> bool:
    """Whether the manifest beside ``path`` lists it with the digest of its bytes."""
    want = read_manifest(path.parent).get(path.name)
    if want is None:
        return False
    try:
        return digest(path) == want
    except OSError:
        return False


def record(folder: Path, files: dict[str, str | None]) -> None:
    """Update the manifest of ``folder``: each name -> its digest (None: the name is dropped)."""
    folder = Path(folder)
    entries = read_manifest(folder)
    for name, value in files.items():
        if value is None:
            entries.pop(name, None)
        else:
            entries[name] = value
    tmp = folder / f"{MANIFEST}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_text(json.dumps({"toolkit": TOOLKIT, "files": dict(sorted(entries.items()))}, indent=0) + "\n")
        os.replace(tmp, folder / MANIFEST)
    finally:
        if tmp.exists():
            tmp.unlink()


def record_files(paths: list[Path]) -> None:
    """Record each of ``paths`` (files just written) in its folder's manifest."""
    by_folder: dict[Path, dict[str, str | None]] = {}
    for p in map(Path, paths):
        by_folder.setdefault(p.parent, {})[p.name] = digest(p)
    for folder, files in by_folder.items():
        record(folder, files)


def record_tree(folder: Path, skip: tuple[str, ...] = ()) -> None:
    """Write a manifest into ``folder`` and each folder under it listing every file there (but ``skip``)."""
    for here, dirs, names in os.walk(folder):
        files = {n: digest(Path(here) / n) for n in names
                 if n != MANIFEST and n not in skip and not (Path(here) / n).is_symlink()}
        if files:
            record(Path(here), files)


def foreign_file(folder: Path) -> Path | None:
    """The first file under ``folder`` dse did not write (a link counts as foreign); None: all are dse's."""
    for here, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names) + [d for d in dirs if (Path(here) / d).is_symlink()]:
            if not written_by_dse(Path(here) / name):
                return Path(here) / name
    return None


def mark(path: Path, style: str = "auto") -> None:
    """Put dse's mark into the file ``path`` where its format has room (``style`` none: leave it as it
    is; auto: by content and name, see the module docstring)."""
    if style == "none":
        return
    data = path.read_bytes()
    if data.startswith(PNG_SIGNATURE):
        path.write_bytes(_png_with_text(data, PNG_KEYWORD, marker().encode()))
    elif data.startswith(b"PAR1"):
        import pyarrow.parquet as pq
        table = pq.read_table(path)
        meta = dict(table.schema.metadata or {})
        meta[PARQUET_KEY] = marker().encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
    elif path.suffix in COMMENT_SUFFIXES:
        path.write_bytes(f"# {marker()}\n".encode() + data)


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
