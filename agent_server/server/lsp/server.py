"""The language server: ``initialize``, document sync, code actions and the ``agentServer.*`` commands.

Role: ``LspFrontend`` is the host's ``Frontend`` in an LSP editor and builds the pygls
``LanguageServer`` (``build_server``): incremental text sync (pygls keeps the documents;
``documents.SyncedDocuments`` wakes edits waiting for a sync), the negotiated ``positionEncoding``,
code actions on a range or a diagnostic ("Agent: fix this diagnostic", "Agent: explain", "Agent:
add tests for this", resolved lazily when the client can), and the commands
``agentServer.ask {uri, range, prompt}`` (one turn in the workspace folder's session, answered when
it ends), ``agentServer.newSession``, ``agentServer.cancel`` and ``agentServer.commands`` (the slash
commands, to complete a prompt). One session per workspace folder.

Must never: keep session state beyond which session serves which folder (the host owns the
sessions), or answer ``agentServer.ask`` before the turn has ended.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import itertools
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote, urlsplit

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from agent_server import __version__
from agent_server.server.lsp.documents import LspFiles, SyncedDocuments, client_line_breaks, synced_text_document
from agent_server.server.lsp.initialize import (
    ANSWER,
    ASK,
    CANCEL,
    CODE_ACTION_KINDS,
    COMMANDS,
    NEW_SESSION,
    SLASH_COMMANDS,
)
from agent_server.server.lsp.questions import MessageRequestApprover, Waiting
from agent_server.server.lsp.turns import TurnProgress

if TYPE_CHECKING:
    from agent_server.host import SessionHost

log = logging.getLogger("agent_server.lsp")

ACTIONS = {
    "fix": ("Agent: fix this diagnostic", types.CodeActionKind.QuickFix),
    "problem": ("Agent: fix this problem", types.CodeActionKind.QuickFix),
    "explain": ("Agent: explain", types.CodeActionKind.Empty),
    "tests": ("Agent: add tests for this", types.CodeActionKind.Empty),
}

_WORK_DONE_TOKEN: contextvars.ContextVar[Any] = contextvars.ContextVar("work_done_token", default=None)

IDLE_BEFORE_LOADING = 0.05
"""Seconds without a message from the editor, after ``initialized``, before the host's modules
load in a thread (``LspFrontend.host``)."""


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, keeping ``workspace/executeCommand``'s ``workDoneToken`` for the command,
    telling ``on_cancel_request`` about every ``$/cancelRequest`` (pygls answers a cancelled
    command at once, but does not stop the coroutine running it), and dropping its own answer to
    the ``initialize`` that ``initialize.answer_initialize`` answered already (``answered``: its id,
    the result sent and the params; an answer of pygls' that differs is logged: the editor has the
    other)."""

    on_cancel_request: Any = None
    answered: tuple[Any, dict[str, Any] | None, dict[str, Any]] | None = None
    last_message = 0.0
    """``time.monotonic()`` when the editor's last message arrived."""
    _read_answered = False

    def handle_message(self, message: Any) -> None:
        self.last_message = time.monotonic()
        if self.answered is not None and not self._read_answered:
            if getattr(message, "id", None) == self.answered[0] and getattr(message, "method", None) == types.INITIALIZE:
                self._read_answered = True  # the first message pygls reads: the answered initialize
            else:
                self._initialize_anyway()
        super().handle_message(message)

    def _initialize_anyway(self) -> None:
        """pygls could not read the ``initialize`` the editor has its answer to (a field of another
        type than LSP's, which pygls only logs): set up from what it can read — the answered
        position encoding, the root and the workspace folders."""
        request_id, sent, params = self.answered
        log.error("pygls could not read the editor's initialize params; serving with their root, folders and "
                  "position encoding only")
        reduced: dict[str, Any] = {"capabilities": {"general": {"positionEncodings": [
            sent["capabilities"]["positionEncoding"]]}}}
        given = params.get("capabilities")
        if isinstance(given, dict) and isinstance(given.get("experimental"), dict):  # how it counts lines
            reduced["capabilities"]["experimental"] = given["experimental"]
        for key in ("rootUri", "rootPath", "workspaceFolders", "clientInfo"):
            try:  # each kept if pygls reads it
                self._converter.structure({**reduced, key: params.get(key)}, types.InitializeParams)
                reduced[key] = params.get(key)
            except Exception:  # noqa: BLE001 — cattrs' errors vary: leave the field out
                pass
        self.answered, self._read_answered = (request_id, None, params), True  # its answer dropped, not compared
        super().handle_message(self._converter.structure(
            {"jsonrpc": "2.0", "id": request_id, "method": types.INITIALIZE, "params": reduced}, types.InitializeRequest))

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if self.answered is None or msg_id != self.answered[0]:
            return super()._send_response(msg_id, result, error)
        sent, self.answered = self.answered[1], None
        own = self._converter.unstructure(error if error is not None else result)
        if sent is not None and (error is not None or own != sent):
            log.error("pygls answers initialize with %s where the fast path sent %s", own, sent)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams):
        _WORK_DONE_TOKEN.set(params.work_done_token)
        return (yield from super().lsp_workspace__execute_command(params))

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if self.on_cancel_request is not None:
            self.on_cancel_request(msg_id)
        super()._handle_cancel_notification(msg_id)


