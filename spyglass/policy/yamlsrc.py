"""YAML with positions: every mapping key, value and list item keeps its line and column.

Rule files and the policy file are composed by PyYAML (libyaml when present),
and every mapping and sequence remembers where it and its children came from,
so an error can say ``file:line:col``.  Positions here are 1-based, as editors
show them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import msgspec

from spyglass.errors import SourceError

#: policy and rule files larger than this are refused (docs/rules.md, "Limits")
MAX_SOURCE_BYTES = 1 << 20
#: at most this many nodes after expanding aliases: a "billion laughs" file is refused
MAX_EXPANDED_NODES = 100_000


def decode_source(data: bytes, path: str, limit: int = MAX_SOURCE_BYTES) -> str:
    """UTF-8 text of a policy or rule file; too large or not text is a positioned error."""
    if len(data) > limit:
        raise SourceError(f"file larger than the limit of {limit} bytes", path, 1, 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _byte_pos(data, exc.start)
        raise SourceError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded", path, line, col) from None


def _byte_pos(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    line_start = before.rfind(b"\n") + 1
    col = len(before[line_start:].decode("utf-8", "replace")) + 1
    return before.count(b"\n") + 1, col


class Pos(msgspec.Struct, frozen=True):
    """A line and column in a YAML file (1-based; None when unknown)."""

    line: int | None = None
    col: int | None = None

    def __reduce__(self) -> tuple[type[Pos], tuple[int | None, int | None]]:
        # a cached rule set holds hundreds: rebuilt by the constructor, not by the slow generic
        # generic __setstate__ (a third of the time to unpickle them, when these were dataclasses)
        return Pos, (self.line, self.col)


class _Lc:
    """Where a node and its children are written (0-based, as YAML marks are)."""

    __slots__ = ("col", "items", "keys", "line", "values")

    def __init__(self, line: int, col: int) -> None:
        self.line, self.col = line, col
        self.keys: dict[Any, tuple[int, int]] = {}
        self.values: dict[Any, tuple[int, int]] = {}
        self.items: list[tuple[int, int]] = []

    def key(self, k: Any) -> tuple[int, int]:
        return self.keys[k]

    def value(self, k: Any) -> tuple[int, int]:
        return self.values[k]

    def item(self, i: int) -> tuple[int, int]:
        return self.items[i]


class PosDict(dict[Any, Any]):
    """A mapping that remembers where each key and value is written (``.lc``)."""

    lc: _Lc


class PosList(list[Any]):
    """A sequence that remembers where each item is written (``.lc``)."""

    lc: _Lc


def _mark(node: Any) -> tuple[int, int]:
    return node.start_mark.line, node.start_mark.column


class _Builder:
    """Turns composed YAML nodes into PosDict/PosList/scalars, refusing duplicate keys."""

    def __init__(self, path: str) -> None:
        import yaml

        self.path = path
        self.scalars = yaml.constructor.SafeConstructor()
        self.seen: dict[int, Any] = {}

    def build(self, node: Any) -> Any:
        import yaml

        done = self.seen.get(id(node))
        if done is not None:
            return done
        if isinstance(node, yaml.MappingNode):
            out: Any = PosDict()
            out.lc = _Lc(*_mark(node))
            self.seen[id(node)] = out
            for knode, vnode in node.value:
                key = self.build(knode)
                if isinstance(key, list | dict):
                    key = str(key)
                if key in out:
                    line, col = _mark(knode)
                    raise SourceError(f"invalid YAML: duplicate key {key!r}", self.path, line + 1, col + 1)
                out.lc.keys[key] = _mark(knode)
                out.lc.values[key] = _mark(vnode)
                out[key] = self.build(vnode)
            return out
        if isinstance(node, yaml.SequenceNode):
            seq: Any = PosList()
            seq.lc = _Lc(*_mark(node))
            self.seen[id(node)] = seq
            for item in node.value:
                seq.lc.items.append(_mark(item))
                seq.append(self.build(item))
            return seq
        if node.tag == "tag:yaml.org,2002:value":  # a plain `=` (YAML 1.1's value key) is the text "="
            return node.value
        return self.scalars.construct_object(node, deep=True)


def load_documents(text: str, path: str) -> list[Any]:
    """All YAML documents in ``text``; a syntax error becomes a SourceError with its place.

    Parsing is libyaml's (PyYAML's C composer) when available: it keeps the
    position of every node and is many times faster than a pure-Python parser.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        nodes = list(yaml.compose_all(text, Loader=loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        raise SourceError(f"invalid YAML: {what}", path, line, col) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, other controls)
        before = text[: exc.position]
        line = before.count("\n") + 1
        col = exc.position - (before.rfind("\n") + 1) + 1
        raise SourceError(f"invalid YAML: character {exc.character!r} is not allowed", path, line, col) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"invalid YAML: {' '.join(str(exc).split())}", path) from None
    builder = _Builder(path)
    out: list[Any] = []
    for node in nodes:
        if node is None:
            continue
        try:
            _check_expansion(node, path)
        except RecursionError:
            raise SourceError("invalid YAML: nested too deeply", path, 1, 1) from None
        try:
            doc = builder.build(node)
        except yaml.constructor.ConstructorError as exc:
            mark = exc.problem_mark
            raise SourceError(
                f"invalid YAML: {exc.problem}",
                path,
                mark.line + 1 if mark else None,
                mark.column + 1 if mark else None,
            ) from None
        if doc is not None:
            out.append(doc)
    return out


