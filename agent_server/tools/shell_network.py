"""A confined command cut off from the network, run again with it when the user allows (``[policy]
network = "ask"``).

Role: ``wants_network(launch, result)``: the command ran without the network and failed showing one
of the launch's ``network_markers`` (a host that does not resolve, a refused connection …);
``again_with_network`` then asks the user through the launch's ``network_retry`` (their time is not
the command's: ``awaiting_user``) and, allowed, runs the command a second time with the network and
returns that run's result, saying so; refused, the first run's result, saying that.

Must never: run a command again without the user's explicit allow, or hide that a result is a
second run (what the first run changed stays).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from .base import ToolResult
from .files import CURRENT_TOOL_CALL
from .user_wait import awaiting_user


def wants_network(launch: Any, result: ToolResult) -> bool:
    """Whether ``result`` (of ``launch``) is a failure for want of the network that may be asked about."""
    return (getattr(launch, "network_retry", None) is not None and result.meta.get("outcome") == "exited"
            and result.is_error and any(m in result.text for m in getattr(launch, "network_markers", ())))


async def again_with_network(launch: Any, first: ToolResult,
                             run: Callable[[Any], Awaitable[ToolResult]]) -> ToolResult:
    """Ask whether to run the command of ``launch`` again with the network; ``run(again)`` runs it."""
    again = None
    try:
        with awaiting_user():
            again = await launch.network_retry(CURRENT_TOOL_CALL.get(), first.text)
    except asyncio.CancelledError:  # the turn was cancelled meanwhile: not run again
        if (task := asyncio.current_task()) is not None:
            task.uncancel()
    if again is None or again.refuse:
        first.meta["network_retry"] = "refused"
        first.text += ("\n[sandbox] This command ran without the network (the sandbox cuts it off) and failed as "
                       "if it needed it. The user was asked to run it again with the network and did not allow "
                       "it. Do not try to reach the network another way; work offline, or ask the user.")
        return first
    second = await run(again)
    second.meta["network_retry"] = "allowed"
    second.meta["first_run"] = {k: first.meta.get(k) for k in ("exit_code", "outcome", "output_bytes", "seconds")}
    head = "\n".join(first.text.splitlines()[-5:])
    second.text = ("[sandbox] This command first ran without the network and failed as if it needed it (its last "
                   f"lines:\n{head}\n); the user allowed it to run again with the network — this is the second "
                   "run (whatever the first changed stays).\n" + second.text)
    return second