class _AskTicket:
    """What cancels one ``agentServer.ask``: its turn's ``PromptTicket`` (``turn``), and while a slash
    command runs (``commanding``), the session's command (``/compact`` runs long)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.turn = session.new_ticket()
        self.commanding = True

    def cancel(self) -> None:
        self.turn.cancel()
        if self.commanding:
            self.session.cancel()


def uri_path(uri: str) -> Path:
    """The absolute path of a ``file:`` URI; ``ValueError`` for another scheme."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise ValueError(f"not a file URI: {uri}")
    return Path(unquote(parts.path))


class LspFrontend:
    """The LSP front end over the session host ``make_host()`` makes (``host``); ``server`` is its
    pygls ``LanguageServer``. ``preload`` imports what ``make_host`` needs."""

    def __init__(self, make_host: Callable[[], SessionHost], preload: Callable[[], None] | None = None) -> None:
        self._make_host = make_host
        self._host: SessionHost | None = None
        self._preload = preload
        self._preloaded: threading.Event | None = None
        self.server = LanguageServer("agent-server", __version__, protocol_cls=_Protocol,
                                     text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents = SyncedDocuments(lambda: self.server.workspace)
        self.line_breaks = "lsp"
        """How the client counts lines (``documents.client_line_breaks``), set at ``initialize``."""
        self.folder_sessions: dict[str, str] = {}
        self.turns: dict[str, TurnProgress] = {}
        self.tickets: dict[str, Any] = {}
        self.requests: dict[Any, Any] = {}  # agentServer.ask request id -> its turn's ticket
        self.locks: dict[str, asyncio.Lock] = {}
        self.withdrawn: set[Any] = set()
        self.waiting: dict[str, Waiting] = {}  # permission questions waiting for the user, by id
        self.server.protocol.on_cancel_request = self._cancel_request
        self._tokens = itertools.count(1)
        self._warming: set[asyncio.Task[Any]] = set()
        self._register()

    # -- the host, made when first needed ---------------------------------------------------------

    @property
    def host(self) -> SessionHost:
        """The session host, made on first use (a command): code actions never wait for its
        modules (the agent, its tools, pydantic, httpx), which ``preload`` loads in a thread once
        the editor is idle after ``initialized``; a command that comes first waits for them."""
        if self._host is None:
            if self._preloaded is not None:
                self._preloaded.wait()  # the thread's imports end first: never two threads on one module
            self._host = self._make_host()
            self._host.attach(self)
        return self._host

    def on_initialize(self, params: types.InitializeParams) -> None:
        """``initialize`` (pygls made the workspace): lines are counted as this client counts them
        (its ``experimental.agentServer.lineBreaks``, else its name: ``client_line_breaks``), in the
        documents it syncs and the edits sent to it."""
        info = params.client_info
        self.line_breaks = client_line_breaks(info.name if info is not None else None,
                                              params.capabilities.experimental)
        workspace = self.server.workspace
        document = synced_text_document(lambda: self.line_breaks, lambda: self.encoding)

        def create(doc_uri: str, source: str | None = None, version: int | None = None,
                   language_id: str | None = None) -> Any:
            return document(doc_uri, source=source, version=version, language_id=language_id,
                            sync_kind=workspace._sync_kind, position_codec=workspace._position_codec)
        workspace._create_text_document = create

    async def initialized(self, params: Any) -> None:
        """``initialized``: load the host's modules in a thread once the editor is idle, then warm
        what the first ``agentServer.ask`` would make on its way to the model (``SessionHost.warm``
        before any session: the endpoint's client and its first connection, opened ahead)."""
        if self._preload is None or self._preloaded is not None:
            return
        protocol = self.server.protocol
        while (left := protocol.last_message + IDLE_BEFORE_LOADING - time.monotonic()) > 0:
            await asyncio.sleep(left)
        if self._host is None and self._preloaded is None and not protocol._shutdown:
            self._preloaded = threading.Event()
            loop = asyncio.get_running_loop()
            # not a daemon: an editor that exits meanwhile lets the imports end (a fraction of a second) rather than
            # have the interpreter finalised under a thread in the middle of one
            threading.Thread(target=self._load, args=(loop,), name="agent-server-imports").start()

    def _load(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._preload()
        except BaseException:  # noqa: BLE001 — make_host imports them again and meets the error itself
            pass
        finally:
            self._preloaded.set()
            try:
                loop.call_soon_threadsafe(self._warm, None)
            except RuntimeError:  # the loop is closed: the editor went away
                pass

    def _warm(self, session_id: str | None) -> None:
        """Warm, in a task, what the first prompt of ``session_id`` (``None``: the first session's,
        before it is made) would make on its way to the model — ``SessionHost.warm``, as the ACP
        front end does after ``session/new``; nothing once ``shutdown`` came."""
        if self.server.protocol._shutdown:
            return

        async def warm() -> None:
            try:
                await self.host.warm(session_id)
            except Exception:  # noqa: BLE001 — only a head start: the prompt meets the error itself
                log.debug("warming the first prompt's way to the model failed", exc_info=True)

        task = asyncio.ensure_future(warm())
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    # -- capabilities -----------------------------------------------------------------------------

    def _caps(self, dotted: str) -> Any:
        value: Any = self.server.client_capabilities
        for part in dotted.split("."):
            value = getattr(value, part, None) if value is not None else None
        return value

    @property
    def encoding(self) -> str:
        """The negotiated position encoding (``utf-16``, ``utf-8`` or ``utf-32``; pygls' default is
        a ``PositionEncodingKind``, whose ``str()`` is its member name)."""
        encoding = self.server.workspace.position_encoding or "utf-16"
        return str(getattr(encoding, "value", encoding))

    def annotations_supported(self) -> bool:
        """Whether the client takes change annotations (it can ask before applying a hunk)."""
        return self._caps("workspace.workspace_edit.change_annotation_support") is not None

    # -- the host's Frontend ----------------------------------------------------------------------

    def emitter(self, session_id: str):
        """The session's events go to its running turn's progress (none: not shown)."""
        async def emit(update: dict[str, Any]) -> None:
            turn = self.turns.get(session_id)
            if turn is not None:
                await turn.on_update(update)

        return emit

    def files(self, session_id: str, emit: Any) -> LspFiles:
        """Reads from synced documents, edits through ``workspace/applyEdit``."""
        return LspFiles(self.documents, self._apply_edit, encoding=lambda: self.encoding,
                        annotations=self.annotations_supported,
                        approval_timeout=lambda: self.host.config.policy.approval_timeout,
                        line_breaks=lambda: self.line_breaks)

    def approver(self, session_id: str) -> MessageRequestApprover:
        """Permission questions as ``window/showMessageRequest``."""
        def transcript() -> Any:  # the session's transcript document (turns.py): where a long question goes
            session = self.host.sessions.get(session_id)
            return session.log.path.parent / "transcript.md" if session is not None else None

        return MessageRequestApprover(self.server, lambda: self.host.config.policy.approval_timeout, self.waiting,
                                      transcript)

    def edits_need_approval(self) -> bool:
        """A client without change annotations applies edits at once: ask first."""
        return not self.annotations_supported()

    def terminal_output(self) -> str | None:
        """LSP has no terminal convention: shell output shows in the result only."""
        return None

    async def _apply_edit(self, edit: dict[str, Any], label: str) -> tuple[bool, str | None]:
        converter = self.server.protocol._converter
        params = types.ApplyWorkspaceEditParams(edit=converter.structure(edit, types.WorkspaceEdit), label=label)
        try:
            result = await self.server.workspace_apply_edit_async(params)
        except Exception as exc:  # an error response or a lost connection
            raise ConnectionError(str(exc) or type(exc).__name__) from None
        return bool(getattr(result, "applied", False)), getattr(result, "failure_reason", None)

    # -- features ---------------------------------------------------------------------------------

    def _register(self) -> None:
        server = self.server

        def on(feature: str, handler: Any, options: Any = None) -> None:
            async def call(*args: Any) -> Any:  # pygls marks the function it registers
                result = handler(*args)
                return await result if asyncio.iscoroutine(result) else result

            server.feature(feature, options)(call)

        for sync in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_CLOSE):
            on(sync, lambda params: self.documents.synced())
        on(types.TEXT_DOCUMENT_CODE_ACTION, self.code_actions, types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind(kind) for kind in CODE_ACTION_KINDS], resolve_provider=True))
        on(types.CODE_ACTION_RESOLVE, self.resolve_code_action)
        on(types.SHUTDOWN, self.shutdown)
        on(types.INITIALIZED, self.initialized)
        def on_initialize(params: types.InitializeParams) -> None:  # inside pygls' initialize, synchronously
            self.on_initialize(params)
        server.feature(types.INITIALIZE)(on_initialize)
        handlers = {ASK: self.ask, NEW_SESSION: self.new_session, CANCEL: self.cancel, ANSWER: self.answer,
                    SLASH_COMMANDS: self.slash_commands}
        for name in COMMANDS:
            server.command(name)(_command(handlers[name]))

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """The agent's actions on a range: a waiting permission question's answers first (for an
        editor that cannot show ``window/showMessageRequest``), one fix per diagnostic the client
        sent — "fix this problem" on a line without any (Neovim sends a server only its own) —,
        then explain and add tests."""
        uri, rng = params.text_document.uri, params.range
        lazy = "command" in (self._caps("text_document.code_action.resolve_support.properties") or [])
        out = self._question_actions()
        wanted = params.context.only
        fixes = [("fix", d) for d in params.context.diagnostics] or [("problem", None)]
        entries = [*fixes, ("explain", None), ("tests", None)]
        for action, diagnostic in entries:
            title, kind = ACTIONS[action]
            if wanted and not any(kind == w or (w and kind.startswith(w + ".")) for w in wanted):
                continue
            target = diagnostic.range if diagnostic is not None else rng
            data = {"uri": uri, "action": action, "range": self._unstructure(target),
                    "diagnostic": self._unstructure(diagnostic) if diagnostic is not None else None}
            code_action = types.CodeAction(title=title, kind=kind, data=data,
                                           diagnostics=[diagnostic] if diagnostic is not None else None)
            out.append(code_action if lazy else self.resolve_code_action(code_action))
        return out

    def _question_actions(self) -> list[types.CodeAction]:
        """"Agent: allow once — …" / "Agent: reject — …" for each question waiting for the user."""
        out = []
        for waiting in list(self.waiting.values()):
            title = " ".join(str(waiting.question.title).split())
            for action in waiting.offered:
                out.append(types.CodeAction(
                    title=f"Agent: {action.lower()} — {title}", kind=types.CodeActionKind.Empty,
                    command=types.Command(title=action, command=ANSWER,
                                          arguments=[{"id": waiting.id, "action": action}])))
        return out

    def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        """Fill in the command: ``agentServer.ask {uri, range, prompt}``."""
        data = action.data if isinstance(action.data, dict) else {}
        uri, rng = data.get("uri"), data.get("range")
        if not isinstance(uri, str) or not isinstance(rng, dict):
            return action
        action.command = types.Command(title=action.title, command=ASK,
                                       arguments=[{"uri": uri, "range": rng,
                                                   "prompt": self._action_prompt(data, uri, rng)}])
        return action

    def _action_prompt(self, data: dict[str, Any], uri: str, rng: dict[str, Any]) -> str:
        where = f"{self._relative(uri)} line {rng['start']['line'] + 1}"
        if rng["end"]["line"] != rng["start"]["line"]:
            where = f"{self._relative(uri)} lines {rng['start']['line'] + 1}-{rng['end']['line'] + 1}"
        if data.get("action") == "fix" and isinstance(data.get("diagnostic"), dict):
            d = data["diagnostic"]
            source = " ".join(str(x) for x in (d.get("source"), d.get("code")) if x)
            return (f"Fix this diagnostic in {where}: {d.get('message', '')}"
                    + (f" ({source})" if source else "") + ". Make the smallest change that fixes it.")
        if data.get("action") == "problem":
            return (f"Fix the problem in {where}: find what is wrong there (the diagnostics given, if any, "
                    "say what the tools found) and make the smallest change that fixes it.")
        if data.get("action") == "tests":
            return f"Add tests for the code in {where}, following the project's existing tests."
        return f"Explain the code in {where}: what it does and anything surprising."

    # -- commands ---------------------------------------------------------------------------------

    async def ask(self, *arguments):
        """``agentServer.ask {uri, range, prompt}``: one turn in the folder's session; answers
        ``{"sessionId", "stopReason", "transcript"}`` when it ends (``$/cancelRequest`` or the
        progress's cancel end it as ``cancelled``)."""
        arg = arguments[0] if arguments and isinstance(arguments[0], dict) else {}
        uri, prompt = arg.get("uri"), arg.get("prompt")
        if not isinstance(uri, str) or not isinstance(prompt, str) or not prompt.strip():
            raise JsonRpcInvalidParams("agentServer.ask takes one argument {uri, range?, prompt}: "
                                       "a file URI and a non-empty prompt")
        try:
            path = uri_path(uri)
        except ValueError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        session_id = await self._folder_session(path)
        request_id = self.server.protocol.msg_id
        async with self.locks.setdefault(session_id, asyncio.Lock()):  # one turn at a time, in order
            return await self._ask(session_id, uri, path, arg, prompt, request_id)

    async def _ask(self, session_id: str, uri: str, path: Path, arg: dict[str, Any], prompt: str,
                   request_id: Any) -> dict[str, Any]:
        if request_id is not None and request_id in self.withdrawn:
            self.withdrawn.discard(request_id)
            return {"sessionId": session_id, "stopReason": "cancelled"}
        from agent_server.host import HostError

        session = self.host.session(session_id)
        typed = [{"type": "text", "text": prompt}]  # what the user wrote: a slash command, or the turn's prompt
        context = [*self._selection(uri, path, arg.get("range")), *self._diagnostics(path, arg.get("diagnostics"))]
        n = sum(1 for e in session.log.events if e.type == "turn/start") + 1
        transcript = session.log.path.parent / "transcript.md"  # one per session, a section per turn
        token = _WORK_DONE_TOKEN.get()
        if token is None and self._caps("window.work_done_progress"):
            token = f"agent-server-turn-{next(self._tokens)}"
            try:
                await self.server.work_done_progress.create_async(token)
            except Exception:
                log.warning("the editor refused a work-done progress token", exc_info=True)
                token = None
        turn = self.turns[session_id] = TurnProgress(self.server, token, prompt, transcript, turn_number=n)
        ticket = _AskTicket(session)
        self.tickets[session_id] = self.requests[request_id] = ticket
        turn.begin("agent-server")
        cancelled = self.server.work_done_progress.tokens.get(token) if token is not None else None
        if cancelled is not None:
            cancelled.add_done_callback(lambda _f: ticket.cancel())

        async def run() -> Any:  # the host decides what the prompt is (host.dispatch), as ACP's prompt does
            try:
                dispatched = await self.host.dispatch(session, typed, context)
            finally:
                ticket.commanding = False
            if dispatched.reply is not None:
                turn.command = True
                return dispatched.reply
            return await self.host.turn(session, dispatched.blocks, ticket.turn)

        running = asyncio.ensure_future(run())
        interrupted = False
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:  # $/cancelRequest on this command
            interrupted = True
            ticket.cancel()
            await asyncio.wait([running])
        finally:
            self.turns.pop(session_id, None)
            self.tickets.pop(session_id, None)
            self.requests.pop(request_id, None)
            if token is not None:
                self.server.work_done_progress.tokens.pop(token, None)
        failure = running.exception()
        outcome = running.result() if failure is None else None
        if isinstance(outcome, dict):  # a command's answer
            stop, error = outcome["stopReason"], None
        else:
            stop = "failed" if outcome is None or outcome.error is not None else outcome.stop_reason
            error = outcome.error if outcome is not None else None
        turn.end(stop)
        transcript_path = turn.write_transcript(stop)
        await self._show(transcript_path, turn)
        if interrupted:
            raise asyncio.CancelledError
        if isinstance(failure, HostError):  # /mode with an unknown mode, an image it cannot take, a full disk
            raise (JsonRpcInvalidParams if failure.kind == "invalid" else JsonRpcInternalError)(failure.message) from None
        if failure is not None:
            raise failure
        if error is not None:
            raise RuntimeError(error.get("message", "the turn failed"))
        return {"sessionId": session_id, "stopReason": stop, "transcript": str(transcript_path)}

    async def answer(self, *arguments):
        """``agentServer.answer {id, action}``: answer a waiting permission question (its code
        action) with one of the actions it offered; answers ``{"answered": bool}``."""
        arg = arguments[0] if arguments and isinstance(arguments[0], dict) else {}
        waiting = self.waiting.get(arg.get("id")) if isinstance(arg.get("id"), str) else None
        if waiting is None or waiting.answer.done():
            return {"answered": False}
        if arg.get("action") not in waiting.offered:
            raise JsonRpcInvalidParams(f"agentServer.answer: the action must be one of {waiting.offered}")
        waiting.answer.set_result(arg["action"])
        return {"answered": True}

    async def slash_commands(self, *arguments):
        """``agentServer.commands``: the slash commands ``agentServer.ask`` runs, for an editor to
        complete its prompt with — ``{"commands": [{name, description, input?: {hint}}]}``, the list
        ACP's ``available_commands_update`` sends (``host.commands.COMMANDS``), in its order."""
        if self._preloaded is not None:  # the imports' thread first: never two threads on one module
            await asyncio.to_thread(self._preloaded.wait)
        from agent_server.host import commands

        return {"commands": copy.deepcopy(commands.COMMANDS)}

    async def new_session(self, *arguments):
        """``agentServer.newSession [{uri}]``: a fresh session for the folder of ``uri`` (default:
        the first workspace folder); answers ``{"sessionId"}``."""
        arg = arguments[0] if arguments and isinstance(arguments[0], dict) else {}
        folder = self._folder(uri_path(arg["uri"])) if isinstance(arg.get("uri"), str) else self._default_folder()
        session_id = await self._create(folder)
        self.folder_sessions[folder] = session_id
        self._warm(session_id)  # after the answer: its steps yield first
        return {"sessionId": session_id}

    async def cancel(self, *arguments):
        """``agentServer.cancel [{uri}]``: cancel the running turn of the folder of ``uri`` (every
        running turn without one); answers ``{"cancelled": n}``."""
        arg = arguments[0] if arguments and isinstance(arguments[0], dict) else {}
        targets = list(self.tickets)
        if isinstance(arg.get("uri"), str):
            session_id = self.folder_sessions.get(self._folder(uri_path(arg["uri"])))
            targets = [session_id] if session_id in self.tickets else []
        for session_id in targets:
            self.tickets[session_id].cancel()
        return {"cancelled": len(targets)}

    def _cancel_request(self, request_id: Any) -> None:
        """``$/cancelRequest`` on an ``agentServer.ask``: cancel its turn."""
        ticket = self.requests.get(request_id)
        if ticket is not None:
            ticket.cancel()
        else:  # still waiting for the session's running turn (or not ours): never start it
            self.withdrawn.add(request_id)

    async def shutdown(self, params: Any) -> None:
        """``shutdown``: cancel running turns, close the logs."""
        for task in list(self._warming):
            task.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        if self._host is not None:
            await self._host.aclose()

    # -- helpers ----------------------------------------------------------------------------------

    async def _show(self, transcript: Path, turn: TurnProgress) -> None:
        """Open the transcript (``window/showDocument``), else show the answer (``showMessage``)."""
        try:
            if self._caps("window.show_document.support"):
                await self.server.window_show_document_async(types.ShowDocumentParams(
                    uri=transcript.as_uri(), take_focus=False))
            else:
                self.server.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Info, message="".join(turn.answer).strip() or f"(no answer; {transcript})"))
        except Exception:
            log.warning("could not show the transcript %s", transcript, exc_info=True)

    def _selection(self, uri: str, path: Path, rng: Any) -> list[dict[str, Any]]:
        """The range's text as an embedded resource ``file:///…#L3-L9`` (synced text, else disk)."""
        if not isinstance(rng, dict):
            return []
        try:
            doc = self.server.workspace.get_text_document(uri)
            lines = doc.lines
            start, end = int(rng["start"]["line"]), int(rng["end"]["line"])
            if rng["end"].get("character", 0) == 0 and end > start:
                end -= 1
            text = "".join(lines[start:end + 1])
        except (OSError, KeyError, TypeError, ValueError):
            return []
        return [{"type": "resource", "resource": {"uri": f"{path.as_uri()}#L{start + 1}-L{end + 1}",
                                                  "text": text, "mimeType": "text/plain"}}]

    def _diagnostics(self, path: Path, diagnostics: Any) -> list[dict[str, Any]]:
        """``agentServer.ask``'s optional ``diagnostics`` (LSP ``Diagnostic``s of every source, as an
        editor or plugin collected them) as a text block: one line each."""
        if not isinstance(diagnostics, list) or not diagnostics:
            return []
        severities = {1: "error", 2: "warning", 3: "info", 4: "hint"}
        lines = []
        for d in diagnostics[:200]:
            if not isinstance(d, dict):
                continue
            start = (d.get("range") or {}).get("start") or {}
            line = int(start.get("line", 0)) + 1 if isinstance(start.get("line"), int) else "?"
            source = " ".join(str(x) for x in (d.get("source"), d.get("code")) if x)
            lines.append(f"- line {line}: {severities.get(d.get('severity'), 'problem')}: "
                         f"{' '.join(str(d.get('message', '')).split())}" + (f" ({source})" if source else ""))
        if not lines:
            return []
        return [{"type": "text", "text": f"Diagnostics of {path.name} (every source):\n" + "\n".join(lines)}]

    def _folders(self) -> list[str]:
        folders = [str(uri_path(f.uri)) for f in self.server.workspace.folders.values()
                   if f.uri.startswith("file:")]
        root = self.server.workspace.root_path
        return folders or ([root] if root else [])

    def _default_folder(self) -> str:
        folders = self._folders()
        if not folders:
            raise ValueError("no workspace folder: open a folder, or pass {uri}")
        return folders[0]

    def _folder(self, path: Path) -> str:
        """The innermost workspace folder holding ``path``; for a file outside every folder, the
        first folder (the file stays outside the session's roots: it may be read, not written).
        Raises ``ValueError`` when the editor opened no folder: a file's own folder (``$HOME``,
        ``/etc``) never becomes a workspace root the shell may write in."""
        folders = self._folders()
        inside = [f for f in folders if path == Path(f) or Path(f) in path.parents]
        if inside:
            return max(inside, key=len)
        if folders:
            return folders[0]
        raise ValueError(f"{path} is in no workspace folder: open the folder that holds it as the workspace")

    async def _folder_session(self, path: Path) -> str:
        folder = self._folder(path)
        session_id = self.folder_sessions.get(folder)
        if session_id is None or session_id not in self.host.sessions:
            session_id = self.folder_sessions[folder] = await self._create(folder)
        return session_id

    async def _create(self, folder: str) -> str:
        from agent_server.host import HostError

        try:
            return await self.host.create(os.path.abspath(folder))
        except HostError as exc:
            raise ValueError(exc.message) from None

    def _relative(self, uri: str) -> str:
        try:
            path = uri_path(uri)
        except ValueError:
            return uri
        folder = self._folder(path)
        return os.path.relpath(path, folder) if Path(folder) in path.parents else str(path)

    def _unstructure(self, value: Any) -> Any:
        return self.server.protocol._converter.unstructure(value)


def _command(handler: Any) -> Any:
    async def command(*arguments):  # no annotation: pygls passes the JSON arguments as they are
        return await handler(*arguments)

    return command


def build_server(make_host: Callable[[], SessionHost], preload: Callable[[], None] | None = None) -> LanguageServer:
    """The pygls ``LanguageServer`` of an ``LspFrontend`` over the host ``make_host()`` makes."""
    return LspFrontend(make_host, preload).server
