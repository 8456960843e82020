"""Tolerant readers: every malformed line or item becomes a located warning, never a crash.

Each reader returns what it could read plus ``complete``: whether the whole file
parsed. Writers refuse to rewrite a file that is not complete.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.errors import format_location

if TYPE_CHECKING:
    from lore.store.records import Record


@dataclass(frozen=True)
class LoadWarning:
    path: Path
    line: int | None
    message: str
    field: str | None = None

    def __str__(self) -> str:
        return format_location(self.path, self.line, self.field) + self.message


@dataclass
class FileRead:
    path: Path
    items: list[tuple[int | None, dict[str, Any]]] = field(default_factory=list)
    warnings: list[LoadWarning] = field(default_factory=list)
    complete: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def warn(self, line: int | None, message: str, field_name: str | None = None) -> None:
        self.warnings.append(LoadWarning(self.path, line, message, field_name))
        self.complete = False


def read_bytes(path: Path, result: FileRead) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        result.warn(None, f"cannot read: {exc.strerror or exc}")
        return None
    return data


def read_jsonl(path: Path) -> FileRead:
    """One JSON object per line; blank lines are fine, bad lines are reported by number."""
    result = FileRead(path)
    return parse_jsonl(result, read_bytes(path, result))


def parse_jsonl(result: FileRead, data: bytes | None) -> FileRead:
    """``read_jsonl`` of the bytes ``data`` already read from ``result.path``."""
    if not data:
        return result
    if b"\x00" in data[:8192] and not data.lstrip().startswith(b"{"):
        result.warn(None, "looks like a binary file, not JSON Lines")
        return result
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        stripped = raw_line.strip()
        if not stripped:
            continue
        try:
            stripped.decode("utf-8")
        except UnicodeDecodeError as exc:
            result.warn(number, f"not valid UTF-8 (byte {exc.start})")
            continue
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError as exc:
            result.warn(number, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(value, dict):
            result.warn(number, f"expected a JSON object, found {type(value).__name__}")
            continue
        result.items.append((number, value))
    return result


def appended_records(path: Path, kind: str, data: bytes, start: int) -> list[tuple[int, int, Record]] | None:
    """The records of the lines of ``data`` after byte ``start``, each with its line's byte range; None if any
    line is not a clean record.

    Admits a record exactly as ``Store.load`` does (an id, and the fields that carry its text);
    a line it would warn about returns None, and the caller (the index's delta segment, the
    write check's pool) reads the whole store instead. No line numbers: counting the prefix's
    newlines cost 8 ms at 10k records (40 ms at 50k), and ``Record.line`` stays None, "unknown".
    """
    from lore.store.records import Record
    from lore.store.validate import check_record

    records: list[tuple[int, int, Record]] = []
    position = start
    for line in bytes(memoryview(data)[start:]).split(b"\n"):
        begin, position = position, position + len(line) + 1
        stripped = line.strip()
        if not stripped:
            continue
        try:
            raw = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(raw, dict):
            return None
        record_id = raw.get("id")
        if not isinstance(record_id, str) or not record_id.strip() or check_record(kind, raw):
            return None
        records.append((begin, begin + len(line), Record(kind=kind, id=record_id, raw=raw, source=path)))
    return records


def read_json(path: Path) -> FileRead:
    """A single JSON document (session files, graph.json)."""
    result = FileRead(path)
    data = read_bytes(path, result)
    if data is None:
        return result
    if not data.strip():
        result.warn(None, "file is empty")
        return result
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        result.warn(line, f"not valid UTF-8 (byte {exc.start})")
        return result
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        result.warn(exc.lineno, f"invalid JSON: {exc.msg} at column {exc.colno}")
        return result
    if not isinstance(value, dict):
        result.warn(1, f"expected a JSON object, found {type(value).__name__}")
        return result
    result.items.append((1, value))
    return result


def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlSyntaxError(ValueError):
    """Text that is not valid YAML (the message says where)."""


def parse_yaml(text: str) -> Any:
    """One YAML document, with the C loader when PyYAML has it (lore sync's merge driver uses this)."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc)) from exc


_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*):")
_HEADER_COMMENT = re.compile(r"\A((?:[ \t]*#.*\n|[ \t]*\n)*)")


# The last parse of each patterns file, by its bytes: a write reads patterns.yaml three times (the
# duplicate check, the id check, the append), and a warm helper reads it again on the next write;
# each parse took 22 ms at 72 patterns (PyYAML builds the objects in Python even with the C parser).
_PARSED: dict[tuple[Path, tuple[str, ...]], tuple[bytes, FileRead]] = {}
_PARSED_FILES = 8


def read_patterns_yaml(path: Path, sections: tuple[str, ...] = ("patterns", "anti_patterns")) -> FileRead:
    """Read ``patterns.yaml``; ``items`` are ``(line, {"__section__": name, ...item})``.

    A YAML syntax error does not hide the other items: the file is then split
    into its top-level list items and each is parsed on its own.
    """
    result = FileRead(path)
    data = read_bytes(path, result)
    if data is None:
        return result
    return patterns_from_bytes(path, data, sections)


def patterns_from_bytes(path: Path, data: bytes, sections: tuple[str, ...] = ("patterns", "anti_patterns")) -> FileRead:
    """``read_patterns_yaml`` of ``data``, as if read from ``path``: parsed again only when the bytes differ from the
    last ones parsed for it (a copy each time: callers edit what they get)."""
    import copy

    key = (path, sections)
    found = _PARSED.get(key)
    if found is not None and found[0] == data:
        return copy.deepcopy(found[1])
    result = _parse_patterns(FileRead(path), data, sections)
    if len(_PARSED) >= _PARSED_FILES:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[key] = (data, copy.deepcopy(result))
    return result


def _parse_patterns(result: FileRead, data: bytes, sections: tuple[str, ...]) -> FileRead:
    import yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        result.warn(line, f"not valid UTF-8 (byte {exc.start})")
        return result
    if "\x00" in text:
        result.warn(None, "looks like a binary file, not YAML")
        return result
    header = _HEADER_COMMENT.match(text)
    result.extra["header"] = header.group(1) if header else ""
    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        document = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        error_line: int | None = mark.line + 1 if mark is not None else None
        result.warn(error_line, f"invalid YAML: {getattr(exc, 'problem', None) or exc}")
        _salvage_yaml_items(text, sections, result)
        return result
    finally:
        loader.dispose()
    if document is None:
        return result
    if not isinstance(document, dict):
        result.warn(1, f"expected a mapping with {' and '.join(sections)}, found {type(document).__name__}")
        return result
    result.extra["document"] = document
    result.extra["text"] = text
    item_lines: dict[str, list[int]] = {}
    # Where each non-empty block list ends, and the column of its items: ``Store`` appends an item
    # there instead of re-emitting the whole file (``patterns_append``).
    ends: dict[str, tuple[int, int]] = {}
    for key_node, value_node in node.value:
        if key_node.value in sections and hasattr(value_node, "value") and isinstance(value_node.value, list):
            item_lines[key_node.value] = [item.start_mark.line + 1 for item in value_node.value]
            if value_node.value and not value_node.flow_style:
                ends[key_node.value] = (_end_of_line(text, _last_value_end(value_node)), value_node.start_mark.column)
    result.extra["list_ends"] = ends
    for section in sections:
        items = document.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            result.warn(None, f"expected a list, found {type(items).__name__}", section)
            continue
        lines = item_lines.get(section, [])
        for index, item in enumerate(items):
            item_line: int | None = lines[index] if index < len(lines) else None
            if not isinstance(item, dict):
                result.warn(item_line, f"{section} item {index + 1}: expected a mapping, found {type(item).__name__}")
                continue
            result.items.append((item_line, {"__section__": section, **item}))
    return result


def _last_value_end(node: Any) -> int:
    """Where the last value written inside ``node`` ends: a block collection's own end lies past the blank lines
    and comments after it (the next key's)."""
    import yaml

    while isinstance(node, yaml.CollectionNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last  # a mapping's (key, value) pairs
    return int(node.end_mark.index)


def _end_of_line(text: str, index: int) -> int:
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _salvage_yaml_items(text: str, sections: tuple[str, ...], result: FileRead) -> None:
    import yaml

    lines = text.split("\n")
    section: str | None = None
    chunks: list[tuple[str, int, list[str]]] = []
    item_indent: int | None = None
    for number, line in enumerate(lines, start=1):
        top = _TOP_KEY.match(line)
        if top:
            section = top.group(1) if top.group(1) in sections else None
            item_indent = None
            continue
        if section is None:
            continue
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if stripped.startswith("- ") or stripped == "-":
            if item_indent is None:
                item_indent = indent
            if indent == item_indent:
                chunks.append((section, number, [line]))
                continue
        if chunks and chunks[-1][0] == section:
            chunks[-1][2].append(line)
    loader_cls = _yaml_loader()
    for section_name, number, chunk in chunks:
        try:
            value = yaml.load("\n".join(chunk), Loader=loader_cls)
        except yaml.YAMLError:
            continue  # the error was already reported at its own line
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            result.items.append((number, {"__section__": section_name, **value[0]}))
