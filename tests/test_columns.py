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
    loaded = columns.load(columns.dump(written))
    assert list(loaded) == list(written)
    for name, (kind, values) in written.items():
        expected = [float(v) if kind == "d" and v is not None else v for v in values]
        assert same(loaded[name], expected), name


def test_a_text_holding_the_separator_is_kept_whole() -> None:
    loaded = columns.load(columns.dump({"tags": ("str", ["a\x00b", "", None])}))
    assert loaded["tags"] == ["a\x00b", "", None]


def test_a_number_column_holding_text_is_kept_as_written() -> None:
    loaded = columns.load(columns.dump({"importance": ("q", [3, "high", 2.5])}))
    assert loaded["importance"] == [3, "high", 2.5]


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b"junk" + b[4:], "not a records table"),
        (lambda b: b[:12], "unreadable header"),
        (lambda b: b[:-3], "beyond the file"),
        (lambda b: b.replace(b'"kind": "q"', b'"kind": "z"'), "unknown kind"),
        (lambda b: b.replace(b'"rows": 3', b'"rows": 4'), "for 4 rows"),
    ],
)
def test_a_damaged_file_is_an_error_naming_what_is_wrong(damage: Any, reason: str) -> None:
    good = columns.dump({"ids": ("str", ["a", "b", "c"]), "importance": ("q", [1, 2, 3])})
    with pytest.raises(columns.ColumnsError, match=reason):
        columns.load(damage(good))


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        columns.dump({"a": ("str", ["x"]), "b": ("q", [1, 2])})
