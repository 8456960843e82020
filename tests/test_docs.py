"""README.md and docs/*.md against the code: what they link to and name must exist.

Checked mechanically, in every doc: relative links (the file, and a heading for an
``#anchor``); section references in prose (``docs/search.md, "Fusion"``, also from
code comments); every ``lore ...`` command line (each subcommand, each ``--flag`` and
``-x`` on that command, from the typer app's own declarations); every other ``--flag``
(a lore option, or one ``python -m benchmarks`` or ``scripts/`` declare, or a listed
flag of another tool); every ``LORE_*`` variable (read somewhere in lore/); every
repository path (lore/..., benchmarks/..., tests/...); every dotted name
(``lore.rank.cold.hook_options``, ``inject.NULL_PROMPTS``, ``Bm25Index.phrase_rows``);
and the defaults docs/search.md states, against the values the code runs with.
Each checker is a plain function, and a self-test feeds it a broken doc, so none of
these checks can pass by finding nothing.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [p for top in ("lore", "benchmarks", "scripts", "tests") for p in sorted((ROOT / top).rglob("*.py"))]

# Flags of other tools that the docs show: the agents' CLIs (docs/agents.md), git (docs/sync.md),
# pip (docs/whoosh-choice.md), and a secret on a command line (docs/redaction.md's example).
OTHER_TOOLS_FLAGS = frozenset({"--dangerously-bypass-hook-trust", "--strict-config", "--auto", "--fix-thin",
                               "--no-binary", "--token", "--granularity", "--tool", "--callgrind-out-file"})  # fmt: skip
# Repository paths docs name as history, each with where that code went (which must exist).
GONE = {"lore/index/lexical.py": "benchmarks/whoosh_index.py"}
# Paths in other projects (the agents' docs and protocols) and a prompt's example path.
NOT_OURS = frozenset({"docs/hooks/reference.md", "docs/docs-cli-gcli-migration.md", "hooks/list", "tests/test_b.py",
                      # the LoCoMo peers' sources (docs/evaluation.md)
                      "benchmarks/BENCHMARKS.md", "benchmarks/locomo_bench.py", "docs/HISTORY.md",
                      "docs/memori-cloud/benchmark/results"})
# Dotted names that are not lore's: Whoosh's scorer, a git setting, code the scrubber leaves alone.
NOT_LORE_NAMES = frozenset({"scoring.BM25F", "merge.lore.driver", "settings.TOKEN"})
# Code spans that show a command being typed, not run (docs/completions.md).
TYPED = frozenset({"lore se"})
FILE_SUFFIXES = frozenset({"py", "md", "json", "jsonl", "yaml", "toml", "sh", "db", "key", "npy", "npz", "bin", "txt",
                           "png", "safetensors", "lock", "log", "toc", "seg", "gz", "html", "css", "js", "cfg", "ini"})
PATH_TOPS = ("lore", "benchmarks", "scripts", "tests", "docs", "hooks", "completions", "e2e")
PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(PATH_TOPS) + r")/[\w./*-]*[\w*/])")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# `docs/search.md, "Fusion"`, `[search.md](search.md), "Fusion"`, `search.md) "Fusion"`.
SECTION_REF = re.compile(r"([\w-]+\.md)\)?\]?(?:\([^)]*\))?,?\s\"([^\"]{2,90})\"")


@cache
def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def headings(text: str) -> list[str]:
    """The text of each heading and of each bold paragraph lead-in (``**Tiers.**``)."""
    text = FENCE.sub("", text)
    found = [m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)]
    found += [m.group(1).rstrip(".:") for m in re.finditer(r"^\*\*([^*\n]+)\*\*", text, re.M)]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_links(path: Path, text: str) -> list[str]:
    """Relative links of ``text`` (the doc at ``path``) whose file or #anchor does not exist."""
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{path.name}: link to missing {target}")
        elif anchor and linked.suffix == ".md" and anchor not in {slug(h) for h in headings(read(linked))}:
            broken.append(f"{path.name}: link to missing heading {target}")
    return broken


def broken_section_refs(origin: str, text: str, docs: dict[str, str]) -> list[str]:
    """References like ``docs/search.md, "Fusion"`` whose doc has no heading holding those words."""
    broken = []
    for name, section in SECTION_REF.findall(text):
        if name not in docs:
            continue  # a file outside docs/ (a data set's README): links check files
        titles = headings(docs[name])
        wanted = " ".join(section.split()).rstrip(".,;:")
        if not any(wanted in t for t in titles):
            broken.append(f'{origin}: {name} has no section "{section}"')
    return broken


