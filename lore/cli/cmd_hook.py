"""`lore hook ...`: Claude Code hooks. `lore hook prompt` itself runs from lore.__main__ without typer."""

from __future__ import annotations

import json
import os
import sys
import time

import typer

from lore.api import Lore
from lore.cli.base import app, state

hook_app = typer.Typer(help="Claude Code hooks: prompt context, session start, handoff stubs, install.", no_args_is_help=True)
app.add_typer(hook_app, name="hook")


server_app = typer.Typer(help="The warm helper that keeps the index loaded for the prompt hook (started by the hooks).", no_args_is_help=True)
app.add_typer(server_app, name="server")


AGENT_HELP = "The agent whose hook protocol to speak: claude-code (default), or one of `lore hook install --agent`'s."


def _agent(agent: str) -> str:
    from lore.agent.hook import agent_argument

    return agent_argument(["--agent", agent])


@hook_app.command("prompt")
def hook_prompt(agent: str = typer.Option("claude-code", "--agent", help=AGENT_HELP)) -> None:
    """UserPromptSubmit (Gemini: BeforeAgent): print relevant memory as hook JSON (event on stdin; always exits 0)."""
    from lore.agent.hook import run_prompt_hook

    run_prompt_hook(["--agent", agent])


def _read_event() -> dict:
    try:
        from lore.agent.hook import read_event

        return read_event(sys.stdin)
    except Exception:
        return {}


@hook_app.command("session-start")
def hook_session_start(ctx: typer.Context, agent: str = typer.Option("claude-code", "--agent", help=AGENT_HELP)) -> None:
    """SessionStart: start the warm helper, inject the latest handoff and top active lessons (always exits 0)."""
    from lore.agent.hook import run_session_start_hook

    st = state(ctx)
    run_session_start_hook(["--agent", agent], locations=st.locations, project=st.given_project)


def _stub(ctx: typer.Context, event_name: str, agent: str = "claude-code", capture: bool = False) -> None:
    """The end-of-turn hooks: a handoff stub (LORE_HOOK_HANDOFF=on) and a background capture (capture on)."""
    from lore.agent.hook import PROTOCOLS, event_cwd, event_session_id, log_failure

    try:
        event = _read_event()
        session_id = event_session_id(event)
        st = state(ctx)
        if event_name == "pre-compact":  # the compacted context no longer holds what the prompts were handed
            from lore.agent.hook import forget_injected

            forget_injected(session_id, st.settings)
        _capture(st, event, session_id, capture)
        # A bad setting is logged below: the hook still exits 0.
        if not st.settings.hook_handoff or event_name == "session-end":
            return
        from lore.agent.session import record_handoff_stub
        from lore.project import detect_project

        record_handoff_stub(st.locations, st.given_project or detect_project(event_cwd(event)), session_id, event_name,
                            st.settings)  # fmt: skip
    except Exception as exc:
        log_failure(type(exc).__name__, str(exc))
    finally:
        stop_output = PROTOCOLS[agent].stop_output  # e.g. Cursor expects a JSON object from every hook
        if stop_output is not None:
            typer.echo(stop_output)


def _capture(st: Lore, event: dict, session_id: str | None, flag: bool) -> None:
    """Hand the session's transcript to a detached `lore capture-session` when capture is on; never raises."""
    from lore.agent.hook import log_failure
    from lore.sessions.background import capture_enabled, spawn_capture

    path = event.get("transcript_path")
    if not capture_enabled(flag, st.settings) or not isinstance(path, str) or not path:
        return
    try:
        spawn_capture(os.path.expanduser(path), session_id, st.settings, data_dir=_text(st.given_data_dir),
                      index_dir=_text(st.given_index_dir), project=st.given_project)  # fmt: skip
    except Exception as exc:
        log_failure("capture-spawn", repr(exc))


CAPTURE = typer.Option(False, "--capture", help="Capture candidates from the event's transcript in the background "
                       "(also LORE_CAPTURE=on; LORE_CAPTURE=off turns it off).")  # fmt: skip


@hook_app.command("pre-compact")
def hook_pre_compact(ctx: typer.Context, agent: str = typer.Option("claude-code", "--agent", help=AGENT_HELP),
                     capture: bool = CAPTURE) -> None:  # fmt: skip
    """PreCompact (Gemini: PreCompress): handoff stub when LORE_HOOK_HANDOFF=on; capture when on (always exits 0)."""
    _stub(ctx, "pre-compact", _agent(agent), capture)


@hook_app.command("stop")
def hook_stop(ctx: typer.Context, agent: str = typer.Option("claude-code", "--agent", help=AGENT_HELP),
              capture: bool = CAPTURE) -> None:  # fmt: skip
    """Stop (Gemini: SessionEnd): handoff stub when LORE_HOOK_HANDOFF=on; capture when on (always exits 0)."""
    _stub(ctx, "stop", _agent(agent), capture)


