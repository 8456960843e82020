"""The layout: lore's modules (and the benchmarks beside them) import each other in layers, without cycles.

docs/architecture.md draws the layers; ``LAYERS`` below is that picture. Every import
counts, wherever it is written (module level, ``if``/``try`` bodies, inside functions):
a lazy import still runs, and still ties the module to the one it imports. So do imports
made by string: ``lazy_module("lore.capture")``, ``importlib.import_module(...)``, and a
string naming a module exactly (the tables ``lore/__init__.py`` and ``lore/api.py`` resolve
their names from). Imports under ``if TYPE_CHECKING:`` never run, so they place no module
in a layer, but they count for cycles: a cycle through a type-only import is still two
modules that cannot be understood apart.

Each rule has a self-test: a small synthetic graph that breaks it, which the rule must catch.
"""

from __future__ import annotations

import ast
import functools
import itertools
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "lore"
# The walk covers the package and what stands beside it in the repository (in no wheel): the benchmark
# harness, the scripts and the end-to-end runs of real agent CLIs.
SOURCES = (PACKAGE, PROJECT_ROOT / "benchmarks", PROJECT_ROOT / "scripts", PROJECT_ROOT / "e2e")

Layers = Sequence[tuple[str, Sequence[str]]]

# Upstream first: a module may import its own layer and the layers before it, never a later one.
# An entry is a module, or a package and every module in it ("lore.store.*"). Every module
# matches exactly one entry: no gaps and no catch-all ("lore.*" would match them all).
LAYERS: Layers = (
    # Used by every layer: errors, settings, paths, the record kinds, text analysis, the models.
    ("foundation", ("lore.version", "lore.errors", "lore.settings", "lore.paths", "lore.kinds", "lore.analysis",
                    "lore.scrub", "lore.project", "lore.llm", "lore.embedder", "lore.interpreter")),
    ("store", ("lore.store.*", "lore.timeparse")),
    # lore/curate/'s write-time checks, which capture runs on every write; the rest of curate writes through capture.
    ("write checks", ("lore.curate.similarity", "lore.curate.dedup", "lore.curate.pool", "lore.curate.text_vectors",
                      "lore.curate.write_check", "lore.curate.reliability")),
    ("capture", ("lore.capture",)),
    ("curate", ("lore.curate", "lore.curate.consolidate", "lore.curate.distill", "lore.curate.inbox",
                "lore.curate.lessons", "lore.curate.migrate", "lore.curate.reflect")),
    ("exchange", ("lore.transfer", "lore.sync.*", "lore.sessions.*")),
    ("index", ("lore.index.*",)),
    ("rank", ("lore.rank.*",)),
    ("search", ("lore.search",)),
    ("render", ("lore.render.*", "lore.context")),
    # The surfaces, one layer each: the agent never imports the CLI (the CLI runs and installs the agent's parts).
    ("library API", ("lore", "lore.api")),
    ("agent", ("lore.agent.*",)),
    ("ui", ("lore.ui.*",)),
    ("bench", ("lore.measure",)),
    ("cli", ("lore.cli.*",)),
    ("entry", ("lore.__main__",)),
    ("benchmarks", ("benchmarks.*",)),
    ("tools", ("scripts.*", "e2e.*")),
)  # fmt: skip

# Arrows running back up that stay, each with its reason (at most two).
BACK_ARROWS: dict[str, str] = {}
MAX_BACK_ARROWS = 2


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


# Calls that import the module their string argument names.
STRING_IMPORTERS = frozenset({"lazy_module", "import_module", "__import__"})


