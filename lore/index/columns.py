"""The records table's file: typed columns laid out for one read, no JSON parse of the rows.

The prompt hook's cold path reads the table on every prompt. As JSON it cost an
orjson import (which brings uuid, dataclasses and inspect with it) and a parse of
every row; laid out here, each number column is one ``array`` view and each text
column one ``split`` of a UTF-8 run, read with the standard library alone.

Layout: ``MAGIC``, a 4-byte little-endian length, a JSON header (row count, byte
order, and each column's kind and byte range), then the columns' bytes. Kinds:
``d`` (float64), ``q`` (int64), ``B`` (bool as one byte), ``str`` (values joined by
NUL), ``json`` (a column that fits none of these, e.g. a text holding a NUL). A
column holding None has a ``none`` range too: one byte per row, 1 where the value is None.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections.abc import Sequence
from typing import Any

MAGIC = b"LORETAB1"
_SEPARATOR = "\x00"
_NUMBER_KINDS = {"d": float, "q": int, "B": bool}


class ColumnsError(ValueError):
    """A columns file that is not one, or whose header does not fit its bytes."""


def _encode(values: Sequence[Any], kind: str) -> tuple[str, bytes, bytes | None]:
    """The column's kind as stored, its bytes, and its None mask (None when no value is None)."""
    nones = bytes(1 if v is None else 0 for v in values) if any(v is None for v in values) else None
    present = [v for v in values if v is not None]
    if kind == "str" and all(isinstance(v, str) and _SEPARATOR not in v for v in present):
        return "str", _SEPARATOR.join("" if v is None else v for v in values).encode(), nones
    if kind in _NUMBER_KINDS and all(type(v) in (int, float, bool) for v in present):
        filler = False if kind == "B" else 0
        try:
            packed = array(kind, [filler if v is None else v for v in values])
        except (OverflowError, TypeError):
            packed = None
        # An array stores what it was given only if every value survives the round trip (3.0 for 3 is fine).
        if packed is not None and all(v is None or v == got or (kind == "d" and math.isnan(v) and math.isnan(got))
                                      for v, got in zip(values, packed, strict=True)):  # fmt: skip
            return kind, packed.tobytes(), nones
    return "json", json.dumps(list(values), ensure_ascii=False, allow_nan=False).encode(), None


def dump(columns: dict[str, tuple[str, Sequence[Any]]]) -> bytes:
    """The file's bytes for ``columns``: name -> (kind wanted: ``str``, ``d``, ``q`` or ``B``; values)."""
    rows = {len(values) for _, values in columns.values()}
    if len(rows) > 1:
        raise ValueError("columns of different lengths")
    chunks: list[bytes] = []
    position = 0
    described: dict[str, dict[str, Any]] = {}
    for name, (wanted, values) in columns.items():
        kind, data, nones = _encode(values, wanted)
        entry: dict[str, Any] = {"kind": kind, "start": position, "end": position + len(data)}
        chunks.append(data)
        position += len(data)
        if nones is not None:
            entry["none"] = [position, position + len(nones)]
            chunks.append(nones)
            position += len(nones)
        described[name] = entry
    header = json.dumps({"rows": rows.pop() if rows else 0, "byteorder": sys.byteorder, "columns": described}).encode()
    return MAGIC + len(header).to_bytes(4, "little") + header + b"".join(chunks)


def load(data: bytes) -> dict[str, list[Any]]:
    """Every column of a file ``dump`` wrote, as lists; ``ColumnsError`` for anything else."""
    if data[: len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 4:
        raise ColumnsError("not a records table")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    body = len(MAGIC) + 4 + size
    try:
        header = json.loads(data[len(MAGIC) + 4 : body])
        rows, described = int(header["rows"]), header["columns"]
        if header["byteorder"] != sys.byteorder:
            raise ColumnsError(f"written on a {header['byteorder']}-endian machine")
    except (ValueError, KeyError, TypeError) as exc:
        raise ColumnsError(f"unreadable header ({exc})") from exc
    view = memoryview(data)[body:]
    out: dict[str, list[Any]] = {}
    for name, entry in described.items():
        try:
            kind, start, end = entry["kind"], int(entry["start"]), int(entry["end"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ColumnsError(f"column {name}: unreadable entry") from exc
        if not 0 <= start <= end <= len(view):
            raise ColumnsError(f"column {name}: bytes {start}-{end} beyond the file")
        chunk = view[start:end]
        if kind == "str":
            values: list[Any] = bytes(chunk).decode().split(_SEPARATOR) if rows else []
        elif kind in _NUMBER_KINDS:
            width = array(kind).itemsize
            if len(chunk) != rows * width:
                raise ColumnsError(f"column {name}: {len(chunk)} bytes for {rows} rows")
            values = chunk.cast(kind).tolist() if rows else []
            if kind == "B":
                values = [bool(v) for v in values]
        elif kind == "json":
            values = json.loads(bytes(chunk))
            if not isinstance(values, list):
                raise ColumnsError(f"column {name}: not a list")
        else:
            raise ColumnsError(f"column {name}: unknown kind {kind!r}")
        if len(values) != rows:
            raise ColumnsError(f"column {name}: {len(values)} values for {rows} rows")
        if "none" in entry:
            lo, hi = entry["none"]
            if not 0 <= lo <= hi <= len(view) or hi - lo != rows:
                raise ColumnsError(f"column {name}: None mask beyond the file")
            values = [None if flag else value for value, flag in zip(values, view[lo:hi], strict=True)]
        out[name] = values
    return out
