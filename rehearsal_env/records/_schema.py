"""The Arrow schema of the records, derived from the record dataclasses, and row conversion.

``str``/``int``/``float``/``bool`` become ``string``/``int64``/``float64``/``bool``
(nullable with ``| None``); ``tuple[X, ...]`` of a dataclass becomes
``list<struct>``, of a scalar ``list<scalar>``; a dataclass becomes a ``struct``.
Each field's docstring (the string literal under it in the class body) is the
Arrow field's ``doc`` metadata, so ``pyarrow.parquet.read_schema`` documents a
record file with no import of ``rehearsal_env``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from dataclasses import fields, is_dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

_SCALARS: dict[Any, pa.DataType] = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of a dataclass, read from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"record fields may be X or X | None, got {tp}")
        return args[0], True
    return tp, False


def arrow_type(tp: Any) -> pa.DataType:
    """The Arrow type of a record field's type (see the module docstring)."""
    tp, _ = _unwrap_optional(tp)
    if tp in _SCALARS:
        return _SCALARS[tp]
    if get_origin(tp) is tuple:
        item, ellipsis = get_args(tp)
        if ellipsis is not Ellipsis:
            raise TypeError(f"record tuples must be tuple[X, ...], got {tp}")
        inner, nullable = _unwrap_optional(item)
        return pa.list_(pa.field("item", arrow_type(inner), nullable=nullable))
    if is_dataclass(tp) and isinstance(tp, type):
        return pa.struct(arrow_fields(tp))
    raise TypeError(f"no Arrow type for record field type {tp!r}; use str, int, float, bool, a dataclass "
                    "or tuple[X, ...] of those")


def arrow_fields(cls: type) -> list[pa.Field]:
    """One documented Arrow field per dataclass field."""
    docs = field_docs(cls)
    out = []
    for f in fields(cls):
        tp = _hints(cls)[f.name]
        _, nullable = _unwrap_optional(tp)
        if f.name not in docs:
            raise TypeError(f"{cls.__name__}.{f.name} has no docstring; every record field is documented")
        out.append(pa.field(f.name, arrow_type(tp), nullable=nullable, metadata={"doc": docs[f.name]}))
    return out


def arrow_schema(cls: type, metadata: dict[str, str]) -> pa.Schema:
    """The Arrow schema of dataclass ``cls`` with schema-level ``metadata``."""
    return pa.schema(arrow_fields(cls), metadata=metadata)


def to_row(record: Any) -> dict[str, Any]:
    """A record dataclass as a plain dict for :meth:`pyarrow.Table.from_pylist`.

    Equal to :func:`dataclasses.asdict` for records (dataclasses, tuples and plain values), but
    with the field names cached per class: asdict's deep copies cost more than playing an episode.
    """
    return _plain(record)  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    cls = type(value)
    if cls in _PLAIN_TYPES:
        return value
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if cls is tuple or cls is list:
            return [v if type(v) in _PLAIN_TYPES else _plain(v) for v in value]
        if not is_dataclass(value) or isinstance(value, type):
            return value
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(value))
    out = {}
    for name in names:  # plain values inline: most of a trace's values are (one call each cost the most)
        v = getattr(value, name)
        out[name] = v if type(v) in _PLAIN_TYPES else _plain(v)
    return out


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), bytes})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def from_row(cls: type, row: dict[str, Any]) -> Any:
    """The dataclass ``cls`` back from a row read with :meth:`pyarrow.Table.to_pylist`."""
    return _build(cls, row)


def _build(tp: Any, value: Any) -> Any:
    tp, _ = _unwrap_optional(tp)
    if value is None:
        return None
    if get_origin(tp) is tuple:
        item = get_args(tp)[0]
        return tuple(_build(item, v) for v in value)
    if is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        return tp(**{f.name: _build(hints[f.name], value[f.name]) for f in fields(tp)})
    return value


def describe(cls: type, indent: str = "") -> list[str]:
    """The schema as text: one line per field (name, Arrow type, doc), nested fields indented."""
    lines = []
    for f in arrow_fields(cls):
        lines.append(f"{indent}{f.name}: {_short(f.type)}{'' if f.nullable else ' (not null)'}")
        lines.append(f"{indent}    {f.metadata[b'doc'].decode()}")
        tp, _ = _unwrap_optional(_hints(cls)[f.name])
        inner = get_args(tp)[0] if get_origin(tp) is tuple else tp
        if is_dataclass(inner) and isinstance(inner, type):
            lines += describe(inner, indent + "    ")
    return lines


def _short(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{_short(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct"
    return str(t)
