"""No function in lore/ runs over 80 lines unless its docstring says why (a line starting ``Long because:``).

A function that long is usually several steps that want names of their own; the few that
are one step (a table, a protocol's sequence) say so where a reader meets them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import PROJECT_ROOT

MAX_LINES = 80
REASON = "Long because:"


def long_functions(source: str, max_lines: int = MAX_LINES) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length in lines) of each function longer than ``max_lines`` whose docstring
    gives no reason (a line starting with ``REASON``); decorators count, as a reader has to read them too."""
    found: list[tuple[str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                length = (child.end_lineno or child.lineno) - first + 1
                docstring = ast.get_docstring(child) or ""
                explained = any(line.strip().startswith(REASON) for line in docstring.splitlines())
                if length > max_lines and not explained:
                    found.append((name, first, length))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return found


def _function(lines: int, docstring: str) -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f'def f() -> None:\n    """{docstring}"""\n{body}'


def test_the_check_finds_a_long_function_and_accepts_a_reason() -> None:
    assert long_functions(_function(81, "Does things.")) == [("f", 1, 81)]
    assert long_functions(_function(80, "Does things.")) == []
    assert long_functions(_function(81, "Does things.\n\n    Long because: one table.\n    ")) == []
    # A method, and a function nested in one, are found by their qualified names.
    nested = "class C:\n    def m(self) -> None:\n" + "\n".join("        " + line for line in _function(90, "x").splitlines())
    assert [name for name, _, _ in long_functions(nested)] == ["C.m", "C.m.f"]


def test_no_function_in_lore_is_long_without_a_reason() -> None:
    found = []
    for path in sorted((PROJECT_ROOT / "lore").rglob("*.py")):
        for name, line, length in long_functions(path.read_text(encoding="utf-8")):
            found.append(f"{Path(path).relative_to(PROJECT_ROOT)}:{line} {name} ({length} lines)")
    assert found == [], f"over {MAX_LINES} lines without '{REASON}' in the docstring: {found}"