@hook_app.command("session-end")
def hook_session_end(ctx: typer.Context, agent: str = typer.Option("claude-code", "--agent", help=AGENT_HELP),
                     capture: bool = CAPTURE) -> None:  # fmt: skip
    """SessionEnd: capture the rest of the session's transcript when capture is on (always exits 0)."""
    _stub(ctx, "session-end", _agent(agent), capture)


@hook_app.command("off")
def hook_off(ctx: typer.Context, session: str = typer.Option(..., "--session", help="Claude Code session id.")) -> None:
    """Stop injecting context into one session."""
    from lore.agent.hook import opt_out_path

    path = opt_out_path(session, state(ctx).settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")
    typer.echo(f"lore hook is off for session {session}")


@hook_app.command("on")
def hook_on(ctx: typer.Context, session: str = typer.Option(..., "--session", help="Claude Code session id.")) -> None:
    """Resume injecting context into a session that was turned off."""
    from lore.agent.hook import opt_out_path

    opt_out_path(session, state(ctx).settings).unlink(missing_ok=True)
    typer.echo(f"lore hook is on for session {session}")


@server_app.command("start")
def server_start(
    ctx: typer.Context,
    idle: int = typer.Option(600, "--idle", min=1, help="Exit after this many idle seconds."),
) -> None:
    """Start the warm helper for the current index in the background."""
    from lore.agent import client

    index_dir, settings = state(ctx).locations.index_dir, state(ctx).settings
    running = client.read_status(index_dir, settings)
    if running:
        typer.echo(f"lore server already running (pid {running['pid']})")
        return
    pid = client.start_detached(index_dir, settings, idle)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = client.read_status(index_dir, settings)
        if status:
            typer.echo(f"lore server started (pid {status['pid']}, idle exit after {idle}s)")
            return
        time.sleep(0.05)
    typer.echo(f"lore server (pid {pid}) did not come up within 30s; see {client.server_paths(index_dir, settings)['dir']}", err=True)
    raise typer.Exit(1)


@server_app.command("run")
def server_run(ctx: typer.Context,
               idle: int = typer.Option(600, "--idle", min=1, help="Exit after this many idle seconds.")) -> None:  # fmt: skip
    """Run the warm helper in the foreground (what `start` runs)."""
    import os
    import sys

    from lore.interpreter import lore_argv

    # The helper's own entry (lore.__main__ runs `lore server run` before the CLI loads): this
    # process becomes it, for the data dir and index dir this command line chose. The helper
    # runs CLI commands for other processes, so the CLI does not import it (no import cycle).
    locations = state(ctx).locations
    env = {**os.environ, "LORE_DATA_DIR": str(locations.data_dir), "LORE_INDEX_DIR": str(locations.index_dir)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, lore_argv("server", "run", "--idle", str(idle)), env)


@server_app.command("status")
def server_status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show whether a helper serves the current index."""
    from lore.agent import client

    index_dir, settings = state(ctx).locations.index_dir, state(ctx).settings
    status = client.read_status(index_dir, settings)
    if as_json:
        typer.echo(json.dumps({"running": status is not None, **(status or {}), "auto_start": client.auto_start_enabled(settings)}))
        return
    if status is None:
        typer.echo(f"lore server: not running (auto-start {'on' if client.auto_start_enabled(settings) else 'off'})")
        return
    uptime = time.time() - float(status.get("started_at", time.time()))
    typer.echo(f"lore server: running, pid {status['pid']}, up {uptime:.0f}s, {status.get('requests', 0)} requests "
               f"({status.get('writes', 0)} writes), index {status.get('index_dir')}")  # fmt: skip


@server_app.command("stop")
def server_stop(ctx: typer.Context) -> None:
    """Stop the helper for the current index."""
    from lore.agent import client

    pid = client.stop(state(ctx).locations.index_dir, state(ctx).settings)
    typer.echo("lore server: not running" if pid is None else f"lore server stopped (pid {pid})")


@server_app.command("enable")
def server_enable(ctx: typer.Context) -> None:
    """Let the hooks start the helper (the default): SessionStart starts it, a prompt restarts it."""
    from lore.paths import state_dir

    (state_dir(state(ctx).settings) / "server-off").unlink(missing_ok=True)
    typer.echo("lore server auto-start enabled: session start and the prompt hook start a helper when none runs")
    if state(ctx).settings.server is False:
        typer.echo(f"Note: LORE_SERVER={os.environ['LORE_SERVER']} in this environment still turns it off.", err=True)


@server_app.command("disable")
def server_disable(ctx: typer.Context) -> None:
    """The hooks no longer start the helper; the one serving the current index is stopped."""
    from lore.agent import client
    from lore.paths import state_dir

    path = state_dir(state(ctx).settings) / "server-off"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    stopped = client.stop(state(ctx).locations.index_dir, state(ctx).settings)
    typer.echo("lore server auto-start disabled" + (f"; stopped the running helper (pid {stopped})" if stopped else ""))


def _text(path: object) -> str | None:
    return None if path is None else str(path)
