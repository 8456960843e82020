"""Commands that record knowledge: init, remember, learn, handoff, fail, observe, capture."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.render.records import KIND_LABEL, record_json

if TYPE_CHECKING:
    from lore import capture
    from lore.capture import WriteOptions, WriteResult
else:
    capture = lazy_module("lore.capture")


def _emit(result: WriteResult, as_json: bool, verb: str) -> None:
    record = result.record
    for notice in result.notices:
        typer.echo("Warning: " + notice.replace("{new_id}", record.id), err=True)
    if result.redactions:
        kinds = ", ".join(sorted(set(result.redactions)))
        typer.echo(f"Redacted {len(result.redactions)} secret(s) before storing: {kinds}", err=True)
    if as_json:
        payload: dict[str, Any] = {**record_json(record), "created": result.created, "redacted": sorted(set(result.redactions))}
        if result.merged_into:
            payload["merged_into"] = result.merged_into
        typer.echo(orjson.dumps(payload).decode())
    elif result.merged_into:
        typer.echo(f"Merged into existing {KIND_LABEL[record.kind]} {record.id}: {record.title}")
    else:
        typer.echo(f"{verb} {KIND_LABEL[record.kind]} {record.id}: {record.title}")


def _options(ctx: typer.Context, no_redact: bool, force: bool = False, merge: bool = False) -> WriteOptions:
    if force and merge:
        from lore.errors import UsageError

        raise UsageError("--force and --merge exclude each other")
    return state(ctx).write_options(redact=not no_redact, force=force, merge=merge)


NO_REDACT = typer.Option(False, "--no-redact", help="Store the text exactly as given, secrets included.")
FORCE = typer.Option(False, "--force", help="Write even if a duplicate exists.")
MERGE = typer.Option(False, "--merge", help="On a duplicate, keep the existing record and raise its confidence.")
JSON = typer.Option(False, "--json", help="Print the stored record as JSON.")
TAG = typer.Option(None, "--tag", "-t", help="Tag (repeatable, or comma-separated).")


@app.command()
def init(
    ctx: typer.Context,
    git: bool = typer.Option(False, "--git", help="Also make it a git repository with lore's merge driver, .gitattributes and .gitignore (for `lore sync`)."),
    shard: bool = typer.Option(False, "--shard", help="Keep decisions, failures and observations in month shards (a team store: a sync rewrites a small file)."),
) -> None:
    """Create a data directory in the original Lore layout (existing files are kept)."""
    st = state(ctx)
    store = st.store
    created = store.init(git=git, shard=shard)
    data_dir = st.locations.data_dir
    if created:
        typer.echo(f"Initialised {data_dir}")
        for path in created:
            typer.echo(f"  created {path.relative_to(data_dir)}")
    else:
        typer.echo(f"{data_dir} is already initialised")
    if git:
        from lore.sync.engine import prepare_repository

        typer.echo(prepare_repository(data_dir))


@app.command()
def remember(
    ctx: typer.Context,
    decision: str = typer.Argument(..., help="The decision, in one line."),
    rationale: str | None = typer.Option(None, "--rationale", "-r", help="Why."),
    alternative: list[str] | None = typer.Option(None, "--alternative", "-a", help="An alternative considered (repeatable)."),
    tag: list[str] | None = TAG,
    importance: int | None = typer.Option(None, "--importance", "-i", min=1, max=5, help="1-5 (default 3)."),
    confidence: float | None = typer.Option(None, "--confidence", "-c", min=0.0, max=1.0, help="0-1 (default 0.8)."),
    outcome: str = typer.Option("pending", "--outcome", help="pending, successful, revised or abandoned."),
    decision_type: str = typer.Option("other", "--type", help="architecture, implementation, process, tooling or other."),
    session: str | None = typer.Option(None, "--session", help="Session id to attach."),
    no_redact: bool = NO_REDACT,
    force: bool = FORCE,
    merge: bool = MERGE,
    as_json: bool = JSON,
) -> None:
    """Record a decision with its rationale and alternatives."""
    st = state(ctx)
    result = capture.remember(
        st.store, decision, project=st.current_project(), rationale=rationale, alternatives=alternative,
        tags=tag, importance=importance, confidence=confidence, outcome=outcome, decision_type=decision_type,
        session_id=session, options=_options(ctx, no_redact, force, merge),
    )  # fmt: skip
    _emit(result, as_json, "Remembered")


@app.command()
def learn(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Pattern name."),
    context: str | None = typer.Option(None, "--context", help="When it applies."),
    problem: str | None = typer.Option(None, "--problem", help="The problem it solves."),
    solution: str | None = typer.Option(None, "--solution", help="What to do."),
    category: str | None = typer.Option(None, "--category", help="Category (default: general)."),
    origin: str | None = typer.Option(None, "--origin", help="Where it was learned (a record id or session)."),
    confidence: float | None = typer.Option(None, "--confidence", "-c", min=0.0, max=1.0, help="0-1 (default 0.5)."),
    example_bad: list[str] | None = typer.Option(None, "--example-bad", help="A bad example (repeatable)."),
    example_good: list[str] | None = typer.Option(None, "--example-good", help="A good example (repeatable)."),
    tag: list[str] | None = TAG,
    anti: bool = typer.Option(False, "--anti", help="Record an anti-pattern (use --symptom, --risk, --fix, --severity)."),
    symptom: str | None = typer.Option(None, "--symptom", help="Anti-pattern: how it shows."),
    risk: str | None = typer.Option(None, "--risk", help="Anti-pattern: what can go wrong."),
    fix: str | None = typer.Option(None, "--fix", help="Anti-pattern: what to do instead."),
    severity: str = typer.Option("medium", "--severity", help="Anti-pattern: critical, high, medium or low."),
    no_redact: bool = NO_REDACT,
    force: bool = FORCE,
    merge: bool = MERGE,
    as_json: bool = JSON,
) -> None:
    """Record a pattern (or, with --anti, an anti-pattern)."""
    st = state(ctx)
    options = _options(ctx, no_redact, force, merge)
    if anti:
        result = capture.learn_anti(
            st.store, name, project=st.current_project(), symptom=symptom, risk=risk, fix=fix,
            category=category, severity=severity, tags=tag, options=options,
        )  # fmt: skip
    else:
        result = capture.learn(
            st.store, name, project=st.current_project(), context=context, problem=problem, solution=solution,
            category=category, origin=origin, confidence=confidence, example_bad=example_bad,
            example_good=example_good, tags=tag, options=options,
        )  # fmt: skip
    _emit(result, as_json, "Learned")


@app.command()
def handoff(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What was done, for whoever picks this up next."),
    next_step: list[str] | None = typer.Option(None, "--next", "-n", help="A next step (repeatable)."),
    blocker: list[str] | None = typer.Option(None, "--blocker", "-b", help="A blocker (repeatable)."),
    question: list[str] | None = typer.Option(None, "--question", "-q", help="An open question (repeatable)."),
    related: list[str] | None = typer.Option(None, "--related", help="A related record id (repeatable)."),
    no_redact: bool = NO_REDACT,
    as_json: bool = JSON,
) -> None:
    """Leave a session handoff: what was done, next steps, blockers, questions."""
    st = state(ctx)
    result = capture.handoff(
        st.store, text, project=st.current_project(), next_steps=next_step, blockers=blocker,
        questions=question, related_ids=related, options=st.write_options(redact=not no_redact, check_duplicates=False),
    )  # fmt: skip
    _emit(result, as_json, "Handed off")


@app.command()
def fail(
    ctx: typer.Context,
    error_type: str = typer.Argument(..., help="Error type, e.g. ToolError, Timeout."),
    message: str = typer.Argument(..., help="The error message."),
    tool: str | None = typer.Option(None, "--tool", help="The tool that failed."),
    no_redact: bool = NO_REDACT,
    as_json: bool = JSON,
) -> None:
    """Record a failure."""
    st = state(ctx)
    result = capture.fail(st.store, error_type, message, project=st.current_project(), tool=tool,
                          options=st.write_options(redact=not no_redact, check_duplicates=False))  # fmt: skip
    _emit(result, as_json, "Recorded")


@app.command()
def observe(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The observation."),
    tag: list[str] | None = TAG,
    no_redact: bool = NO_REDACT,
    as_json: bool = JSON,
) -> None:
    """Record an observation (scratch notes; they decay faster in search)."""
    st = state(ctx)
    result = capture.observe(st.store, text, project=st.current_project(), tags=tag,
                             options=st.write_options(redact=not no_redact, check_duplicates=False))  # fmt: skip
    _emit(result, as_json, "Observed")


@app.command("capture")
def capture_cmd(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What to capture."),
    rationale: str | None = typer.Option(None, "--rationale", "-r", help="Makes it a decision."),
    solution: str | None = typer.Option(None, "--solution", help="Makes it a pattern."),
    problem: str | None = typer.Option(None, "--problem", help="Pattern problem (with --solution)."),
    context: str | None = typer.Option(None, "--context", help="Pattern context (with --solution)."),
    error_type: str | None = typer.Option(None, "--error-type", help="Makes it a failure."),
    tool: str | None = typer.Option(None, "--tool", help="Failure tool (with --error-type)."),
    tag: list[str] | None = TAG,
    no_redact: bool = NO_REDACT,
    force: bool = FORCE,
    as_json: bool = JSON,
) -> None:
    """Capture anything, routed like the original: --rationale -> decision, --solution -> pattern,
    --error-type -> failure, otherwise an observation."""
    st = state(ctx)
    store, project = st.store, st.current_project()
    options = _options(ctx, no_redact, force)
    if rationale is not None:
        result = capture.remember(store, text, project=project, rationale=rationale, tags=tag, options=options)
    elif solution is not None:
        result = capture.learn(store, text, project=project, solution=solution, problem=problem, context=context,
                               tags=tag, options=options)  # fmt: skip
    elif error_type is not None:
        options.check_duplicates = False
        result = capture.fail(store, error_type, text, project=project, tool=tool, options=options)
    else:
        options.check_duplicates = False
        result = capture.observe(store, text, project=project, tags=tag, options=options)
    _emit(result, as_json, "Captured")