def code_texts(text: str) -> Iterator[str]:
    """Inline code spans and the lines of code blocks (not Python, JSON or YAML ones)."""
    for lang, body in FENCE.findall(text):
        if lang not in ("python", "json", "yaml", "toml"):
            yield from body.splitlines()
    yield from SPAN.findall(FENCE.sub("", text))


def command_lines(text: str) -> Iterator[str]:
    """Every ``lore ...`` command a code span or shell line shows, one per ``;``/``&&``/``|``."""
    for code in code_texts(text):
        code = code.split(" # ")[0]
        for part in re.split(r";|&&|\|\||(?<!\w)\|(?!\w)", code):
            part = part.strip().removeprefix("$ ").strip()
            match = re.search(r"(?:^|\s)(lore(?: \S.*)?)$", part)
            if match and (part.startswith("lore") or part.startswith("LORE_") or "=" in part.split()[0]):
                yield match.group(1)


@cache
def click_root() -> Any:
    import typer

    from lore.cli.app import app

    return typer.main.get_command(app)


def options_of(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}


def tokens_of(line: str) -> list[str]:
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    # `--success|--failure`, `[--format markdown|compact|json]`: each alternative is a word.
    return [part.strip("[]") for w in words for part in w.split("|") if part.strip("[]")]


def command_problems(line: str, root: Any) -> list[str]:
    """What in one ``lore ...`` line the CLI does not declare: a command, or a flag of that command."""
    if line in TYPED:
        return []
    words = tokens_of(line)[1:]
    command, path, problems = root, ["lore"], []
    global_options = options_of(root)
    while words and words[0] in global_options:
        words = words[2:] if words[0] in ("--data-dir", "--index-dir", "--project", "-P") else words[1:]
    while words and hasattr(command, "commands") and not words[0].startswith("-"):
        name = words.pop(0)
        if name in ("...", "COMMAND", "CMD", "<command>") or not re.fullmatch(r"[a-z][a-z-]*", name):
            return problems
        if name not in command.commands:
            return [f"`{line}`: {' '.join(path)} has no command {name!r}"]
        command, path = command.commands[name], [*path, name]
    known = options_of(command) | global_options | {"--help", "-h"}
    if command.context_settings.get("ignore_unknown_options"):  # `lore inbox edit ID --FIELD VALUE`
        known |= record_field_flags()
    for word in words:
        flag = word.split("=")[0].rstrip(",.:")
        if re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-zA-Z]", flag) and flag not in known:
            problems.append(f"`{line}`: {' '.join(path)} has no option {flag}")
    return problems


@cache
def record_field_flags() -> frozenset[str]:
    """``--name`` for every field name of lore/store/records.py (what ``lore inbox edit`` sets)."""
    words = re.findall(r"\b([a-z][a-z_]+)\b", read(ROOT / "lore" / "store" / "records.py"))
    return frozenset("--" + w.replace("_", "-") for w in words)


