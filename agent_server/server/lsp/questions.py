"""Permission questions as ``window/showMessageRequest`` (PROTOCOL.md "The LSP surface").

Role: ``MessageRequestApprover`` is a session's ``Approver`` in an LSP editor: it shows the
question (with the diff or command it is about) and its actions — "Allow once", "Allow always",
"Reject", or the names the question gives its options ("Take the checkpoint") — to **every**
client (eglot answers the request without advertising the optional ``window.showMessage`` capability), and turns what comes back into a policy ``Answer``. While it
waits, the question is also in ``waiting`` (the front end offers it as code actions and takes
``agentServer.answer``): the first answer wins, the other way is withdrawn. No answer (the user
dismissed the message: ``null``) is ``cancelled``; nothing within ``[policy] approval_timeout`` is
``timeout`` (the request is then cancelled with ``$/cancelRequest``); an editor that cannot show
the message (an error answer: Helix) leaves the code actions, and without an answer there it is
``unavailable`` naming the editor's error.

Must never: turn anything but a chosen allow action into an allow; ask about a text the user
cannot see whole.

The message shows the whole question (issue 32 §6: a command's tail after 4,200 spaces ran unseen
when the text was cut at 4,000 characters): ``visible`` turns long runs of whitespace into a marker
(``⟨4,200 spaces⟩``) and escapes control and format characters (a bidi override, an escape
sequence); a text that still does not fit a message (``MAX_SHOWN``) is written whole into the
session's transcript document and the message says where; when neither can show it the answer is
``unavailable`` with the reason (a denial).
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from agent_server.policy.approvals import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, Answer, Ask

log = logging.getLogger("agent_server.lsp")

ACTIONS = {"Allow once": ALLOW_ONCE, "Allow always": ALLOW_ALWAYS, "Reject": REJECT_ONCE}
"""Action titles shown → the policy option each one selects."""

MAX_SHOWN = 4000
"""Characters a question's message may have (editors show messages unscrolled); a longer one goes
into the transcript document."""
RUN_MARK = 32
"""Whitespace runs at least this long are shown as a marker (``⟨4,200 spaces⟩``)."""

_RUN = re.compile(r"\s{%d,}" % RUN_MARK)
_NAMES = {" ": "spaces", "\t": "tabs", "\n": "line breaks", "\r": "carriage returns"}


def _marker(match: re.Match[str]) -> str:
    run = match.group(0)
    kinds = set(run)
    name = _NAMES.get(run[0], "whitespace characters") if len(kinds) == 1 else "whitespace characters"
    return f"⟨{len(run):,} {name}⟩"


def _escape(ch: str) -> str:
    if ch in "\n\t":
        return ch
    if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs"):  # control, format (bidi), separators
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    return ch


def visible(text: str) -> str:
    """``text`` as it can be seen whole: runs of ``RUN_MARK`` or more whitespace characters as a
    marker naming their length, control and format characters as escapes (``\\x1b``, ``\\u202e``)."""
    text = _RUN.sub(_marker, text)
    return "".join(_escape(ch) for ch in text) if any(_escape(ch) != ch for ch in text) else text


def question_text(question: Ask) -> str:
    """The message of ``question``: its title, then the diff (``-``/``+`` lines) or command text,
    made ``visible`` and never cut (see ``message_for``)."""
    parts = [f"agent-server asks: {question.title}"]
    for item in question.content:
        if item.get("type") == "diff":
            old = (item.get("oldText") or "").splitlines()
            new = (item.get("newText") or "").splitlines()
            diff = difflib.unified_diff(old, new, item.get("path", ""), item.get("path", ""), lineterm="", n=1)
            parts.append("\n".join(diff))
        elif item.get("type") == "content" and isinstance(item.get("content"), dict):
            parts.append(str(item["content"].get("text", "")))
    return visible("\n\n".join(p for p in parts if p))


def message_for(question: Ask, transcript: Path | None) -> tuple[str | None, str]:
    """``(message, why)``: the question's whole text when it fits ``MAX_SHOWN``; else a short message
    pointing at ``transcript``, where the whole text was appended; else ``(None, why not)``."""
    text = question_text(question)
    if len(text) <= MAX_SHOWN:
        return text, ""
    if transcript is None:
        return None, f"the question ({len(text):,} characters) does not fit the editor's message and there is no transcript to write it to"
    try:
        transcript.parent.mkdir(parents=True, exist_ok=True)
        with open(transcript, "a", encoding="utf-8") as fh:
            fh.write(f"\n## Question: {visible(question.title)}\n\n````text\n{text}\n````\n")
    except OSError as exc:
        return None, (f"the question ({len(text):,} characters) does not fit the editor's message and could not be "
                      f"written to the transcript ({exc.strerror or exc})")
    title = visible(question.title)
    if len(title) > 300:
        title = title[:300] + "…"
    return (f"agent-server asks: {title}\n\nThe whole text ({len(text):,} characters) is too long for this message: "
            f"it is in the transcript, {transcript} (its last section). Read it there before you answer."), ""


def actions_for(question: Ask) -> dict[str, str]:
    """The actions ``question`` offers, title → option, in its order: an option it names (``/undo``'s
    "Undo the agent's change, keep the rest", "Take the checkpoint", "Keep mine") by that name, the
    others by their ``ACTIONS`` title."""
    names = dict(question.names)
    titles = {option: title for title, option in ACTIONS.items()}
    return {names.get(o) or titles[o]: o for o in question.options if o in names or o in titles}


class Waiting:
    """A question waiting for the user: its id, the question, the actions offered (title → option)
    and the future an ``agentServer.answer`` resolves with an action's title."""

    def __init__(self, qid: str, question: Ask, actions: dict[str, str]) -> None:
        self.id = qid
        self.question = question
        self.actions = actions
        self.offered = list(actions)
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()


