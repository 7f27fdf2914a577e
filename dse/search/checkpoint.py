"""Checkpoints of a running search, so that a long study can stop and resume where it was.

The whole `dse.search.loop.Search` is pickled (with cloudpickle: some of pymoo's tournament functions are
decorated closures plain pickle cannot name): the pymoo algorithm with its population and random
generator, every evaluation so far and the convergence record; not the evaluator (Numba functions,
rebuilt from the study on resume) nor a Dask client. A resumed search therefore draws the same random
numbers and ends with the same evaluations and front as one that never stopped.

The state of results folder ``DIR`` lives beside it in ``DIR.checkpoint/state.pkl``, so the results
folder itself only ever changes by its atomic swap (dse.results.folder). Each save writes a temporary file
in that folder, flushes it to disk and renames it over ``state.pkl`` (``os.replace`` is atomic on
POSIX and Windows): a process killed at any moment leaves the previous checkpoint or the new one,
never a torn file.

A checkpoint is a pickle, and loading a pickle runs any code it names: resume only runs you made.
The file is ``MAGIC``, the pickle, then an HMAC-SHA256 tag of the pickle under this user's key
(dse.search.signature); `load` refuses a file whose tag does not match, before unpickling anything,
unless ``trust=True`` (``dse run --resume DIR --trust-checkpoint``: for a checkpoint you moved here
from another machine of yours).
"""
from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import cloudpickle

from ..errors import StudyError
from . import signature

STATE_FILE = "state.pkl"
SUFFIX = ".checkpoint"
FORMAT = 2
MAGIC = b"chiplet-dse checkpoint 2\n"


class _Signing:
    """A file wrapper that feeds everything written through it to an HMAC."""

    def __init__(self, f, mac):
        self.f, self.mac = f, mac

    def write(self, data) -> int:
        self.mac.update(data)
        return self.f.write(data)


def path_for(out_dir: str | Path) -> Path:
    """The checkpoint folder of results folder ``out_dir``."""
    out = Path(out_dir)
    return out.with_name(out.name + SUFFIX)


def results_dir_of(checkpoint_dir: str | Path) -> Path:
    """The results folder a checkpoint folder belongs to."""
    d = Path(checkpoint_dir)
    return d.with_name(d.name[: -len(SUFFIX)]) if d.name.endswith(SUFFIX) else d


def locate(path: str | Path) -> Path:
    """The checkpoint folder for ``path``: a results folder, its checkpoint folder, or the state file."""
    p = Path(path)
    for candidate in (p.parent if p.name == STATE_FILE else p, path_for(p)):
        if (candidate / STATE_FILE).is_file():
            return candidate
    raise StudyError(f"no checkpoint to resume at {p} (looked for {path_for(results_dir_of(p)) / STATE_FILE}); "
                     "a run that finished leaves none")


def save(directory: str | Path, search) -> Path:
    """Write ``search`` atomically to ``directory/state.pkl``; returns the file."""
    key = signature.signing_key()          # before anything is made: no key, no folder
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "search": search}
    fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=d)
    mask = os.umask(0o077)                 # mkstemp makes it rw-------: give it the user's umask, as every file
    os.umask(mask)
    try:
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f:
            mac = signature.new_mac(key)
            f.write(MAGIC)
            cloudpickle.dump(payload, _Signing(f, mac), protocol=pickle.HIGHEST_PROTOCOL)
            f.write(mac.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, d / STATE_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(d)
    for stale in d.glob(".state-*.tmp"):       # left by a process killed while saving
        stale.unlink(missing_ok=True)
    return d / STATE_FILE


def load(path: str | Path, trust: bool = False):
    """The `Search` saved for ``path`` (see `locate`), ready for `Search.attach` and more steps.

    Refused unless this user's key signed it (see the module docstring) or ``trust``."""
    d = locate(path)
    file = d / STATE_FILE
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise StudyError(f"cannot read checkpoint {file}: {exc.strerror}") from None
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + signature.TAG_BYTES:
        raise StudyError(f"checkpoint {file} was not written by this version of the toolkit; start the study "
                         "again")
    body, tag = data[len(MAGIC): -signature.TAG_BYTES], data[-signature.TAG_BYTES:]
    if not trust and not signature.verify(body, tag):
        raise StudyError(f"checkpoint {file} was not written by your runs on this machine (its signature does not "
                         f"match {signature.key_source()}); a checkpoint is a pickle and loading it runs "
                         "any code it holds: if you trust where it came from, add --trust-checkpoint")
    try:
        payload = pickle.loads(body)
    except Exception as exc:            # unpicklable: written by another version of the toolkit
        raise StudyError(f"cannot read checkpoint {file}: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise StudyError(f"checkpoint {d / STATE_FILE} has an unknown format; start the study again")
    return payload["search"]


def remove(directory: str | Path) -> None:
    """Delete the checkpoint in ``directory`` (once its run's results are safely written): the state file
    and temporaries `save` writes, then the folder if that left it empty (nothing else is touched)."""
    d = Path(directory)
    if not d.is_dir() or d.is_symlink():
        return
    (d / STATE_FILE).unlink(missing_ok=True)
    for stale in d.glob(".state-*.tmp"):
        stale.unlink(missing_ok=True)
    try:
        d.rmdir()
    except OSError:         # something else lives there: not ours to delete
        pass


def _fsync_dir(d: Path) -> None:
    """Make the rename durable (no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