@cache
def declared_flags() -> frozenset[str]:
    """Every option of every lore command, and every flag a ``"--x"`` literal declares in benchmarks/ or scripts/."""
    flags: set[str] = set()

    def walk(command: Any) -> None:
        flags.update(options_of(command))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(click_root())
    flags.update(record_field_flags())
    for path in [*SOURCES, *sorted((ROOT / "e2e").rglob("*.py"))]:
        if path.parts[len(ROOT.parts)] in ("benchmarks", "scripts", "e2e"):
            flags.update(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", read(path)))
    return frozenset(flags)


def unknown_flags(text: str, flags: frozenset[str]) -> list[str]:
    found = set()
    for code in code_texts(text):
        found.update(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", code))
    return sorted(found - flags - OTHER_TOOLS_FLAGS)


@cache
def lore_source() -> str:
    """lore's code, and the harness's and tests' (``LORE_SHARED_DIR`` steers the benchmarks only)."""
    return "\n".join(read(p) for p in SOURCES if p.name != Path(__file__).name)


def unknown_settings(text: str, source: str) -> list[str]:
    names = set(re.findall(r"\b(LORE_[A-Z0-9_]*[A-Z0-9])\b", text))
    return sorted(name for name in names if not re.search(rf"\b{name}\b", source))


def missing_paths(text: str) -> list[str]:
    missing = set()
    for path in PATH.findall(text):
        path = path.rstrip(".")
        if path in NOT_OURS or "<" in path or "N" in path.split("/")[-1].split(".")[0].split("-") or path.startswith("docs/ui/"):
            continue
        if path in GONE:
            if not (ROOT / GONE[path]).exists():
                missing.add(f"{path} (gone to {GONE[path]}, which is missing too)")
            continue
        exists = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
        if not exists:
            missing.add(path)
    return sorted(missing)


@cache
def modules() -> dict[str, list[Path]]:
    """Module stems (``cold``, ``inject``) and dotted names (``lore.rank.cold``) to their files."""
    found: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "lore").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.setdefault(".".join(parts), []).append(path)
        if path.stem != "__init__":
            found.setdefault(path.stem, []).append(path)
    return found


@cache
def classes() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "lore").rglob("*.py")):
        for name in re.findall(r"^\s*class (\w+)", read(path), re.M):
            found.setdefault(name, []).append(path)
    return found


def defines(path: Path, name: str) -> bool:
    """``name`` is a function, class, constant, field, method or import of the module at ``path``."""
    return re.search(rf"(\bdef {name}\b|\bclass {name}\b|^\s*{name}\s*[:=]|\b{name}\b.*=|import.*\b{name}\b"
                     rf"|\bself\.{name}\b|^\s*{name}\b|[\"']{name}[\"'])", read(path), re.M) is not None


def unknown_names(text: str) -> list[str]:
    """Dotted names in code spans (``lore.rank.cold.hook_options``, ``inject.Z_RANGE``) that the code lacks."""
    unknown = []
    for code in SPAN.findall(FENCE.sub("", text)):
        for dotted in re.findall(r"(?<![\w./-])((?:lore\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?(?![\w/-])", code):
            parts = dotted.split(".")
            if dotted in NOT_LORE_NAMES or parts[-1] in FILE_SUFFIXES:
                continue
            if f"lore.{parts[0]}" in modules() and parts[0] not in modules():  # `rank.cold.run_cold`: a package of lore
                parts = ["lore", *parts]
            if parts[0] == "lore" and len(parts) > 1:
                for cut in range(len(parts), 0, -1):
                    if ".".join(parts[:cut]) in modules():
                        rest, files = parts[cut:], modules()[".".join(parts[:cut])]
                        break
                else:
                    unknown.append(dotted)
                    continue
                if rest and not any(defines(f, rest[0]) or (f.name == "__init__.py" and rest[0] in modules())
                                    for f in files):  # fmt: skip
                    unknown.append(dotted)
                continue
            # A class's attribute may come from a base or a part in another module: any lore module defines it.
            files = modules().get(parts[0]) or (sorted((ROOT / "lore").rglob("*.py")) if parts[0] in classes() else None)
            if files and not any(defines(f, parts[1]) for f in files):
                unknown.append(dotted)
    return sorted(set(unknown))


def default_rows(text: str) -> list[tuple[str, str]]:
    """(code name, value) of every row of each table with a ``value`` and a ``code`` column."""
    rows, columns = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if columns is None:
            columns = (cells.index("value"), cells.index("code")) if {"value", "code"} <= set(cells) else ()
        elif columns and not set(cells[0]) <= set("-: "):
            rows.append((cells[columns[1]].strip("`"), cells[columns[0]]))
    return rows


def code_value(name: str) -> Any:
    """The value ``name`` (``stem.NAME``, ``stem.Class.field``) has in lore: a class's field is its instance's."""
    import importlib

    stem, *attributes = name.split(".")
    files = [f for f in modules().get(stem, []) if f.stem == stem]
    assert len(files) == 1, f"{name}: no single lore module {stem!r}"
    value: Any = importlib.import_module(".".join(files[0].relative_to(ROOT).with_suffix("").parts))
    for attribute in attributes:
        if isinstance(value, type) and (hasattr(value, "_field_defaults") or hasattr(value, "__dataclass_fields__")):
            value = value()
        value = getattr(value, attribute)
    return value


