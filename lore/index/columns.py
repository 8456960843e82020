"""The records table's file: typed columns laid out for reading rows, not for parsing the whole file.

The prompt hook's cold path opens the table on every prompt and reads a few dozen of
its rows. As JSON that cost an orjson import (which brings uuid, dataclasses and
inspect with it) and a parse of every row; laid out here, a column is decoded only
when read, and a row of it without decoding the others.

Layout: ``MAGIC``, a 4-byte little-endian length, a JSON header (row count, byte
order, and each column's kind and byte ranges), then the columns' bytes. Kinds:

* ``d`` (float64), ``q`` (int64), ``B`` (bool as a byte): the numbers, viewed in place;
* ``str``: UTF-8 texts back to back, with each row's start offset (uint32 or uint64);
* ``cat``: a few distinct texts (kinds, statuses, projects): their list in the header and
  one small code per row;
* ``json``: a column that fits none of these (a number column holding text, say).

A column holding None has a ``none`` range too: one byte per row, 1 where the value is None.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, cast, overload

MAGIC = b"LORETAB2"
_NUMBER_KINDS = {"d": float, "q": int, "B": bool}
# A text column with at most this many distinct values is stored as codes (``cat``).
MAX_CATEGORIES = 255


class ColumnsError(ValueError):
    """A columns file that is not one, or whose header does not fit its bytes."""


class Column(Sequence[Any]):
    """One column's rows, decoded one at a time (``list(column)`` decodes them all at once)."""

    def __init__(self, rows: int, get: Any, every: Any) -> None:
        self._rows, self._get, self._every = rows, get, every

    def __len__(self) -> int:
        return self._rows

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self._every()[index]
        if index < 0:
            index += self._rows
        if not 0 <= index < self._rows:
            raise IndexError("column row out of range")
        return self._get(index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._every())

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*self._every(), *other]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Column({self._every()!r})"


class Categories(Column):
    """A ``cat`` column: ``values`` (its distinct texts) and each row's code into them."""

    def __init__(self, values: list[Any], codes: Any) -> None:
        self.values, self.codes = values, codes
        super().__init__(len(codes), lambda row: values[codes[row]], lambda: [values[code] for code in codes])

    def distinct(self) -> set[Any]:
        return set(self.values)

    def matching(self, accepted: set[Any]) -> Sequence[bool]:
        """Per row, whether its value is in ``accepted`` (1 or 0), without decoding a row: one ``bytes.translate``."""
        table = bytes(1 if code < len(self.values) and self.values[code] in accepted else 0 for code in range(256))
        return cast("Sequence[bool]", bytes(self.codes).translate(table))


def _encode(values: Sequence[Any], kind: str) -> tuple[dict[str, Any], list[bytes]]:
    """The column's header entry (without byte ranges) and its parts, in order."""
    nones = bytes(1 if v is None else 0 for v in values) if any(v is None for v in values) else None
    present = [v for v in values if v is not None]
    if kind == "str" and all(isinstance(v, str) for v in present):
        distinct = list(dict.fromkeys(values))
        if len(distinct) <= MAX_CATEGORIES:
            index = {value: code for code, value in enumerate(distinct)}
            return {"kind": "cat", "values": distinct}, [bytes(index[v] for v in values)]
        encoded = [b"" if v is None else v.encode() for v in values]
        starts, position = [], 0
        for text in encoded:
            starts.append(position)
            position += len(text)
        starts.append(position)
        blob = b"".join(encoded)
        code = "I" if position < 2**32 else "q"
        return {"kind": "str", "offsets": code}, [array(code, starts).tobytes(), blob, *([nones] if nones else [])]
    if kind in _NUMBER_KINDS and all(type(v) in (int, float, bool) for v in present):
        filler = False if kind == "B" else 0
        try:
            packed = array(kind, [filler if v is None else v for v in values])
        except (OverflowError, TypeError):
            packed = None
        # An array stores what it was given only if every value survives the round trip (3.0 for 3 is fine).
        if packed is not None and all(v is None or v == got or (kind == "d" and math.isnan(v) and math.isnan(got))
                                      for v, got in zip(values, packed, strict=True)):  # fmt: skip
            return {"kind": kind}, [packed.tobytes(), *([nones] if nones else [])]
    return {"kind": "json"}, [json.dumps(list(values), ensure_ascii=False, allow_nan=False).encode()]


def dump(columns: dict[str, tuple[str, Sequence[Any]]]) -> bytes:
    """The file's bytes for ``columns``: name -> (kind wanted: ``str``, ``d``, ``q`` or ``B``; values)."""
    rows = {len(values) for _, values in columns.values()}
    if len(rows) > 1:
        raise ValueError("columns of different lengths")
    chunks: list[bytes] = []
    position = 0
    described: dict[str, dict[str, Any]] = {}
    for name, (wanted, values) in columns.items():
        entry, parts = _encode(values, wanted)
        entry["parts"] = []
        for part in parts:
            entry["parts"].append([position, position + len(part)])
            chunks.append(part)
            position += len(part)
        described[name] = entry
    header = json.dumps({"rows": rows.pop() if rows else 0, "byteorder": sys.byteorder, "columns": described}).encode()
    return MAGIC + len(header).to_bytes(4, "little") + header + b"".join(chunks)


