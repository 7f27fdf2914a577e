"""Write docs/reference/study-keys.md: every key of the study file, generated from the pydantic schema.

Each key's type, default and range come from the schema's fields (dse.study.spec.Study and the sections of
dse/study/schema/); its meaning from the field's ``description``, else the ``#:`` comment above the field,
else the comment on its line. ``python tools/study_keys.py`` rewrites the page;
tests/test_docs_reference.py checks that the committed page is what this prints.
"""
from __future__ import annotations

import ast
import inspect
import io
import sys
import textwrap
import tokenize
import types
import typing
from functools import lru_cache
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "study-keys.md"

HEADER = """# Study keys

Every key of the study file, generated from the schema (`dse/study/schema/`, one module per section) by
`python tools/study_keys.py`; `tests/test_docs_reference.py` checks that this page is current. A key
`a.b` is `b` inside the mapping `a`; `a[].b` is `b` in each entry of the list `a`. "required" keys have
no default; a range `[1, 16]` includes both ends, `(0, 1]` excludes 0. Sizes are capped
(`dse/study/schema/limits.py`); a cap shows as the range's upper end. A chiplet's fields default to
its kind's or preset's values ([arch](../arch.md)).
[The study](../concepts/study.md) explains how the sections fit together; `dse validate STUDY.yaml`
checks a file against this schema without running it.
"""


@lru_cache(maxsize=None)
def comments(cls: type) -> dict[str, str]:
    """Field name -> the ``#:`` comment lines above it, or the comment on its line, in ``cls``'s source."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source).body[0]
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string
    text = source.splitlines()
    out = {}
    for node in tree.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, row = [], node.lineno - 1
        while row >= 1 and text[row - 1].strip().startswith("#:"):
            above.insert(0, text[row - 1].strip()[2:].strip())
            row -= 1
        if above:
            out[node.target.id] = " ".join(above)
            continue
        trailing = [found[r] for r in range(node.lineno, (node.end_lineno or node.lineno) + 1) if r in found]
        if trailing:
            out[node.target.id] = " ".join(c.lstrip("#").strip() for c in trailing)
    return out


def meaning(model: type[BaseModel], name: str) -> str:
    info = model.model_fields[name]
    if info.description:
        return " ".join(info.description.split())
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and name in getattr(cls, "__annotations__", {}):
            found = comments(cls).get(name)
            if found:
                return found
    return ""


def _models(annotation) -> list[tuple[str, type[BaseModel]]]:
    """(path suffix, model) of every section model inside a field's type: ``""`` for the model itself,
    ``"[]"`` for entries of a list of them."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    if origin is list:
        return [("[]" + s, m) for s, m in _models(typing.get_args(annotation)[0])]
    return []


def type_name(annotation) -> str:
    """A reader's name for a field's type."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = args[0]
        if typing.get_origin(inner) is tuple and any(getattr(m, "func", None) for m in args[1:]) \
                and typing.get_args(inner) and typing.get_args(inner)[0] is int and len(typing.get_args(inner)) == 2:
            return "int or [low, high]"
        return type_name(inner)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is list:
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}" if args else "mapping"
    if origin is tuple:
        return "[" + ", ".join(type_name(a) for a in args if a is not Ellipsis) + "]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _constraints(metadata) -> list:
    """Every constraint object of a field: pydantic's metadata, nested Annotated metadata included."""
    found = []
    for m in metadata:
        found.append(m)
        found.extend(getattr(m, "metadata", []) or [])
    return found


def _caps(annotation) -> list:
    """The caps (dse.study.schema.limits.Cap) of ``limits.at_most`` validators inside a type."""
    from dse.study.schema.limits import Cap
    caps = []
    if typing.get_origin(annotation) is typing.Annotated:
        for m in typing.get_args(annotation)[1:]:
            for cell in (getattr(getattr(m, "func", None), "__closure__", None) or ()):
                if isinstance(cell.cell_contents, Cap):
                    caps.append(cell.cell_contents)
        caps += _caps(typing.get_args(annotation)[0])
    for a in typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ():
        caps += _caps(a)
    return caps