def wrong_defaults(text: str) -> list[str]:
    wrong = []
    for name, stated in default_rows(text):
        actual = code_value(name)
        if ast.literal_eval(stated) != actual:
            wrong.append(f"{name}: the doc says {stated}, the code {actual!r}")
    return wrong


DOC_TEXTS = {path.name: read(path) for path in DOCS}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_resolve(doc: Path) -> None:
    assert broken_links(doc, read(doc)) == []


def test_section_references_name_real_sections() -> None:
    broken = []
    for path in [*DOCS, *SOURCES]:
        broken += broken_section_refs(str(path.relative_to(ROOT)), read(path), DOC_TEXTS)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_lore_command_line_parses_against_the_cli(doc: Path) -> None:
    root = click_root()
    problems = [p for line in command_lines(read(doc)) for p in command_problems(line, root)]
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_flag_is_declared(doc: Path) -> None:
    assert unknown_flags(read(doc), declared_flags()) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_lore_setting_is_read_by_lore(doc: Path) -> None:
    assert unknown_settings(read(doc), lore_source()) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_repository_path_exists(doc: Path) -> None:
    assert missing_paths(read(doc)) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_exists(doc: Path) -> None:
    assert unknown_names(read(doc)) == []


def uncited_documents(text: str) -> list[str]:
    """Project documents a text cites by number (``RFC-0011``) that no file of the repository is named after."""
    names = set()
    for _top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("index", "__pycache__")]
        names.update(Path(name).stem.lower() for name in files)
    return sorted({d for d in re.findall(r"\bRFC-\d+", text) if d.lower() not in names})


def test_every_cited_document_is_in_the_repository() -> None:
    cited = []
    for path in [*DOCS, *SOURCES]:
        if path.name != Path(__file__).name:
            cited += [f"{path.relative_to(ROOT)}: {d}" for d in uncited_documents(read(path))]
    assert cited == []


def settings_defaults_stated(text: str) -> list[tuple[str, str]]:
    """(variable, default) of each row of a ``| variable | accepted values | default | ...`` table, literal defaults
    only, and of prose such as ``LORE_HOOK_BUDGET`` ... (default 1500)."""
    rows = [(variable, stated.replace(",", "")) for variable, stated
            in re.findall(r"`(LORE_[A-Z_]+)`[^.()`|]{0,30}\(?default:? `?([\d,.]+|[a-z]+)\b", text)]  # fmt: skip
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) >= 3 and re.fullmatch(r"`LORE_\w+`", cells[0]):
            default = re.fullmatch(r"`?([\w.]+)`?", cells[2])
            if default:
                rows.append((cells[0].strip("`"), default.group(1)))
    return rows


def wrong_settings_defaults(text: str) -> list[str]:
    """Stated defaults that differ from ``Settings()``'s field whose comment names the variable."""
    from lore.settings import Settings

    fields = dict(re.findall(r"^\s+(\w+):[^#\n]*#\s*(LORE_\w+)", read(ROOT / "lore" / "settings.py"), re.M))
    by_variable = {variable: field for field, variable in fields.items()}
    wrong = []
    for variable, stated in settings_defaults_stated(text):
        if variable not in by_variable:
            wrong.append(f"{variable}: no field of Settings names it")
            continue
        actual = getattr(Settings(), by_variable[variable])
        expected: Any = {"on": True, "off": False}.get(stated, stated) if isinstance(actual, bool) else stated
        if isinstance(actual, (int, float)) and not isinstance(actual, bool):
            expected = float(stated) if re.fullmatch(r"[\d.]+", stated) else stated
        if expected != actual:
            wrong.append(f"{variable}: the doc says {stated}, Settings() has {actual!r}")
    return wrong


def test_the_defaults_settings_md_states_are_the_codes() -> None:
    text = DOC_TEXTS["settings.md"]
    assert len(settings_defaults_stated(text)) >= 12
    assert wrong_settings_defaults(text) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_stated_setting_default_is_the_codes(doc: Path) -> None:
    assert wrong_settings_defaults(read(doc)) == []


