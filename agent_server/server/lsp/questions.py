"""Permission questions as ``window/showMessageRequest`` (PROTOCOL.md "The LSP surface").

Role: ``MessageRequestApprover`` is a session's ``Approver`` in an LSP editor: it shows the
question (with the diff or command it is about) and three actions — "Allow once", "Allow always",
"Reject" — and turns what comes back into a policy ``Answer``. No answer (the user dismissed the
message: ``null``) is ``cancelled``; no answer within ``[policy] approval_timeout`` is ``timeout``
(the request is then cancelled with ``$/cancelRequest``); a client without
``window.showMessage`` support, or gone, is ``unavailable``; an error response is ``error``. Each
denies, and the policy tells the model which.

Must never: turn anything but a chosen allow action into an allow.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import uuid
from typing import Any, Callable

from lsprotocol import types

from agent_server.policy.approvals import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, Answer, Ask

log = logging.getLogger("agent_server.lsp")

ACTIONS = {"Allow once": ALLOW_ONCE, "Allow always": ALLOW_ALWAYS, "Reject": REJECT_ONCE}
"""Action titles shown → the policy option each one selects."""

MAX_SHOWN = 4000
"""Characters of a diff or command shown in the question (editors show messages unscrolled)."""


def question_text(question: Ask) -> str:
    """The message of ``question``: its title, then the diff (``-``/``+`` lines) or command text."""
    parts = [f"agent-server asks: {question.title}"]
    for item in question.content:
        if item.get("type") == "diff":
            old = (item.get("oldText") or "").splitlines()
            new = (item.get("newText") or "").splitlines()
            diff = difflib.unified_diff(old, new, item.get("path", ""), item.get("path", ""), lineterm="", n=1)
            parts.append("\n".join(diff))
        elif item.get("type") == "content" and isinstance(item.get("content"), dict):
            parts.append(str(item["content"].get("text", "")))
    text = "\n\n".join(p for p in parts if p)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "\n…"


class MessageRequestApprover:
    """The ``Approver`` of one session over a pygls ``LanguageServer``.

    ``server``: the language server (its protocol sends the request); ``supported``: returns
    whether the client can show message requests; ``timeout``: returns the seconds to wait.
    """

    def __init__(self, server: Any, supported: Callable[[], bool], timeout: Callable[[], float]) -> None:
        self.server = server
        self._supported = supported
        self._timeout = timeout

    async def ask(self, question: Ask) -> Answer:
        """Ask the user; see the module docstring for every way this ends."""
        if not self._supported():
            return Answer("unavailable", detail="the editor does not support window/showMessageRequest")
        offered = [title for title, option in ACTIONS.items() if option in question.options]
        params = types.ShowMessageRequestParams(type=types.MessageType.Warning, message=question_text(question),
                                                actions=[types.MessageActionItem(title=t) for t in offered])
        msg_id = f"agent-server-ask-{uuid.uuid4().hex[:12]}"
        timeout = self._timeout()
        try:
            future = self.server.protocol.send_request_async(types.WINDOW_SHOW_MESSAGE_REQUEST, params, msg_id=msg_id)
        except Exception as exc:  # the transport is gone
            return Answer("unavailable", detail=f"the question could not be sent ({exc})")
        try:
            result = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            self._cancel(msg_id)
            return Answer("timeout", detail=f"no answer within {timeout:g} s")
        except asyncio.CancelledError:
            self._cancel(msg_id)
            raise
        except Exception as exc:  # an error response
            return Answer("error", detail=str(exc) or type(exc).__name__)
        if result is None:
            return Answer("cancelled", detail="the user dismissed the question without choosing")
        title = getattr(result, "title", None)
        if title not in offered:
            return Answer("unknown_option", detail=f"action {title!r} was not offered")
        return Answer("selected", option=ACTIONS[title])

    def _cancel(self, msg_id: str) -> None:
        try:
            self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        except Exception:  # best effort: the client may be gone
            log.debug("could not cancel %s", msg_id, exc_info=True)
