"""The system prompt: persona, environment and tool guidance rendered into one text.

Role: ``render_system_prompt(env)`` returns the system text, deterministically for equal input.
The agent logs it in ``request/header`` before any request carries it (invariant 9).

Must never: write to disk, read the clock or the environment on its own — everything it renders
comes in through ``PromptEnvironment``, so the logged text is the whole truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PERSONA = """You are agent-server, a coding agent working inside the user's editor.
Answer concisely and concretely. When you are not sure, say so; never invent file contents or
command output. Use the tools you are given to look before you change anything."""


@dataclass(frozen=True)
class PromptEnvironment:
    """What the system prompt states about where the agent runs.

    ``roots``: absolute workspace roots, the first is the working directory; ``os_name``,
    ``shell``: as shown to the model; ``date``: ISO date (YYYY-MM-DD); ``tool_names``: the tools
    this request offers (empty when none).
    """

    roots: tuple[str, ...]
    os_name: str
    shell: str
    date: str
    tool_names: tuple[str, ...] = field(default=())


def render_system_prompt(env: PromptEnvironment) -> str:
    """Render the system text for ``env`` (pure; same input, same bytes)."""
    lines = [PERSONA, "", "# Environment"]
    lines.append(f"- Working directory (first workspace root): {env.roots[0]}" if env.roots else "- No workspace root")
    for root in env.roots[1:]:
        lines.append(f"- Additional workspace root: {root}")
    lines.append(f"- Operating system: {env.os_name}")
    lines.append(f"- Shell: {env.shell}")
    lines.append(f"- Today's date: {env.date}")
    lines.append("")
    if env.tool_names:
        lines.append("# Tools")
        lines.append("You can call these tools: " + ", ".join(env.tool_names) + ".")
    else:
        lines.append("# Tools")
        lines.append("No tools are available in this session: answer from the conversation alone.")
    return "\n".join(lines) + "\n"