def api_problems(text: str) -> list[str]:
    """Methods api.md's headings name (``context(query, budget_tokens=500)``) that ``Lore`` lacks, or whose
    keyword defaults differ; positional arguments are named for the reader and not checked."""
    import inspect

    from lore.api import Lore

    problems = []
    for heading in re.findall(r"^## (.+)$", FENCE.sub("", text), re.M):
        for name, arguments in re.findall(r"`(\w+)\(([^`]*)\)", heading):
            if not hasattr(Lore, name):
                problems.append(f"Lore has no {name}")
                continue
            parameters = inspect.signature(getattr(Lore, name)).parameters
            for argument in (a.strip() for a in arguments.split(",")):
                keyword, equals, stated = argument.partition("=")
                if not equals:
                    continue
                if keyword not in parameters:
                    problems.append(f"Lore.{name} has no parameter {keyword}")
                elif ast.literal_eval(stated) != parameters[keyword].default:
                    problems.append(f"Lore.{name}({keyword}=...) defaults to {parameters[keyword].default!r}, not {stated}")
    return problems


@cache
def option_defaults() -> dict[str, set[str]]:
    """Each lore option's defaults over every command that declares it, as text (``--batch`` -> {"50"})."""
    found: dict[str, set[str]] = {}

    def walk(command: Any) -> None:
        for param in command.params:
            for opt in param.opts:
                found.setdefault(opt, set()).add(str(param.default))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(click_root())
    return found


def wrong_flag_defaults(text: str) -> list[str]:
    """``--flag`` ... ``(default N`` where no lore command declares that flag with default N."""
    wrong = []
    for flag, stated in re.findall(r"`(--[a-z][a-z0-9-]*)[^`]*`[^.()`]{0,40}\(default:? ([\w.]+)", text):
        defaults = option_defaults().get(flag)
        if defaults is not None and not any(d == stated or d == stated.replace(",", "") or
                                            (re.fullmatch(r"[\d.]+", d) and re.fullmatch(r"[\d.]+", stated)
                                             and float(d) == float(stated)) for d in defaults):  # fmt: skip
            wrong.append(f"{flag}: the doc says default {stated}, the CLI {sorted(defaults)}")
    return wrong


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_stated_option_defaults_are_the_clis(doc: Path) -> None:
    assert wrong_flag_defaults(read(doc)) == []


def unknown_bench_choices(text: str) -> list[str]:
    """Sections (``--only``) and sets (``--sets``) of ``python -m benchmarks`` lines that the harness lacks."""
    from benchmarks import SECTIONS, SETS

    unknown = []
    for line in re.findall(r"python -m benchmarks([^`|#\n]*)", text):
        for flag, names in re.findall(r"(--only|--sets)[ =]([\w,-]+)", line):
            known = SECTIONS if flag == "--only" else SETS
            unknown += [f"{flag} {name}" for name in names.split(",") if name not in known and not name.isupper()]
    return sorted(set(unknown))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_bench_section_and_set_exists(doc: Path) -> None:
    assert unknown_bench_choices(read(doc)) == []


def test_the_python_examples_of_redaction_md_run() -> None:
    """Its ``>>>`` examples, as doctests (api.md's run in tests/test_api.py, in a store of their own)."""
    import doctest

    text = re.sub(r"^```\w*$", "", DOC_TEXTS["redaction.md"], flags=re.M)  # a fence ends an example's output
    assert ">>>" in text
    test = doctest.DocTestParser().get_doctest(text, {}, "redaction.md", "docs/redaction.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def json_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in json_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in json_keys(v)}
    return set()


def test_search_md_json_example_names_what_the_renderer_writes() -> None:
    """Every key of the ``--json`` example is a string lore writes, and its schema version is the renderer's."""
    import json

    from lore.render.results import JSON_SCHEMA_VERSION

    text = DOC_TEXTS["search.md"]
    section = text[text.index("## `--json` output"):]
    example = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))  # type: ignore[union-attr]
    assert example["schema_version"] == JSON_SCHEMA_VERSION
    assert f"`schema_version` {JSON_SCHEMA_VERSION}" in section
    channels = {"bm25", "vector", "hyde", "graph"}  # keys by channel name, the pipeline's CHANNELS
    written = lore_source()
    missing = sorted(k for k in json_keys(example) - channels if f'"{k}"' not in written and f"'{k}'" not in written)
    assert missing == []


def test_api_md_names_lores_methods_and_their_defaults() -> None:
    assert api_problems(DOC_TEXTS["api.md"]) == []


def test_the_defaults_search_md_states_are_the_codes() -> None:
    rows = default_rows(DOC_TEXTS["search.md"])
    assert len(rows) >= 20  # the tables of "How each default was chosen" were read
    assert wrong_defaults(DOC_TEXTS["search.md"]) == []


