"""The system prompt: persona, environment, tool guidance and project instructions in one text.

Role: ``render_system_prompt(env)`` returns the system text, deterministically for equal input.
The agent logs it in ``request/header`` before any request carries it (invariant 9).

Must never: write to disk, read the clock or the environment on its own — everything it renders
comes in through ``PromptEnvironment``, so the logged text is the whole truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_server.prompt.instructions import render_instructions

PERSONA = """You are agent-server, a coding agent working inside the user's editor.
Answer concisely and concretely. When you are not sure, say so; never invent file contents or
command output. Look before you change anything, and check your work (run the tests) before you
say it is done."""

TOOL_GUIDANCE = """# How to work
- Read a file with `read` before you `edit` or `write` it; edits must match the text exactly.
  If a change is refused as stale, read the file again and redo the change.
- Prefer `edit` for changes to existing files; use `write` for new files or full rewrites.
- Use `glob` and `grep` to find code instead of guessing paths.
- `bash` runs in the working directory with a timeout; it has no input. Do not start servers or
  watchers that never exit. Summarise long outputs instead of repeating them.
- Your edits are shown to the user as proposals; the result tells you what really landed.
- A result that was cut says how to see the rest (offset/limit, or a saved file to read)."""

MODE_TEXT = {
    "read-only": "read-only: you may read and search, but nothing may be written (edits and writing commands are refused).",
    "workspace-write": "workspace-write: you may change files inside the workspace roots; writes outside are refused.",
    "accept-edits": ("accept-edits: you may change files inside the workspace roots; your edits are applied at "
                     "once, without the user's review (the user can undo them); writes outside are refused."),
    "danger-full-access": "danger-full-access: no file-system restrictions; be careful.",
}


@dataclass(frozen=True)
class PromptEnvironment:
    """What the system prompt states about where the agent runs.

    ``roots``: absolute workspace roots, the first is the working directory; ``os_name``,
    ``shell``: as shown to the model; ``date``: ISO date (YYYY-MM-DD); ``tool_names``: the tools
    this request offers; ``mode``: the session's sandbox mode (``None``: not stated);
    ``sandboxed``: whether shell commands run under an OS sandbox (``None``: not stated);
    ``instructions``: the ``project/instructions`` records (``{"path", "sha256", "text"}``);
    ``client``: the client's system prompt ``(mode, text)`` (ACP ``systemPrompt``): ``append`` adds
    it at the end, ``override`` puts it in place of the persona and the tool guidance (the
    environment, the tool names and the project instructions stay), ``None``: none.
    """

    roots: tuple[str, ...]
    os_name: str
    shell: str
    date: str
    tool_names: tuple[str, ...] = field(default=())
    mode: str | None = None
    sandboxed: bool | None = None
    instructions: tuple[dict[str, Any], ...] = field(default=())
    client: tuple[str, str] | None = None


CLIENT_HEAD = "# Instructions from the client"
"""The heading of a client's ``append`` system prompt (in the system text, or in a note)."""


def mode_line(mode: str) -> str:
    """The system text's line about the mode (also a note's, when the mode changed)."""
    return f"- Mode: {MODE_TEXT.get(mode, mode)}"


def sandbox_line(sandboxed: bool) -> str:
    """The system text's line about the shell's sandbox."""
    return ("- Shell commands run under an OS sandbox (writes confined to the workspace)."
            if sandboxed else "- Shell commands are not sandboxed; risky ones need the user's approval.")


NOTE_HEAD = ("The session's settings changed. What follows supersedes what the system message says about "
             "them (the rest of it still holds):")


def render_note(*, mode: str | None = None, sandboxed: bool | None = None, model: tuple[str, str] | None = None,
                instructions: tuple[dict[str, Any], ...] | None = None, client: str | None = None) -> str:
    """The text of a ``header/note``: what changed since the system message (or the last note)
    was written, stated so that it supersedes it. ``None`` for what did not change; ``model`` is
    ``(before, now)``; ``instructions`` the ``project/instructions`` records now (``()``: none);
    ``client``: the client's ``append`` system prompt now (it replaces the earlier one)."""
    lines = [NOTE_HEAD]
    if mode is not None:
        lines.append(mode_line(mode))
    if sandboxed is not None:
        lines.append(sandbox_line(sandboxed))
    if model is not None:
        lines.append(f"- Model: the requests of this session now go to {model[1]} (before: {model[0]}).")
    if instructions is not None:
        if instructions:
            lines.append("- Project instructions: they changed; the ones below replace the system message's "
                         "project instructions.")
        else:
            lines.append("- Project instructions: there are none any more (the AGENTS.md files are gone); "
                         "disregard the system message's project instructions.")
    if client is not None:
        lines.append("- Instructions from the client: they changed; the ones below replace the earlier "
                     "instructions from the client.")
    text = "\n".join(lines) + "\n"
    section = render_instructions(instructions or ())
    text += "\n" + section if section else ""
    return text + (f"\n{CLIENT_HEAD}\n{client}\n" if client is not None else "")


def render_system_prompt(env: PromptEnvironment) -> str:
    """Render the system text for ``env`` (pure; same input, same bytes)."""
    override = env.client is not None and env.client[0] == "override"
    lines = [env.client[1] if override and env.client is not None else PERSONA, "", "# Environment"]
    lines.append(f"- Working directory (first workspace root): {env.roots[0]}" if env.roots else "- No workspace root")
    for root in env.roots[1:]:
        lines.append(f"- Additional workspace root: {root}")
    lines.append(f"- Operating system: {env.os_name}")
    lines.append(f"- Shell: {env.shell}")
    lines.append(f"- Today's date: {env.date}")
    if env.mode is not None:
        lines.append(mode_line(env.mode))
    if env.sandboxed is not None:
        lines.append(sandbox_line(env.sandboxed))
    lines.append("")
    if env.tool_names:
        lines.append("# Tools")
        lines.append("You can call these tools: " + ", ".join(env.tool_names) + ".")
        if not override:
            lines.append("")
            lines.append(TOOL_GUIDANCE)
    else:
        lines.append("# Tools")
        lines.append("No tools are available in this session: answer from the conversation alone.")
    text = "\n".join(lines) + "\n"
    section = render_instructions(env.instructions)
    text += "\n" + section if section else ""
    if env.client is not None and not override:
        text += f"\n{CLIENT_HEAD}\n{env.client[1]}\n"
    return text