def _lower_bounds(annotation) -> list:
    """Bounds that pydantic's constrained aliases (PositiveInt, NonNegativeFloat) carry in the type."""
    if typing.get_origin(annotation) is typing.Annotated:
        return [*_constraints(typing.get_args(annotation)[1:]), *_lower_bounds(typing.get_args(annotation)[0])]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [b for a in typing.get_args(annotation) for b in _lower_bounds(a)]
    return []


def _number(value) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e4:
        return f"{value:.0e}".replace("e+0", "e").replace("e+", "e")
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 1e4 else f"{value:g}" \
        if isinstance(value, float) else str(value)


def value_range(info) -> str:
    """The field's range: bounds, lengths and caps."""
    low = high = None
    low_open = high_open = False
    lengths = []
    for c in [*_constraints(info.metadata), *_lower_bounds(info.annotation)]:
        if isinstance(c, annotated_types.Ge):
            low, low_open = c.ge, False
        elif isinstance(c, annotated_types.Gt):
            low, low_open = c.gt, True
        elif isinstance(c, annotated_types.Le):
            high, high_open = c.le, False
        elif isinstance(c, annotated_types.Lt):
            high, high_open = c.lt, True
        elif isinstance(c, annotated_types.MinLen):
            lengths.append(f"at least {c.min_length} long")
        elif isinstance(c, annotated_types.MaxLen):
            lengths.append(f"at most {c.max_length} long")
    from dse.study.schema.limits import Cap
    for m in info.metadata:
        for cell in (getattr(getattr(m, "func", None), "__closure__", None) or ()):
            if isinstance(cell.cell_contents, Cap):
                high, high_open = cell.cell_contents.limit, False
    for cap in _caps(info.annotation):
        high, high_open = cap.limit, False
    if low == 0 and low_open and info.annotation is int:
        low, low_open = 1, False              # a whole number above 0
    parts = []
    if low is not None or high is not None:
        left = ("(" if low_open else "[") + (_number(low) if low is not None else "")
        right = (_number(high) if high is not None else "") + (")" if high_open else "]")
        if low is not None and high is not None:
            parts.append(f"{left}, {right}")
        elif low is not None:
            parts.append(f"{'>' if low_open else '>='} {_number(low)}")
        else:
            parts.append(f"{'<' if high_open else '<='} {_number(high)}")
    return "; ".join(parts + lengths)


def default(info) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "none"
    if value == "":
        return "empty"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float):
        return f"`{value:.4g}`"
    return f"`{value}`" if value not in ({}, []) else f"`{value}` (empty)"


def rows(model: type[BaseModel], prefix: str = "", seen: tuple = ()) -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, range, meaning) of every key of ``model`` and the sections inside it."""
    out = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        nested = [(s, m) for s, m in _models(info.annotation) if m not in seen]
        kind = type_name(info.annotation)
        dflt = default(info)
        if "placeholders" in (model.__doc__ or "") and name not in ("name", "kind", "preset", "options"):
            dflt = "the kind's (arch)"        # ChipletSpec: only the keys written reach arch, whose defaults apply
        out.append((key, kind, dflt, value_range(info), meaning(model, name)))
        for suffix, sub in nested:
            out.extend(rows(sub, f"{key}{suffix}.", seen + (model,)))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\\\\|", "\\|") if text else ""


def page() -> str:
    """The page's Markdown: one table per top-level section."""
    from dse.study.spec import Study
    lines = [HEADER]
    groups: dict[str, list] = {}
    for row in rows(Study):
        groups.setdefault(row[0].split(".")[0].split("[")[0], []).append(row)
    for section, part in groups.items():
        lines.append(f"## `{section}`\n")
        top = Study.model_fields[section]
        if meaning(Study, section):
            lines.append(meaning(Study, section) + "\n")
        lines.append("| key | type | default | range | meaning |")
        lines.append("|---|---|---|---|---|")
        for key, kind, dflt, rng, text in part:
            lines.append(f"| `{key}` | {kind} | {dflt} | {rng} | {_cell(text)} |")
        lines.append("")
        del top
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    text = page()
    if "--check" in sys.argv:
        sys.exit(0 if PAGE.read_text() == text else 1)
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
