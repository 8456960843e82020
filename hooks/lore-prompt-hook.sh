#!/bin/sh
# Claude Code UserPromptSubmit hook: print lore's memories for the prompt (JSON on stdin).
# Never blocks a prompt: prints nothing when lore is missing, and always exits 0.
# LORE_BIN overrides the lore executable (default: `lore` on PATH).
lore_bin=${LORE_BIN:-lore}
command -v "$lore_bin" >/dev/null 2>&1 || exit 0
"$lore_bin" hook prompt "$@"
exit 0