# -- self-tests: each checker finds what a broken doc gets wrong -----------------------------------------


def test_checkers_catch_a_broken_doc(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = ("# Title\n\nSee [a](missing.md), [b](doc.md#no-such-heading), [c](doc.md#title)\n"
            'and (other.md, "Nowhere"), (other.md, "Real section").\n\n'
            "```sh\nlore search x --no-such-flag\nlore nosuchcommand\nlore hook install --agent codex\n```\n"
            "Also `--not-a-flag`, `LORE_NOT_A_SETTING`, `lore/no/such.py`, `lore.rank.cold.no_such_name`,"
            " `inject.NO_SUCH`, `lore/rank/cold.py`, `inject.Z_RANGE`.\n")  # fmt: skip
    doc.write_text(text)
    assert broken_links(doc, text) == ["doc.md: link to missing missing.md", "doc.md: link to missing heading doc.md#no-such-heading"]
    assert broken_section_refs("doc", text, {"other.md": "# Real section\n"}) == ['doc: other.md has no section "Nowhere"']
    problems = [p for line in command_lines(text) for p in command_problems(line, click_root())]
    assert problems == ["`lore search x --no-such-flag`: lore search has no option --no-such-flag",
                        "`lore nosuchcommand`: lore has no command 'nosuchcommand'"]  # fmt: skip
    assert unknown_flags(text, declared_flags()) == ["--no-such-flag", "--not-a-flag"]
    assert unknown_settings(text, lore_source()) == ["LORE_NOT_A_SETTING"]
    assert missing_paths(text) == ["lore/no/such.py"]
    assert unknown_names(text) == ["inject.NO_SUCH", "lore.rank.cold.no_such_name"]
    settings_table = ("| `LORE_HOOK_BUDGET` | characters | 1200 | hooks |\n| `LORE_HOOK` | on/off | `on` | hooks |\n"
                      "| `LORE_HOOK_COLD` | modes | `lexical` | the hook |\n")
    assert wrong_settings_defaults(settings_table) == ["LORE_HOOK_BUDGET: the doc says 1200, Settings() has 1500",
                                                       "LORE_HOOK_COLD: the doc says lexical, Settings() has 'light'"]
    assert api_problems("## `context(query, budget_tokens=400)`\n## `recall(query)`\n") == [
        "Lore.context(budget_tokens=...) defaults to 500, not 400", "Lore has no recall"]
    assert wrong_flag_defaults("in batches of `--batch` transcripts (default 40, or fewer)") == [
        "--batch: the doc says default 40, the CLI ['50']"]
    assert wrong_flag_defaults("in batches of `--batch` transcripts (default 50, or fewer)") == []
    assert unknown_bench_choices("`python -m benchmarks --only quality,speed --sets demo,toy`") == [
        "--only speed", "--sets toy"]
    assert wrong_settings_defaults("a timeout (`LORE_CAPTURE_LLM_TIMEOUT`, default 30 s)") == [
        "LORE_CAPTURE_LLM_TIMEOUT: the doc says 30, Settings() has 60.0"]
    assert uncited_documents("as RFC-0011 says, and RFC 7807 problem+json") == ["RFC-0011"]
    table = ("| default | value | code | dev evidence |\n| --- | --- | --- | --- |\n"
             "| k1 | 1.2 | `scoring.K1` | ... |\n| depth | 40 | `options.SearchOptions.retrieval_limit` | ... |\n")
    assert default_rows(table) == [("scoring.K1", "1.2"), ("options.SearchOptions.retrieval_limit", "40")]
    assert wrong_defaults(table) == ["options.SearchOptions.retrieval_limit: the doc says 40, the code 30"]


def test_the_readme_set_up_test_command_is_the_one_ci_runs() -> None:
    set_up = read(ROOT / "README.md").split("## Set-up", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    command = set_up.strip().splitlines()[1]
    assert command.startswith("python -m pytest "), command
    ci = read(ROOT / ".ci" / "run")
    assert 'LORE_TESTS_NO_SKIP=1 python -m pytest "$@"' in ci
    assert f"\nrun_pytest {command.removeprefix('python -m pytest ')}\n" in ci
    assert "\nrun_pytest -q -m integration\n" in ci  # and the rest of the suite, as its own step
