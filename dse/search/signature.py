"""Signing checkpoints, so that ``dse run --resume`` only unpickles what this user's runs wrote.

A checkpoint is a pickle (dse.search.checkpoint), and unpickling runs whatever code the file names:
resuming a folder someone sent you would run their code. Each checkpoint therefore ends with an
HMAC-SHA256 of its pickle under a key only this user's account holds, and a checkpoint whose tag does not
match is refused before anything is unpickled (unless the user says they trust it).

The key is derived, never stored: SHA-256 of this machine's ``/etc/machine-id`` (a per-installation random
identifier, readable on the machine only) and the user's id, so dse writes nothing outside the folders a
user names. ``DSE_CHECKPOINT_KEY`` may name a key file instead (32 bytes, created owner-only at that path if
missing): to resume on another machine, or where there is no machine id (then the host name stands in, a
weaker secret). A checkpoint from another machine or user resumes only with ``--trust-checkpoint``.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
from pathlib import Path

from ..errors import StudyError

KEY_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size


MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def _read_key(path: Path) -> bytes | None:
    try:
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


def _derived_key() -> bytes:
    """SHA-256 of the machine id (or host name) and the user id: the same for every run of this user here."""
    secret = b""
    for name in MACHINE_ID_FILES:
        try:
            secret = Path(name).read_bytes().strip()
        except OSError:
            continue
        if secret:
            break
    secret = secret or socket.gethostname().encode()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return hashlib.sha256(b"chiplet-dse checkpoint key v1\0" + secret + b"\0" + str(uid).encode()).digest()


def _file_key(path: Path) -> bytes:
    """The key in the file ``DSE_CHECKPOINT_KEY`` names, created (owner-only) if there is none yet."""
    key = _read_key(path)
    if key is not None:
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:             # made meanwhile by another run: use it
        key = _read_key(path)
        if key is None:
            raise StudyError(f"checkpoint key {path} (DSE_CHECKPOINT_KEY) is not a {KEY_BYTES}-byte key file") from None
        return key
    except OSError as exc:
        raise StudyError(f"cannot create the checkpoint key {path} (DSE_CHECKPOINT_KEY): {exc.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(KEY_BYTES))
    return _read_key(path)


def key_source() -> str:
    """Where this user's key comes from, in words."""
    named = os.environ.get("DSE_CHECKPOINT_KEY")
    return f"the key in {named} (DSE_CHECKPOINT_KEY)" if named else "this machine's and user's key"


def signing_key() -> bytes:
    """This user's key on this machine (module docstring)."""
    named = os.environ.get("DSE_CHECKPOINT_KEY")
    return _file_key(Path(named)) if named else _derived_key()


def new_mac(key: bytes):
    """An HMAC-SHA256 to feed the pickle into as it is written."""
    return hmac.new(key, digestmod=hashlib.sha256)


def verify(payload: bytes, tag: bytes) -> bool:
    """Whether ``tag`` is this user's HMAC of ``payload`` (False when there is no key)."""
    named = os.environ.get("DSE_CHECKPOINT_KEY")
    key = _read_key(Path(named)) if named else _derived_key()
    if key is None:
        return False
    return hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), tag)
