"""A small HTML builder that escapes by default: stored text is untrusted.

``tag("p", text)`` escapes ``text``; only values already wrapped in ``Markup``
(built by ``tag`` itself) pass through as they are. Control characters and ANSI
sequences are stripped from every text, as the terminal renderers do.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Union

from lore.render.text import strip_control

VOID = frozenset({"area", "br", "col", "hr", "img", "input", "link", "meta", "source", "wbr"})


class Markup(str):
    """HTML that is safe as it is (made by this module, never from stored text)."""

    __slots__ = ()


Child = Union[str, int, float, "Markup", None, Iterable["Child"]]


def esc(value: object) -> Markup:
    """``value`` as HTML text: escaped (quotes too, so it is safe in attributes) unless it is ``Markup``."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(strip_control(str(value)), quote=True))


def _attr_name(name: str) -> str:
    # class_ -> class, data_id -> data-id, stroke_width -> stroke-width; viewBox passes through a dict.
    return name.rstrip("_").replace("_", "-")


def attrs(values: dict[str, object]) -> Markup:
    parts = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        key = _attr_name(name)
        parts.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return Markup("".join(parts))


def render(children: Iterable[Child]) -> Markup:
    out: list[str] = []
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, str | int | float):
            out.append(esc(child))
        else:
            out.append(render(child))
    return Markup("".join(out))


def tag(element: str, /, *children: Child, attributes: dict[str, object] | None = None, **named: object) -> Markup:
    """``<element attrs>children</element>``; ``attributes`` carries names that are not identifiers (viewBox)."""
    opening = f"<{element}{attrs({**named, **(attributes or {})})}>"
    if element in VOID:
        return Markup(opening)
    return Markup(f"{opening}{render(children)}</{element}>")


def join(parts: Iterable[Child], separator: Child = "") -> Markup:
    items = [render([p]) for p in parts]
    return Markup(render([separator]).join(items))
