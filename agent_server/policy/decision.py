"""What a guard sees and what it may answer.

Role: the contract between the tool pipeline and policy: a guard gets a read-only view of a
prepared call and returns ``None`` (allow) or a ``Denial`` whose reason the model is shown. Before
a guard asks the user, it may await the call's ``precondition()`` (when the view has one): the tool's
own error for a call that cannot succeed, which then becomes the call's result unasked.

Must never: offer a way to change the call — there is no "allow with these arguments".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol


@dataclass(frozen=True)
class Denial:
    """A guard's refusal: ``reason`` becomes the call's (error) result for the model — or, when
    set, ``result`` (the tool's own error from its precondition, kept as the tool made it)."""

    reason: str
    result: Any = None


class CallView(Protocol):
    """The read-only view of a prepared call (``tools.pipeline.PreparedCall`` fits).

    ``tool``: the tool (has ``name``, ``kind``) or ``None``; ``args``: validated arguments or
    ``None``; ``raw_arguments``: the model's JSON text; ``tool_call_id``: the editor's id of the
    call (what a permission request refers to).
    """

    @property
    def call_id(self) -> str: ...

    @property
    def tool_call_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def raw_arguments(self) -> str: ...

    @property
    def tool(self) -> Any: ...

    @property
    def args(self) -> Any: ...


Guard = Callable[[CallView], Awaitable["Denial | None"]]
"""A pre-execute check: ``None`` lets the call through, a ``Denial`` stops it."""