def load(data: bytes | memoryview) -> dict[str, Sequence[Any]]:
    """Every column of a file ``dump`` wrote, each decoded as it is read; ``ColumnsError`` for anything else.

    The sizes of every part are checked here; a row's bytes only when it is read
    (a text that is not UTF-8 raises ``UnicodeDecodeError`` then: a ``ValueError``).
    """
    if bytes(data[: len(MAGIC)]) != MAGIC or len(data) < len(MAGIC) + 4:
        raise ColumnsError("not a records table")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    body = len(MAGIC) + 4 + size
    try:
        header = json.loads(bytes(data[len(MAGIC) + 4 : body]))
        rows, described = int(header["rows"]), header["columns"]
        if header["byteorder"] != sys.byteorder:
            raise ColumnsError(f"written on a {header['byteorder']}-endian machine")
    except (ValueError, KeyError, TypeError) as exc:
        raise ColumnsError(f"unreadable header ({exc})") from exc
    view = memoryview(data)[body:]
    out: dict[str, Sequence[Any]] = {}
    for name, entry in described.items():
        try:
            kind, parts = entry["kind"], [view[int(lo):int(hi)] for lo, hi in entry["parts"]]
            if not all(0 <= int(lo) <= int(hi) <= len(view) for lo, hi in entry["parts"]):
                raise ColumnsError(f"column {name}: bytes beyond the file")
            out[name] = _column(name, kind, entry, parts, rows)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ColumnsError):
                raise
            raise ColumnsError(f"column {name}: unreadable entry ({exc})") from exc
    return out


def _none_mask(parts: list[memoryview], count: int, rows: int, name: str) -> memoryview | None:
    if len(parts) == count:
        return None
    if len(parts) != count + 1 or len(parts[-1]) != rows:
        raise ColumnsError(f"column {name}: None mask does not fit {rows} rows")
    return parts[-1]


def _column(name: str, kind: str, entry: dict[str, Any], parts: list[memoryview], rows: int) -> Sequence[Any]:
    if kind == "cat":
        values = list(entry["values"])
        codes = parts[0]
        if len(parts) != 1 or len(codes) != rows or (rows and max(codes) >= len(values)):
            raise ColumnsError(f"column {name}: codes do not fit {rows} rows of {len(values)} values")
        return Categories(values, codes)
    if kind == "str":
        code = entry["offsets"]
        if code not in ("I", "q") or len(parts) not in (2, 3):
            raise ColumnsError(f"column {name}: unreadable entry")
        width = array(code).itemsize
        if len(parts[0]) != (rows + 1) * width:
            raise ColumnsError(f"column {name}: {len(parts[0]) // width} offsets for {rows} rows")
        starts, blob = parts[0].cast(code), parts[1]
        if rows and (starts[0] != 0 or starts[rows] != len(blob)):
            raise ColumnsError(f"column {name}: offsets do not fit its texts")
        nones = _none_mask(parts, 2, rows, name)

        def text(row: int) -> str | None:
            if nones is not None and nones[row]:
                return None
            return bytes(blob[starts[row]:starts[row + 1]]).decode()

        def every() -> list[str | None]:
            whole = bytes(blob).decode()
            texts: list[str | None]
            if whole.isascii():
                texts = [whole[starts[i]:starts[i + 1]] for i in range(rows)]
            else:
                texts = [bytes(blob[starts[i]:starts[i + 1]]).decode() for i in range(rows)]
            return texts if nones is None else [None if flag else value for value, flag in zip(texts, nones, strict=True)]

        return Column(rows, text, _once(every))
    if kind in _NUMBER_KINDS:
        width = array(kind).itemsize
        if not parts or len(parts[0]) != rows * width:
            raise ColumnsError(f"column {name}: {len(parts[0]) if parts else 0} bytes for {rows} rows")
        numbers: Any = parts[0].cast(kind)  # type: ignore[call-overload]
        nones = _none_mask(parts, 1, rows, name)
        if kind == "B":
            return Column(rows, lambda row: None if nones is not None and nones[row] else bool(numbers[row]),
                          _once(lambda: [None if nones is not None and nones[i] else bool(v) for i, v in enumerate(numbers)]))  # fmt: skip
        if nones is None:
            return Column(rows, numbers.__getitem__, _once(numbers.tolist))
        return Column(rows, lambda row: None if nones[row] else numbers[row],
                      _once(lambda: [None if flag else value for value, flag in zip(numbers.tolist(), nones, strict=True)]))  # fmt: skip
    if kind == "json":
        values = json.loads(bytes(parts[0]))
        if not isinstance(values, list) or len(values) != rows:
            raise ColumnsError(f"column {name}: not a list of {rows} values")
        return values
    raise ColumnsError(f"unknown kind {kind!r}")


def _once(make: Any) -> Any:
    """``make``, called at most once: a column decoded whole stays decoded."""
    cache: list[Any] = []

    def get() -> Any:
        if not cache:
            cache.append(make())
        return cache[0]

    return get
