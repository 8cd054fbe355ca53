"""The ``plan`` tool: the model publishes its task list; the editor shows it (ACP ``plan``).

Role: validate the full list of entries the model sends and hand the editor an ACP ``plan``
session update with exactly those entries (every call replaces the whole plan, as ACP says).

Must never: keep plan state of its own — the plan is in the logged call and its result; the last
``plan`` call in the log is the current plan.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import Tool, ToolArgs, ToolContext, ToolResult


class PlanEntry(BaseModel):
    """One task: ``content`` (what to do), ``status``, ``priority``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    content: str = Field(min_length=1, description="The task, in one short sentence.")
    status: Literal["pending", "in_progress", "completed"] = Field(description="Where the task stands.")
    priority: Literal["high", "medium", "low"] = Field(default="medium", description="How important it is.")


class PlanArgs(ToolArgs):
    """Arguments of ``plan``: the complete, ordered list of entries."""

    entries: list[PlanEntry] = Field(description="The whole plan, in order; it replaces the previous one.")


class PlanTool(Tool):
    """``plan(entries)``."""

    name = "plan"
    description = (
        "Publish your plan for a multi-step task as a list of entries, each with `content`, "
        "`status` (pending, in_progress, completed) and optional `priority`. Send the whole list "
        "every time something changes; the user sees it in the editor. Skip it for simple tasks."
    )
    Args = PlanArgs
    kind = "think"
    concurrency_safe = False
    default_timeout = 5.0

    def title(self, args: PlanArgs, ctx: ToolContext) -> str:
        done = sum(1 for e in args.entries if e.status == "completed")
        return f"Plan: {done}/{len(args.entries)} done"

    async def execute(self, args: PlanArgs, ctx: ToolContext) -> ToolResult:
        entries: list[dict[str, Any]] = [e.model_dump() for e in args.entries]
        lines = [f"- [{e['status']}] {e['content']}" for e in entries]
        return ToolResult(
            "Plan updated:\n" + "\n".join(lines) if lines else "Plan cleared.",
            updates=[{"sessionUpdate": "plan", "entries": entries}],
            meta={"entries": len(entries)},
        )