def _imported(tree: ast.AST, module: str, is_package: bool, modules: set[str], *, type_checking: bool = False,
              script_dir: str | None = None) -> set[str]:  # fmt: skip
    """The modules an import anywhere in ``tree`` names, imports by string included (``if TYPE_CHECKING:``
    bodies only if ``type_checking``). ``script_dir``: the module is a script run from that directory (no
    package), so ``import common`` there is its sibling ``<script_dir>.common``."""
    skipped: set[int] = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                skipped |= {id(inner) for statement in node.body for inner in ast.walk(statement)}

    def deepest(name: str) -> str | None:
        if script_dir and name.split(".")[0] not in {m.split(".")[0] for m in modules}:
            name = f"{script_dir}.{name}"
        parts = name.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        return ".".join(parts) if parts else None

    # `python -m lore.x` in a child's command line starts a process; it imports nothing here.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call | ast.List | ast.Tuple):
            items = node.args if isinstance(node, ast.Call) else node.elts
            for flag, value in itertools.pairwise(items):
                if isinstance(flag, ast.Constant) and flag.value == "-m":
                    skipped.add(id(value))

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
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in STRING_IMPORTERS and isinstance(node.args[0].value, str):
                found.add(deepest(node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value and node.value in modules:
            # A table of names importlib resolves later (lore/__init__.py, lore/api.py). Dotted only: "lore"
            # alone is the app's name far more often (`python -m lore`, a default actor) than an import.
            found.add(node.value)
    return {name for name in found if name is not None and name != module}


@functools.cache
def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    """Every module of lore and the benchmarks -> the modules of either it imports, anywhere in it."""
    paths = {_module_name(path): path for source in SOURCES for path in source.rglob("*.py")}
    modules = set(paths)

    def script_dir(path: Path) -> str | None:  # scripts/ and e2e/ are directories of scripts, not packages
        return None if (path.parent / "__init__.py").exists() else _module_name(path.parent / "__init__.py")

    return {module: _imported(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py", modules,
                              type_checking=type_checking, script_dir=script_dir(path))
            for module, path in paths.items()}  # fmt: skip


def _matches(entry: str, module: str) -> bool:
    if entry.endswith(".*"):
        package = entry[:-2]
        return module == package or module.startswith(package + ".")
    return module == entry


def entries_of(module: str, layers: Layers = LAYERS) -> list[tuple[int, str]]:
    """Every (layer position, entry) that matches ``module``: exactly one, for a module that is placed."""
    return [(position, entry) for position, (_, entries) in enumerate(layers) for entry in entries if _matches(entry, module)]


def placement_faults(modules: Iterable[str], layers: Layers = LAYERS) -> list[str]:
    """Modules no entry places, or that more than one does (a catch-all entry overlaps everything)."""
    faults = []
    for module in sorted(modules):
        found = entries_of(module, layers)
        if len(found) != 1:
            faults.append(f"{module}: " + (", ".join(entry for _, entry in found) if found else "no layer"))
    return faults


def layer_of(module: str, layers: Layers = LAYERS) -> int | None:
    found = entries_of(module, layers)
    return found[0][0] if len(found) == 1 else None


def arrows_back_up(graph: Mapping[str, Iterable[str]], layers: Layers = LAYERS) -> list[str]:
    """Every import of a module in a later layer than the importer's, as ``importer -> imported``."""
    found = []
    for module in sorted(graph):
        here = layer_of(module, layers)
        for target in sorted(graph[module]):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                found.append(f"{module} -> {target}")
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
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


def imports_between(graph: Mapping[str, Iterable[str]], source: str, target: str) -> list[str]:
    """The imports of a module under entry ``source`` of one under entry ``target`` (entries as in ``LAYERS``)."""
    return [f"{module} -> {other}" for module in sorted(graph) if _matches(source, module)
            for other in sorted(graph[module]) if _matches(target, other)]  # fmt: skip


# -- the rules' self-tests: each rule, fed a small graph that breaks it, fails -------------
TOY_LAYERS: Layers = (("base", ("app.errors",)), ("core", ("app.core.*",)), ("top", ("app.cli.*", "app")))


def test_a_catch_all_entry_and_an_unplaced_module_are_faults() -> None:
    modules = {"app", "app.errors", "app.core.db", "app.cli.main"}
    assert placement_faults(modules, TOY_LAYERS) == []
    catch_all = (("base", ("app.*",)), *TOY_LAYERS[1:])
    assert placement_faults(modules, catch_all) == ["app: app.*, app", "app.cli.main: app.*, app.cli.*",
                                                    "app.core.db: app.*, app.core.*"]  # fmt: skip
    assert placement_faults({*modules, "app.new"}, TOY_LAYERS) == ["app.new: no layer"]
    assert "lore.*" not in [entry for _, entries in LAYERS for entry in entries]


def test_an_arrow_back_up_is_found_and_only_the_allowlist_may_stay() -> None:
    graph = {"app.core.db": {"app.errors", "app.cli.main"}, "app.cli.main": {"app.core.db"}}
    assert arrows_back_up(graph, TOY_LAYERS) == ["app.core.db -> app.cli.main"]
    assert arrows_back_up({"app.cli.main": {"app.core.db", "app"}}, TOY_LAYERS) == []
    assert unexplained_back_arrows(["a -> b", "c -> d"], {"a -> b": "why"}) == ["c -> d"]
    assert unexplained_back_arrows(["a -> b"], {"a -> b": "why", "e -> f": "gone"}) == ["e -> f (allowed, not found)"]


def test_the_cycle_finder_finds_a_cycle_through_a_type_checking_import() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    pipeline = ast.parse("from app.core import retrieval\n")
    retrieval = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.core.pipeline import Options\n")
    modules = {"app", "app.core", "app.core.pipeline", "app.core.retrieval"}
    runtime = {"app.core.pipeline": _imported(pipeline, "app.core.pipeline", False, modules),
               "app.core.retrieval": _imported(retrieval, "app.core.retrieval", False, modules)}
    assert cycles(runtime) == []  # what runs has no cycle...
    typed = {"app.core.pipeline": _imported(pipeline, "app.core.pipeline", False, modules, type_checking=True),
             "app.core.retrieval": _imported(retrieval, "app.core.retrieval", False, modules, type_checking=True)}
    assert cycles(typed) == [["app.core.pipeline", "app.core.retrieval"]]  # ...the types do


def test_the_walk_sees_lazy_imports_and_imports_by_string() -> None:
    tree = ast.parse("import lore.store.store\nif TYPE_CHECKING:\n    from lore.index import reader\n"
                     "def f():\n    from lore.render import text\n    from . import capture\n"
                     "    engine = lazy_module('lore.sync.engine')\n    importlib.import_module('lore.api')\n"
                     "HOMES = {'Lore': 'lore.ui.server', 'doc': 'see lore.index for more'}\nAPP = 'lore'\n"
                     "CHILD = python_argv('-m', 'lore.index.reader')\n")  # fmt: skip
    modules = {"lore", "lore.store", "lore.store.store", "lore.index", "lore.index.reader", "lore.render",
               "lore.render.text", "lore.curate", "lore.curate.capture", "lore.curate.inbox", "lore.sync",
               "lore.sync.engine", "lore.api", "lore.ui", "lore.ui.server"}  # fmt: skip
    found = _imported(tree, "lore.curate.inbox", False, modules)
    assert found == {"lore.store.store", "lore.render.text", "lore.curate.capture", "lore.sync.engine", "lore.api",
                     "lore.ui.server"}  # fmt: skip
    # A script's sibling, imported as the script runs from its directory (e2e/, scripts/: no package).
    assert _imported(ast.parse("from common import x\nimport os\n"), "e2e.a", False, {"e2e.a", "e2e.common"},
                     script_dir="e2e") == {"e2e.common"}  # fmt: skip
    assert arrows_back_up({"lore.curate.inbox": found}) == [
        "lore.curate.inbox -> lore.api", "lore.curate.inbox -> lore.render.text", "lore.curate.inbox -> lore.sync.engine",
        "lore.curate.inbox -> lore.ui.server"]  # fmt: skip


def test_the_surface_and_direction_rules_catch_their_breaches() -> None:
    # The agent importing the CLI, capture importing curation, rank importing the search service:
    # each is an arrow back up in LAYERS, and each named check finds it.
    graph = {"lore.agent.daemon": {"lore.cli.app"}, "lore.capture": {"lore.curate.inbox", "lore.curate.pool"},
             "lore.rank.null": {"lore.search"}, "lore.curate.pool": {"lore.capture"}}  # fmt: skip
    assert arrows_back_up(graph) == ["lore.agent.daemon -> lore.cli.app", "lore.capture -> lore.curate.inbox",
                                     "lore.curate.pool -> lore.capture", "lore.rank.null -> lore.search"]  # fmt: skip
    assert imports_between(graph, "lore.agent.*", "lore.cli.*") == ["lore.agent.daemon -> lore.cli.app"]
    assert capture_curate_faults(graph) == ["lore.capture -> lore.curate.inbox", "lore.curate.pool -> lore.capture"]
    assert imports_between(graph, "lore.rank.*", "lore.search") == ["lore.rank.null -> lore.search"]
    assert layer_of("lore.search") > layer_of("lore.rank.pipeline")  # type: ignore[operator]


# -- the rules, on the repository --------------------------------------------------------
def unexplained_back_arrows(found: Sequence[str], allowed: Mapping[str, str]) -> list[str]:
    """Arrows back up not in ``allowed``, and allowed ones that no longer exist (the list must stay true)."""
    return [a for a in found if a not in allowed] + [f"{a} (allowed, not found)" for a in allowed if a not in found]


def capture_curate_faults(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Capture imports only the write checks; the checks never import capture: one direction between them."""
    checks = {e for name, entries in LAYERS if name == "write checks" for e in entries}
    return sorted([*(a for a in imports_between(graph, "lore.capture", "lore.curate.*") if a.split(" -> ")[1] not in checks),
                   *(a for check in sorted(checks) for a in imports_between(graph, check, "lore.capture"))])  # fmt: skip


def test_every_module_has_exactly_one_layer() -> None:
    graph = import_graph()
    assert "lore.cli.app" in graph and "lore.agent.hook" in graph and "benchmarks.runner" in graph  # the walk found both
    assert placement_faults(graph) == []


def test_no_cycles_type_checking_imports_included() -> None:
    assert cycles(import_graph(type_checking=True)) == []


def test_no_import_runs_back_up_the_layers_but_the_named_exceptions() -> None:
    assert len(BACK_ARROWS) <= MAX_BACK_ARROWS
    assert unexplained_back_arrows(arrows_back_up(import_graph()), BACK_ARROWS) == []


def test_the_agent_never_imports_the_cli_and_capture_and_curate_import_one_way() -> None:
    graph = import_graph()
    assert imports_between(graph, "lore.agent.*", "lore.cli.*") == []
    assert capture_curate_faults(graph) == []
    assert imports_between(graph, "lore.rank.*", "lore.search") == []  # the search service is below the pipeline


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
    surfaces = [name for name, _ in LAYERS].index("library API")
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
                                                  "lore.agent.prompt", "lore.errors", "lore.settings", "lore.version"}  # fmt: skip
    # ... and no dataclasses (~14 ms here): lore.settings.Settings is a NamedTuple for that reason.
    code = "import sys, lore.agent.hook\nprint('dataclasses' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert out.stdout.strip() == "False"
