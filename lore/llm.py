"""The optional local model behind ``LORE_LLM_CMD``: one place that runs it and cleans up after it."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class LlmReply:
    """The command's output (None when it did not answer) and, if it failed, why."""

    text: str | None
    failure: str | None = None


def ask(prompt: str, timeout: float, command: str | None) -> LlmReply:
    """Run ``command`` (``LORE_LLM_CMD``, ``Settings.llm_cmd``) with ``prompt`` on stdin; never raises.

    The command runs in its own process group, and the whole group is killed on a
    timeout: a wrapper script's children (``ollama run ...``) must not outlive lore.
    """
    line = command
    if not line:
        return LlmReply(None, "LORE_LLM_CMD is not set")
    try:
        argv = shlex.split(line)
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, start_new_session=True)  # fmt: skip
    except (OSError, ValueError) as error:
        return LlmReply(None, str(error))
    try:
        out, _ = process.communicate(prompt, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return LlmReply(None, f"LORE_LLM_CMD gave no answer within {timeout:g} s")
    except OSError as error:  # e.g. it exited without reading stdin (broken pipe)
        _kill_group(process)
        return LlmReply(None, str(error))
    if process.returncode != 0:
        return LlmReply(None, f"LORE_LLM_CMD exited {process.returncode}")
    answer = " ".join(out.split())
    return LlmReply(answer, None) if answer else LlmReply(None, "LORE_LLM_CMD printed nothing")


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        process.communicate(timeout=2)
