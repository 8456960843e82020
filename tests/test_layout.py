"""The package layout: lore's modules import each other in layers, without cycles, lazy imports included.

docs/architecture.md draws the layers; ``LAYERS`` below is that picture. Every import
counts, wherever it is written (module level, ``if``/``try`` bodies, inside functions):
a lazy import still runs, and still ties the module to the one it imports. Only the
imports under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "lore"

# Upstream first: a module may import its own layer and the layers before it, never a later one.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Used by every layer: errors, settings, paths, the record kinds, text analysis, the models.
    ("foundation", ("lore", "lore.errors", "lore.settings", "lore.paths", "lore.kinds", "lore.analysis",
                    "lore.scrub", "lore.project", "lore.llm", "lore.embedder")),
    ("store", ("lore.store", "lore.timeparse")),
    ("writes", ("lore.capture", "lore.curate", "lore.transfer", "lore.sync", "lore.sessions")),
    ("index", ("lore.index",)),
    ("rank", ("lore.rank", "lore.search")),
    ("render", ("lore.render", "lore.context")),
    ("surfaces", ("lore.api", "lore.cli", "lore.agent", "lore.ui", "lore.measure", "lore.__main__")),
)  # fmt: skip


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> set[str]:
    """The lore modules an import statement anywhere in ``tree`` names (``if TYPE_CHECKING:`` bodies excepted)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}

    def deepest(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        return ".".join(parts) if parts else None

    found: set[str | None] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {deepest(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import module` imports that module; `from module import name`, the module.
                # (Importing a submodule runs its package's __init__ first: that is not an edge to report.)
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else deepest(source))
    return {name for name in found if name is not None and name != module}


def import_graph() -> dict[str, set[str]]:
    """lore's modules -> the lore modules each imports, anywhere in it (lazy imports in functions included)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {module: _imported(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py", modules)
            for module, path in paths.items()}  # fmt: skip


def layer_of(module: str) -> int | None:
    """The position in ``LAYERS`` of the longest prefix naming ``module``'s layer."""
    best: tuple[int, int] | None = None
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (position, len(prefix))
    return best[0] if best else None


def arrows_back_up(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module in a later layer than the importer's, as ``importer (layer) -> imported (layer)``."""
    found = []
    for module in sorted(graph):
        here = layer_of(module)
        for target in sorted(graph[module]):
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module} ({LAYERS[here][0]}) -> {target} ({LAYERS[there][0]})")
    return found


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


def test_the_walk_sees_lazy_imports_and_the_checks_find_what_they_look_for() -> None:
    tree = ast.parse("import lore.store.store\nif TYPE_CHECKING:\n    from lore.index import reader\n"
                     "def f():\n    from lore.render import text\n    from . import capture\n")  # fmt: skip
    modules = {"lore", "lore.store", "lore.store.store", "lore.index", "lore.index.reader", "lore.render",
               "lore.render.text", "lore.curate", "lore.curate.capture", "lore.curate.inbox"}  # fmt: skip
    found = _imported(tree, "lore.curate.inbox", False, modules)
    assert found == {"lore.store.store", "lore.render.text", "lore.curate.capture"}
    assert arrows_back_up({"lore.curate.inbox": found}) == ["lore.curate.inbox (writes) -> lore.render.text (render)"]
    assert arrows_back_up({"lore.render.text": {"lore.curate.inbox", "lore.errors"}}) == []


def test_every_module_has_a_layer() -> None:
    graph = import_graph()
    assert "lore.cli.app" in graph and "lore.agent.hook" in graph  # the walk found the package
    assert [module for module in sorted(graph) if layer_of(module) is None] == []


def test_lores_modules_import_each_other_without_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_import_runs_back_up_the_layers() -> None:
    assert arrows_back_up(import_graph()) == []


# The environment is read where the work starts (lore.settings.Settings.from_env, by the surfaces), and passed
# down: no module before the surfaces reads it, but for what is no setting and no module of theirs could be given.
ENVIRONMENT_READERS = {
    "lore.settings": "Settings.from_env: the one place",
    "lore.sync.driver": "LORE_MERGE_NOTES: set by lore sync for the merge driver git starts as a process of its own",
}


def environment_reads(tree: ast.AST) -> list[int]:
    """Lines that read a variable: ``os.environ.get/pop/setdefault``, ``os.environ[...]``, ``... in os.environ``,
    ``os.getenv``, ``Settings.from_env()``. Passing the environment on to a child (``{**os.environ, ...}``) is no read."""
    def environ(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    def reads(node: ast.AST) -> bool:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in ("getenv", "from_env") or (node.func.attr in ("get", "pop", "setdefault")
                                                                 and environ(node.func.value))  # fmt: skip
        if isinstance(node, ast.Subscript):
            return environ(node.value)
        return isinstance(node, ast.Compare) and any(environ(c) for c in node.comparators)

    return [node.lineno for node in ast.walk(tree) if reads(node)]  # type: ignore[attr-defined]


def test_only_the_surfaces_read_the_environment() -> None:
    surfaces = len(LAYERS) - 1
    assert environment_reads(ast.parse("import os\nos.environ.get('A')\nenv = {**os.environ}\nos.getenv('B')\n"
                                       "Settings.from_env()")) == [2, 4, 5]  # fmt: skip
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        layer = layer_of(module)
        if layer is not None and layer < surfaces and module not in ENVIRONMENT_READERS:
            readers += [f"{module}:{line}" for line in environment_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert readers == []


def test_rendering_reads_hits_never_the_index() -> None:
    graph = import_graph()
    assert [f"{module} -> {target}" for module in sorted(graph) if module.startswith("lore.render.") or module == "lore.context"
            for target in sorted(graph[module]) if target.startswith("lore.index")] == []  # fmt: skip


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
    assert "lore.agent.hook" not in graph["lore.agent.session"]  # the hook uses the session module, not back
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