def _check_expansion(root: Any, path: str) -> None:
    """Refuse a document whose aliases would expand past MAX_EXPANDED_NODES, or that refers to itself.

    Counts each node as many times as aliases repeat it (memoised, so the count
    itself is linear in the composed graph), before anything walks the data."""
    import yaml

    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def fail(node: Any, why: str) -> SourceError:
        line, col = _mark(node)
        return SourceError(f"invalid YAML: {why}", path, line + 1, col + 1)

    def size(node: Any) -> int:
        key = id(node)
        got = sizes.get(key)
        if got is not None:
            return got
        if key in busy:
            raise fail(node, "an alias refers to the node that contains it")
        total = 1
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            busy.add(key)
            children = (c for kv in node.value for c in kv) if isinstance(node, yaml.MappingNode) else node.value
            for child in children:
                total += size(child)
                if total > MAX_EXPANDED_NODES:
                    raise fail(child, f"aliases expand to more than {MAX_EXPANDED_NODES} nodes (billion laughs?)")
            busy.discard(key)
        sizes[key] = total
        return total

    size(root)


def is_map(node: Any) -> bool:
    return isinstance(node, dict)


def is_seq(node: Any) -> bool:
    return isinstance(node, list)


def key_pos(node: Any, key: Any) -> Pos:
    """Where ``key`` of mapping ``node`` is written."""
    try:
        line, col = node.lc.key(key)
        return Pos(line + 1, col + 1)
    except Exception:
        return node_pos(node)


def value_pos(node: Any, key: Any) -> Pos:
    """Where the value of ``key`` in mapping ``node`` starts."""
    try:
        line, col = node.lc.value(key)
        return Pos(line + 1, col + 1)
    except Exception:
        return key_pos(node, key)


def item_pos(node: Any, index: int) -> Pos:
    try:
        line, col = node.lc.item(index)
        return Pos(line + 1, col + 1)
    except Exception:
        return node_pos(node)


def node_pos(node: Any) -> Pos:
    try:
        return Pos(node.lc.line + 1, node.lc.col + 1)
    except Exception:
        return Pos()


def child_pos(node: Any, step: Any) -> Pos:
    """Position of a child: a mapping value by key or a list item by index."""
    if is_map(node):
        return value_pos(node, step)
    if is_seq(node) and isinstance(step, int):
        return item_pos(node, step)
    return node_pos(node)


def pos_at(root: Any, path: list[Any] | tuple[Any, ...], *, as_key: bool = False) -> Pos:
    """Position of the node reached from ``root`` through ``path`` (keys and indexes)."""
    node = root
    where = node_pos(root)
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if is_map(node) and step in node:
            where = key_pos(node, step) if (last and as_key) else value_pos(node, step)
            node = node[step]
        elif is_seq(node) and isinstance(step, int) and 0 <= step < len(node):
            where = item_pos(node, step)
            node = node[step]
        else:
            break
    return where


def to_plain(node: Any) -> Any:
    """The same data as plain dicts, lists, strings, numbers and booleans."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, datetime.date | datetime.datetime):
        return node.isoformat()
    return str(node)


def error_at(message: str, path: str, where: Pos) -> SourceError:
    return SourceError(message, path, where.line, where.col)


def walk_items(node: Any) -> Iterator[tuple[int, Any]]:
    if is_seq(node):
        yield from enumerate(node)
