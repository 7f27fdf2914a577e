"""Reading the YAML a user hands to dse (studies, designs, results folders), strictly and in one line.

`load_yaml` differs from ``yaml.safe_load`` in three ways, each because plain PyYAML accepted nonsense or
failed with a traceback:

* a key written twice in one mapping is an error naming it (PyYAML silently keeps the last value);
* nesting deeper than `MAX_DEPTH` levels is refused before anything is built (PyYAML's composer recurses
  once per level: 5,000 levels gave a RecursionError, 200,000 crash libyaml outright);
* exponents without a dot (``1e-3``, ``2E9``) are numbers, as in YAML 1.2 (PyYAML follows YAML 1.1 and
  reads them as strings, which the strict study schema would then refuse as text).

Every problem is a `StudyError` of one line: the file, then line and column where YAML says.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import StudyError

#: deepest nesting of mappings and lists accepted; a study needs at most 8 levels, a design 3
MAX_DEPTH = 32

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)      # libyaml when present: 262 designs in 0.1 s
_EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class StrictLoader(_Base):
    """PyYAML's safe loader that refuses duplicate keys and reads ``1e-3`` as a float."""

    # a private copy: PyYAML's add_implicit_resolver would append to the lists shared with SafeLoader
    yaml_implicit_resolvers = {k: list(v) for k, v in _Base.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key_node.value!r} appears twice in one mapping", key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


for _first in "-+0123456789.":
    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list(_first))


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _python_parser_error(text: str) -> yaml.YAMLError | None:
    """The error PyYAML's own parser reports (its marks point where the problem starts; libyaml's often
    one line later)."""
    try:
        for _ in yaml.parse(text, Loader=yaml.SafeLoader):
            pass
    except yaml.YAMLError as exc:
        return exc
    return None


def _check_depth(text: str, source: str | None) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` from the event stream (built without recursion)."""
    depth = 0
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise StudyError(f"nested deeper than {MAX_DEPTH} levels at line {mark.line + 1} (studies and "
                                 "designs need fewer than 10)", source=source)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def load_yaml(text: str, source: str | None = None) -> Any:
    """The data in YAML ``text`` (from file ``source``, for messages); a one-line `StudyError` if it is not
    valid YAML, repeats a key or nests deeper than `MAX_DEPTH`."""
    try:
        _check_depth(text, source)
        return yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as exc:
        exc = _python_parser_error(text) or exc
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problem = " ".join(str(problem).split())
        if "nesting depth" in problem:          # PyYAML >= 6.0.3's own limit, met while scanning ahead
            raise StudyError(f"nested deeper than {MAX_DEPTH} levels{_where(exc)} (studies and designs need "
                             "fewer than 10)", source=source) from None
        raise StudyError(f"not valid YAML{_where(exc)}: {problem}", source=source) from None
    except RecursionError:
        raise StudyError(f"nested too deeply (at most {MAX_DEPTH} levels)", source=source) from None


def read_yaml_file(path: str | Path, what: str) -> Any:
    """The YAML data of the file ``path`` (``what`` names it in errors: "study file", "design file"), read
    as `load_yaml` reads text; every problem is one `StudyError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise StudyError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:      # ValueError: a NUL byte in the path
        shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
        raise StudyError(f"cannot read {what} {shown}: {exc}") from None
    return load_yaml(text, source=str(path))

