"""The records table's columns file (``lore.index.columns``): exact round trips, and a clear error for anything else."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lore.index import columns

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) or (x == y and type(x) is type(y))
        for x, y in zip(a, b, strict=True)
    )


@given(st.data())
def test_every_column_comes_back_as_it_was_written(data: st.DataObject) -> None:
    rows = data.draw(st.integers(0, 30))

    def column(values: st.SearchStrategy[Any]) -> list[Any]:
        return data.draw(st.lists(values, min_size=rows, max_size=rows))

    written = {
        "ids": ("str", column(texts)),
        "projects": ("str", column(st.none() | texts)),
        "times": ("d", column(st.none() | st.floats(allow_nan=False, allow_infinity=False))),
        "confidence": ("d", column(st.floats(allow_nan=False))),
        "importance": ("q", column(st.integers(-(2**63), 2**63 - 1))),
        "pinned": ("B", column(st.booleans())),
        "odd": ("q", column(st.integers(-(2**70), 2**70) | st.none())),  # beyond int64: kept, as JSON
    }
    as_codes = columns.load(columns.dump(written))
    saved, columns.MAX_CATEGORIES = columns.MAX_CATEGORIES, 0  # every text column as texts with offsets
    try:
        as_texts = columns.load(columns.dump(written))
    finally:
        columns.MAX_CATEGORIES = saved
    for loaded in (as_codes, as_texts):
        check(loaded, written, rows)


def check(loaded: dict[str, Any], written: dict[str, tuple[str, list[Any]]], rows: int) -> None:
    assert list(loaded) == list(written)
    for name, (kind, values) in written.items():
        expected = [float(v) if kind == "d" and v is not None else v for v in values]
        assert same(list(loaded[name]), expected), name  # the column whole
        assert same([loaded[name][row] for row in range(rows)], expected), name  # row by row, undecoded neighbours
        assert len(loaded[name]) == rows


def test_few_distinct_texts_are_codes_and_a_mask_answers_without_decoding() -> None:
    statuses = ["active", "superseded", "active", "candidate", None] * 3
    loaded = columns.load(columns.dump({"statuses": ("str", statuses), "ids": ("str", [f"r{i}é" for i in range(15)])}))
    column = loaded["statuses"]
    assert isinstance(column, columns.Categories) and column.distinct() == {"active", "superseded", "candidate", None}
    assert list(column.matching({"active", "candidate"})) == [s in ("active", "candidate") for s in statuses]
    assert column.matching({"active"})[2] and not column.matching({"active"})[1] and column[-1] is None
    many = [f"id-{i}-ü" for i in range(400)]  # more distinct values than codes: texts with offsets
    loaded = columns.load(columns.dump({"ids": ("str", many)}))
    assert not isinstance(loaded["ids"], columns.Categories)
    assert loaded["ids"][399] == "id-399-ü" and loaded["ids"][-1] == "id-399-ü" and loaded["ids"][10:12] == many[10:12]
    assert list(loaded["ids"]) == many and loaded["ids"] + ["x"] == [*many, "x"]
    with pytest.raises(IndexError):
        loaded["ids"][400]


def test_a_text_holding_a_nul_is_kept_whole() -> None:
    many = [f"a\x00b{i}" for i in range(300)] + ["", None]
    loaded = columns.load(columns.dump({"tags": ("str", many)}))
    assert list(loaded["tags"]) == many and loaded["tags"][0] == "a\x00b0"


def test_a_number_column_holding_text_is_kept_as_written() -> None:
    loaded = columns.load(columns.dump({"importance": ("q", [3, "high", 2.5])}))
    assert list(loaded["importance"]) == [3, "high", 2.5]


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b"junk" + b[4:], "not a records table"),
        (lambda b: b[:12], "unreadable header"),
        (lambda b: b[:-3], "beyond the file"),
        (lambda b: b.replace(b'"kind": "q"', b'"kind": "z"'), "unknown kind"),
        (lambda b: b.replace(b'"rows": 3', b'"rows": 4'), "4 rows"),
    ],
)
def test_a_damaged_file_is_an_error_naming_what_is_wrong(damage: Any, reason: str) -> None:
    good = columns.dump({"ids": ("str", ["a", "b", "c"]), "importance": ("q", [1, 2, 3])})
    with pytest.raises(columns.ColumnsError, match=reason):
        columns.load(damage(good))


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        columns.dump({"a": ("str", ["x"]), "b": ("q", [1, 2])})
