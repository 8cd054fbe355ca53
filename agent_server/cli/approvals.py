"""Permission questions of a headless run (``agent-server run``), decided one by one.

Role: ``HeadlessServer`` is the ACP server of a headless run; each of its sessions gets a
``HeadlessApprover`` in front of the usual ``PermissionRequester``. Every question is judged on
its own: a kind the run's ``--allow`` grants is allowed by that grant (logged truthfully,
``decided_by: "flag: --allow shell"``, never ``"user"``); any other question goes to the terminal
when there is one, and without a terminal it is answered ``unavailable`` with a detail that names
the ``--allow`` that would allow it — or says that none does. A question whose terminal input ends
(stdin at end of file) is ``unavailable`` too, saying no answer could be read — never a
rejection "by the user" —, and so is every later one. No question is sent to the client
that it cannot answer, so one refusal never stands for the next question.

Must never: allow anything the flags do not grant, or let a refusal of one question answer another.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_server.cli.allow import no_terminal
from agent_server.policy.approvals import ALLOW_ONCE, Answer, Approver, Ask
from agent_server.server.acp.server import AcpServer


class HeadlessApprover:
    """``Approver``: the run's grants, then the terminal (``inner``), else ``unavailable``.

    ``grants``: ACP tool kind → the ``--allow`` name that grants it (``{"execute": "shell"}``);
    ``can_ask``: whether a terminal can be asked now.
    """

    def __init__(self, inner: Approver, grants: dict[str, str], can_ask: Callable[[], bool]) -> None:
        self.inner = inner
        self.grants = grants
        self.can_ask = can_ask

    async def ask(self, question: Ask) -> Answer:
        """The answer to ``question``: see the class docstring. Raises only ``CancelledError``."""
        flag = self.grants.get(question.kind)
        if flag is not None and ALLOW_ONCE in question.options:
            return Answer("selected", ALLOW_ONCE, detail=f"granted by --allow {flag}", by=f"flag: --allow {flag}")
        if not self.can_ask():
            return Answer("unavailable", detail=no_terminal(question.kind), headless=True)
        answer = await self.inner.ask(question)
        if answer.kind != "selected" and not self.can_ask():  # the terminal's input ended at the question
            return Answer("unavailable", detail="no terminal input: it ended at the question, so no answer could be read",
                          headless=True)
        return answer


class HeadlessServer(AcpServer):
    """The ACP server of a headless run: ``AcpServer`` whose sessions ask through a
    ``HeadlessApprover`` (``grants``, ``can_ask``: as there)."""

    def __init__(self, *args: Any, grants: dict[str, str], can_ask: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.grants = grants
        self.can_ask = can_ask

    def approver(self, session_id: str) -> Any:
        """The session's ``HeadlessApprover`` over the ACP ``PermissionRequester``."""
        return HeadlessApprover(super().approver(session_id), self.grants, self.can_ask)
