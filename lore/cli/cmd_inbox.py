"""`lore inbox`: review captured candidates (list, accept, reject, edit)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.errors import UsageError
from lore.render.records import KIND_LABEL, record_json
from lore.render.text import age, one_line

if TYPE_CHECKING:
    from lore.curate import inbox as inbox_core
else:
    inbox_core = lazy_module("lore.curate.inbox")

inbox_app = typer.Typer(
    help="Review captured candidates: list them (default), accept, reject or edit.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(inbox_app, name="inbox")


def _json(record: Any) -> dict[str, Any]:
    return {**record_json(record), "provenance": record.raw.get("provenance"), "confidence": record.confidence}


@inbox_app.callback()
def inbox(
    ctx: typer.Context,
    kind: list[str] | None = typer.Option(None, "--type", "-t", help="Only candidates of this type (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """List the candidates waiting for review: id, type, age, title and where each was captured."""
    if ctx.invoked_subcommand is not None:
        return
    from lore.store.records import normalise_kind

    store = state(ctx).store
    store.require()
    kinds = frozenset(normalise_kind(k) for k in kind) if kind else None
    found = inbox_core.list_candidates(store, kinds)
    if as_json:
        for record in found:
            typer.echo(orjson.dumps(_json(record)).decode())
        return
    if not found:
        typer.echo("No candidates waiting for review.")
        return
    now = datetime.now(UTC)
    for record in found:
        line = f"{record.id:<22} {KIND_LABEL[record.kind]:<12} {age(record.timestamp, now):>5}  {one_line(record.title)}"
        provenance = inbox_core.provenance_line(record)
        typer.echo(line + (f"\n{'':<22} from {provenance}" if provenance else ""))
    typer.echo(f"{len(found)} candidate(s): `lore inbox accept ID...` or `lore inbox reject ID...` (--all for every one)")


def _report(verb: str, records: list[Any], as_json: bool) -> None:
    if as_json:
        for record in records:
            typer.echo(orjson.dumps(_json(record)).decode())
        return
    if not records:
        typer.echo("No candidates waiting for review.")
    for record in records:
        typer.echo(f"{verb} {KIND_LABEL[record.kind]} {record.id}: {one_line(record.title)}")


@inbox_app.command("accept")
def accept(
    ctx: typer.Context,
    ids: list[str] | None = typer.Argument(None, help="Candidate ids (unique prefixes work)."),
    all_candidates: bool = typer.Option(False, "--all", help="Accept every candidate."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per accepted record."),
) -> None:
    """Make candidates active (searchable and injected), at their type's normal confidence."""
    records = inbox_core.accept(state(ctx).store, list(ids or []), all_candidates=all_candidates)
    _report("Accepted", records, as_json)


@inbox_app.command("reject")
def reject(
    ctx: typer.Context,
    ids: list[str] | None = typer.Argument(None, help="Candidate ids (unique prefixes work)."),
    all_candidates: bool = typer.Option(False, "--all", help="Reject every candidate."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per rejected record."),
) -> None:
    """Delete candidates (audited) and remember their text, so capture does not propose it again."""
    records = inbox_core.reject(state(ctx).store, list(ids or []), all_candidates=all_candidates)
    _report("Rejected", records, as_json)


def _field_pairs(args: list[str]) -> dict[str, Any]:
    """``--name value`` pairs (``--name=value`` too) into ``{"name": value}``; dashes become underscores."""
    changes: dict[str, Any] = {}
    index = 0
    while index < len(args):
        token = args[index]
        if not token.startswith("--") or len(token) < 3:
            raise UsageError(f"expected --FIELD VALUE, found {token!r}", hint="e.g. lore inbox edit ID --rationale 'because ...'")
        name, equals, value = token[2:].partition("=")
        if not equals:
            if index + 1 >= len(args):
                raise UsageError(f"--{name} needs a value")
            value = args[index + 1]
            index += 1
        changes[name.replace("-", "_")] = value
        index += 1
    return changes


def _edit_in_editor(record: Any) -> dict[str, Any]:
    """The record's fields as YAML in $EDITOR; the fields that changed."""
    import subprocess
    import tempfile

    from lore.store.readers import YamlSyntaxError, parse_yaml
    from lore.store.store import dump_yaml

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise UsageError("no field given and $EDITOR is not set", hint="give --FIELD VALUE pairs or set EDITOR")
    shown = {k: v for k, v in record.raw.items() if k not in inbox_core.FIXED_FIELDS}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix=f"lore-{record.id}-", delete=False, encoding="utf-8") as handle:
        handle.write(f"# Edit {record.id}; save and quit to apply, or leave unchanged to cancel.\n")
        handle.write(dump_yaml(shown))
        path = handle.name
    try:
        import shlex

        subprocess.run([*shlex.split(editor), path], check=True)
        with open(path, encoding="utf-8") as edited:
            text = edited.read()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"the editor failed: {exc}") from exc
    finally:
        os.unlink(path)
    try:
        value = parse_yaml(text)
    except YamlSyntaxError as exc:
        raise UsageError(f"the edited text is not valid YAML: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError("the edited text must be a mapping of fields")
    return {k: v for k, v in value.items() if shown.get(k) != v}


@inbox_app.command("edit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def edit(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="Candidate id (a unique prefix works)."),
    as_json: bool = typer.Option(False, "--json", help="Print the edited record as JSON."),
) -> None:
    """Change a candidate's fields: `lore inbox edit ID --rationale "..." --tags a,b`; none given: $EDITOR."""
    store = state(ctx).store
    store.require()
    changes = _field_pairs(list(ctx.args))
    if not changes:
        record = store.load().get(record_id)
        changes = _edit_in_editor(record)
        if not changes:
            typer.echo(f"No change to {record.id}")
            return
    record = inbox_core.edit(store, record_id, changes)
    if as_json:
        typer.echo(orjson.dumps(_json(record)).decode())
    else:
        typer.echo(f"Edited {KIND_LABEL[record.kind]} {record.id}: {', '.join(sorted(changes))}")
