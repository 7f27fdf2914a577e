"""Signing checkpoints, so that ``dse run --resume`` only unpickles what this user's runs wrote.

A checkpoint is a pickle (dse.search.checkpoint), and unpickling runs whatever code the file names:
resuming a folder someone sent you would run their code. Each checkpoint therefore ends with an
HMAC-SHA256 of its pickle under a key only this user's account holds, and a checkpoint whose tag does not
match is refused before anything is unpickled (unless the user says they trust it).

The key is 32 random bytes in ``$XDG_CONFIG_HOME/chiplet-dse/checkpoint.key`` (``~/.config/...``
when XDG_CONFIG_HOME is unset; ``DSE_CHECKPOINT_KEY`` names another file), created readable by its owner
only on the first checkpoint. It is the one file dse writes outside the folders a user names; deleting it
only means checkpoints written before can no longer be resumed without ``--trust-checkpoint``.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..errors import StudyError

KEY_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size


def key_path() -> Path:
    """Where this user's checkpoint key lives."""
    if os.environ.get("DSE_CHECKPOINT_KEY"):
        return Path(os.environ["DSE_CHECKPOINT_KEY"])
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "chiplet-dse" / "checkpoint.key"


def _read_key(path: Path) -> bytes | None:
    try:
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


def signing_key() -> bytes:
    """This user's key, created (owner-only) if there is none yet."""
    path = key_path()
    key = _read_key(path)
    if key is not None:
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:             # made meanwhile by another run: use it
        key = _read_key(path)
        if key is None:
            raise StudyError(f"checkpoint key {path} is not a {KEY_BYTES}-byte key file; delete it (checkpoints "
                             "it signed can then only be resumed with --trust-checkpoint)") from None
        return key
    except OSError as exc:
        raise StudyError(f"cannot create the checkpoint key {path}: {exc.strerror}; set DSE_CHECKPOINT_KEY to a "
                         "writable file, or search.checkpoint_every: 0 to run without checkpoints") from None
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(KEY_BYTES))
    return _read_key(path)


def new_mac(key: bytes):
    """An HMAC-SHA256 to feed the pickle into as it is written."""
    return hmac.new(key, digestmod=hashlib.sha256)


def verify(payload: bytes, tag: bytes) -> bool:
    """Whether ``tag`` is this user's HMAC of ``payload`` (False when there is no key)."""
    key = _read_key(key_path())
    if key is None:
        return False
    return hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), tag)
