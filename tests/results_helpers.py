"""Helpers of the results/exports tests: a results folder holding one hand-written tiny design."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

import dse
from dse.results.folder import read_design

DATA = Path(__file__).parent / "data"
DESIGN_ID = "dtiny"


def tiny_results_folder(folder: Path) -> Path:
    """``folder`` made a results folder: the resolved tiny study and designs/dtiny.yaml."""
    (folder / "designs").mkdir(parents=True, exist_ok=True)
    study = dse.load_study(DATA / "tiny.yaml")
    (folder / "study.yaml").write_text(yaml.safe_dump(study.resolved(), sort_keys=False))
    shutil.copy(DATA / "exports" / "tiny_2x2.yaml", folder / "designs" / f"{DESIGN_ID}.yaml")
    return folder


def tiny_design():
    return read_design(DATA / "exports" / "tiny_2x2.yaml")


def decode_key(key):
    """RapidChiplet's helpers.decode_key, re-implemented to read its files back."""
    if isinstance(key, str) and key.startswith("__tuple__:"):
        return tuple(decode_key(k) for k in json.loads(key[len("__tuple__:"):]))
    return key


def decode(data):
    if isinstance(data, dict):
        if "__tuple__" in data:
            return tuple(decode(v) for v in data["items"])
        return {decode_key(k): decode(v) for k, v in data.items()}
    if isinstance(data, list):
        return [decode(v) for v in data]
    return data


def read_json(path: Path):
    return decode(json.loads(Path(path).read_text()))