class MessageRequestApprover:
    """The ``Approver`` of one session over a pygls ``LanguageServer``.

    ``server``: the language server (its protocol sends the request); ``timeout``: returns the
    seconds to wait; ``waiting``: the front end's questions waiting for an answer (by id).
    """

    def __init__(self, server: Any, timeout: Callable[[], float], waiting: dict[str, Waiting] | None = None,
                 transcript: Callable[[], Path | None] | None = None) -> None:
        self.server = server
        self._timeout = timeout
        self.waiting = waiting if waiting is not None else {}
        self._transcript = transcript or (lambda: None)

    async def ask(self, question: Ask) -> Answer:
        """Ask the user; see the module docstring for every way this ends."""
        actions = actions_for(question)
        offered = list(actions)
        message, why = message_for(question, self._transcript())
        if message is None:  # nothing can show it whole: not asked, denied with the reason
            return Answer("unavailable", detail=why)
        params = types.ShowMessageRequestParams(type=types.MessageType.Warning, message=message,
                                                actions=[types.MessageActionItem(title=t) for t in offered])
        msg_id = f"agent-server-ask-{uuid.uuid4().hex[:12]}"
        timeout = self._timeout()
        waiting = self.waiting[msg_id] = Waiting(msg_id, question, actions)
        try:
            try:
                future = self.server.protocol.send_request_async(types.WINDOW_SHOW_MESSAGE_REQUEST, params,
                                                                 msg_id=msg_id)
            except Exception as exc:  # the transport is gone
                return Answer("unavailable", detail=f"the question could not be sent ({exc})")
            return await self._first_answer(future, waiting, msg_id, timeout)
        finally:
            self.waiting.pop(msg_id, None)

    async def _first_answer(self, future: Any, waiting: Waiting, msg_id: str, timeout: float) -> Answer:
        message = asyncio.ensure_future(future)
        editor_error: str | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pending: set[asyncio.Future[Any]] = {message, waiting.answer}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break
                if waiting.answer in done:  # agentServer.answer (a code action) came first
                    self._cancel(msg_id)
                    return Answer("selected", option=waiting.actions[waiting.answer.result()])
                try:
                    result = message.result()
                except Exception as exc:  # an error response: the editor cannot show it (Helix)
                    editor_error = str(exc) or type(exc).__name__
                    log.info("the editor could not show the question (%s): it waits as code actions", editor_error)
                    continue
                if result is None:
                    return Answer("cancelled", detail="the user dismissed the question without choosing")
                title = getattr(result, "title", None)
                if title not in waiting.offered:
                    return Answer("unknown_option", detail=f"action {title!r} was not offered")
                return Answer("selected", option=waiting.actions[title])
        except asyncio.CancelledError:
            self._cancel(msg_id)
            raise
        finally:
            message.cancel()
        self._cancel(msg_id)
        if editor_error is not None:
            return Answer("unavailable", detail=f"the editor could not show the question ({editor_error}) and it "
                                                f"was not answered with its code actions within {timeout:g} s")
        return Answer("timeout", detail=f"no answer within {timeout:g} s")

    def _cancel(self, msg_id: str) -> None:
        try:
            self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        except Exception:  # best effort: the client may be gone
            log.debug("could not cancel %s", msg_id, exc_info=True)
