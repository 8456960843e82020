"""The package layout: module-level imports among lore's modules form no cycle, and the agent surfaces import one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "lore"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(statements: list[ast.stmt], module: str, is_package: bool) -> set[str]:
    """Names imported when the module runs: its top level, ``if``/``try`` bodies, not functions nor TYPE_CHECKING."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found |= _imported(node.body + node.orelse, module, is_package)
        elif isinstance(node, ast.Try):
            bodies = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
            found |= _imported(bodies, module, is_package)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            found |= {f"{source}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return found


def import_graph() -> dict[str, set[str]]:
    """lore's modules -> the lore modules each imports at module level (lazy imports in functions excluded)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        names = _imported(ast.parse(path.read_text(encoding="utf-8")).body, module, path.name == "__init__.py")
        targets = set()
        for name in names:
            parts = name.split(".")
            while parts and ".".join(parts) not in paths:
                parts.pop()
            if parts:
                targets.add(".".join(parts))
        targets.discard(module)
        # Importing a submodule runs its package's __init__ first: that is not an edge to report.
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_lores_modules_import_each_other_without_cycles() -> None:
    graph = import_graph()
    assert "lore.cli.app" in graph and "lore.agent.hook" in graph  # the walk found the package
    assert cycles(graph) == []


def every_import(module: str) -> set[str]:
    """Every module ``module`` imports anywhere, lazy imports inside functions included."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_the_agent_surfaces_import_one_way() -> None:
    # Not even lazily: the hook and the helper used to import each other inside functions.
    # The helper's client (the hooks' side) knows nothing of the daemon, the hook or the MCP server.
    assert not {m for m in every_import("lore.agent.client") if m.startswith("lore.agent")}
    assert not {m for m in every_import("lore.agent.daemon") if m.startswith("lore.agent.hook")}
    assert not {m for m in every_import("lore.agent.hook") if m.startswith("lore.agent.daemon")}
    assert not {m for m in every_import("lore.agent.prompt") if m.startswith("lore.agent")}
    graph = import_graph()
    assert {"lore.agent.client", "lore.agent.prompt"} <= graph["lore.agent.daemon"]
    # The command modules register on lore.cli.base; only lore.cli.app imports them.
    for module, targets in graph.items():
        if module.startswith("lore.cli.cmd_"):
            assert "lore.cli.app" not in targets, module


def test_the_prompt_hook_module_imports_only_the_standard_library_its_package_and_the_settings() -> None:
    code = "import sys, lore.agent.hook\nprint(','.join(sorted(n for n in sys.modules if n.startswith('lore'))))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert set(out.stdout.strip().split(",")) == {"lore", "lore.agent", "lore.agent.hook", "lore.agent.log",
                                                  "lore.agent.prompt", "lore.errors", "lore.settings"}  # fmt: skip
    # ... and no dataclasses (~14 ms here): lore.settings.Settings is a NamedTuple for that reason.
    code = "import sys, lore.agent.hook\nprint('dataclasses' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert out.stdout.strip() == "False"
