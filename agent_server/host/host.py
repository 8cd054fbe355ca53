"""The session host: live sessions over their logs, their policies, stored sessions, commands.

Role: ``SessionHost`` is what every front end (ACP, LSP) drives. It creates, loads, lists and
deletes sessions (``SessionStore``), builds each live ``AgentSession`` with its tools, policy and
request header, runs turns and slash commands, switches modes, and sends each session's updates
(ACP-shaped ``session/update`` payloads — the host's events) through the front end's emitter.
The front end (a ``Frontend``) supplies per session how updates leave, how workspace files are
read and written, and who answers permission questions.

Must never: speak a wire protocol (errors are ``HostError``), hold conversation state outside the
log, or emit a session's update before the front end has the session id.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import platform
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol, Sequence
from urllib.parse import unquote, urlsplit

from agent_server import llm
from agent_server.agent import AgentSession, RequestHeader, TurnFailed
from agent_server.agent.session import PromptTicket, TurnOutcome, log_write_failure
from agent_server.config import credentials
from agent_server.config.load import Config, ProviderSettings, default_config_path
from agent_server.agent.header import RENDER_INPUTS, context_data, header_note, kept_header
from agent_server.agent.ledger import LoggedReadLedger
from agent_server.checkpoints.blobs import BlobStore
from agent_server.checkpoints.recorder import Checkpoints, collect_blobs, prune_shadows, storage_text
from agent_server.host import commands, continuity, lifecycle, models, options, signin
from agent_server.host.gate import UpdateGate
from agent_server.host.undo import Restorer, checkpoints_report
from agent_server.host.errors import HostError, unknown_session
from agent_server.host.models_pool import ClientPool
from agent_server.host.policies import SessionPolicies
from agent_server.policy.approvals import Approver
from agent_server.policy.modes import ACCEPT_EDITS, DANGER_FULL_ACCESS, UnknownMode
from agent_server.policy.paths import CredentialStores, named_credentials, resolve
from agent_server.prompt import PromptEnvironment, render_system_prompt
from agent_server.prompt.instructions import InstructionsMemo
from agent_server.session import EventLog, LogBusyError, LogWriteError, ProjectionMemo, SessionStore
from agent_server.session.images import ImageError, ImageStore, check_image
from agent_server.config.views import session_header, session_state
from agent_server.tools import BUILTIN_TOOLS, DiskFiles, ToolContext, tool_schemas
from agent_server.tools.access import FileAccess, SecretRules
from agent_server.tools.child_env import split_environ
from agent_server.tools.files import CURRENT_TOOL_CALL
from agent_server.tools.pipeline import ToolRunner

log = logging.getLogger("agent_server.server")

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one ``session/update`` payload (``{"sessionUpdate": …}``) of a session to its front end."""


class Frontend(Protocol):
    """What a front end gives the host for each session it opens."""

    def emitter(self, session_id: str) -> Emit:
        """How the session's updates leave (dropped quietly when the peer is gone)."""

    # optional: ``batch_emitter(session_id)`` → ``async (updates: list) -> None``, several updates
    # sent as ``emitter`` would send them one by one, in one write (used by a replay)

    def files(self, session_id: str, emit: Emit) -> Any:
        """The session's workspace-file seam (``tools.Files``: the editor's buffers, or the disk)."""

    def approver(self, session_id: str) -> Approver:
        """Who answers the session's permission questions."""

    def edits_need_approval(self) -> bool:
        """Whether an edit must be asked about before it is written (no other review exists)."""

    def terminal_output(self) -> str | None:
        """The ``_meta`` key the editor wants a shell command's live output under
        (``terminal_output`` or ``terminal_output_delta``), or ``None`` for none."""


def _warm_imports() -> None:
    """In a worker thread: the network layer a first request imports, and the builtin tools'
    schemas (both once per process; an error is left for the first prompt to meet)."""
    try:
        from agent_server.llm import ChatClient

        ChatClient.preload()
        tool_schemas()
    except Exception:  # noqa: BLE001 — only a head start
        log.debug("warming the first prompt's imports failed", exc_info=True)


HEADER_INPUTS = ("request/header", "compaction/end", "model/changed", options.EVENT, "client/system_prompt",
                 *sorted(RENDER_INPUTS))
"""The event types whose newest one ``_request_header`` reads (``agent.header``, ``options``)."""


def _latest(log: Any, kind: str, default: dict[str, Any]) -> dict[str, Any]:
    """Data of the newest ``kind`` event of ``log`` (``default`` when there is none / no log)."""
    if log is None:
        return default
    latest = log.latest(kind)
    return default if latest is None else latest.data


class SessionHost:
    """The sessions of one process.

    ``config``: resolved settings (``config_error``: why loading it failed, reported on prompts;
    ``config_loader``: reads them again, see ``signin``); ``store``: where session logs go;
    ``frontend``: set with ``attach`` before opening sessions.
    """

    def __init__(self, config: Config, store: SessionStore, *, config_error: str | None = None,
                 config_loader: signin.ConfigLoader | None = None) -> None:
        self.config = config
        self.config_error = config_error
        self.config_loader = config_loader
        """Reads the config again (for a sign-in made after start-up); ``None``: never."""
        self.store = store
        self.sessions: dict[str, AgentSession] = {}
        self.unusable: dict[str, HostError] = {}
        """Sessions answered by the CLI's fast path that could not be made live: what their requests get."""
        self.policies = SessionPolicies(lambda: self.config.policy)
        self.pool = ClientPool(config.agent)
        self.frontend: Frontend | None = None
        self.restorers: dict[str, Restorer] = {}
        self.checkpoints: dict[str, Checkpoints] = {}
        self.tool_tables: dict[str, dict[str, Any]] = {}
        self.mcp: dict[str, Any] = {}  # session id → McpTools, only for sessions with MCP servers
        self.gates: dict[str, UpdateGate] = {}
        """Each live session's update gate (live updates wait while a load replays its history)."""
        self.boolean_options = False
        """Whether the front end's client takes ``type: "boolean"`` config options (else on/off selects)."""
        self.opening: dict[str, Any] = {}
        """Stored sessions being opened by a load or resume (``continuity.attach``): id → its task."""

    def attach(self, frontend: Frontend) -> None:
        """Set the front end whose emitter, files and approver new sessions get."""
        self.frontend = frontend

    async def aclose(self) -> None:
        """Cancel running and queued turns, close logs and HTTP clients."""
        sessions = list(self.sessions.values())
        for session in sessions:
            session.cancel()
        for session in sessions:
            await session.close()
        for servers in list(self.mcp.values()):
            await servers.close()
        await self.pool.aclose()
        await self.policies.aclose()

    # -- sessions -----------------------------------------------------------------------------

    def session(self, session_id: str) -> AgentSession:
        """The live session ``session_id``; ``HostError`` ``not_found`` otherwise."""
        session = self.sessions.get(session_id)
        if session is None:
            raise self.unusable.get(session_id) or unknown_session(session_id)
        return session

    def require_known(self, session_id: str) -> None:
        """Check that ``session_id`` is live or stored, before anything else is checked (a load of
        a missing session says so first, not that a sign-in is needed). ``HostError`` ``invalid``
        for a malformed id, ``not_found`` for an unknown one."""
        if session_id in self.sessions:
            return
        try:
            path = self.store.log_path(session_id)
        except ValueError as exc:
            raise HostError("invalid", str(exc), {"sessionId": session_id}) from None
        if not path.is_file():
            raise unknown_session(session_id)

    def emitter(self, session_id: str) -> Emit:
        """How ``session_id``'s updates leave: through its gate when it is live, else straight to
        the front end."""
        gate = self.gates.get(session_id)
        if gate is not None:
            return gate.emit
        assert self.frontend is not None, "SessionHost.attach(frontend) first"
        return self.frontend.emitter(session_id)

    def check_config(self) -> None:
        """``HostError`` ``internal`` (data ``{"code": "CONFIG_ERROR"}``) when the configuration could
        not be read at start-up and still cannot (read again through ``config_loader``: a file fixed
        since is taken, and the error is gone). ``session/new`` calls it, so the error — file, line,
        column — comes at once, not at the first prompt."""
        if not self.config_error:
            return
        if self.config_loader is not None:
            from agent_server.config.load import ConfigError

            try:
                self.config = self.config_loader()
            except ConfigError as exc:
                self.config_error = str(exc)
            else:
                self.config_error = None
                return
        raise HostError("internal", f"configuration error: {self.config_error}",
                        {"code": "CONFIG_ERROR", "message": self.config_error})

    async def check_sign_in(self, client_runs_login: bool = False) -> None:
        """``HostError`` ``auth_required`` when the configured model needs an API key and none is
        usable (``signin.ensure_key``; free when the key is in memory or none is needed).
        ``client_runs_login``: the client can run ``agent-server login`` itself (a terminal auth
        method): the message says so only then."""
        await signin.ensure_key(self, client_runs_login)

    async def sign_out(self) -> list[str]:
        """Remove the stored sign-in of the default profile (``signin.sign_out``)."""
        return await signin.sign_out(self)

    async def flush(self, session_id: str) -> None:
        """Send ``session_id``'s held streamed text and wait until every update emitted before
        has left (nothing when the session is not live): before a prompt is answered."""
        gate = self.gates.get(session_id)
        if gate is not None:
            await gate.flush()

    async def create(self, cwd: str, additional_directories: Sequence[str] = (),
                     mcp_servers: Sequence[str | None] = (), *, system_prompt: dict[str, str] | None = None) -> str:
        """Create a session's log and make it live; returns its id. ``cwd`` and
        ``additional_directories`` are absolute paths; ``mcp_servers``: the names the header records
        (``start_mcp`` starts them after the front end has answered); ``system_prompt``: the
        client's (``set_system_prompt``). ``HostError`` ``invalid`` when a folder is missing."""
        roots = [cwd, *additional_directories]
        missing = [r for r in roots if not Path(r).is_dir()]
        if missing:
            raise HostError("invalid", f"not a directory: {missing[0]}", {"path": missing[0]})
        header = session_header(cwd, additional_directories, mcp_servers)
        self.policies.start_probe()  # overlapped: the first turn waits for its result, session/new does not
        try:
            session_id, event_log = self.store.create(header)
        except (LogWriteError, OSError) as exc:  # disk full: no session, a clear retryable error
            error = log_write_failure(exc if isinstance(exc, LogWriteError) else LogWriteError(self.store.root, exc))
            raise HostError("internal", error["message"], error) from None
        self.open_session(session_id, event_log, roots)
        self.set_system_prompt(session_id, system_prompt, "session/new")
        return session_id

    def set_system_prompt(self, session_id: str, prompt: dict[str, str] | None, by: str) -> bool:
        """Log the client's system prompt (``{"mode", "text", "source"}``) as ``client/system_prompt
        {mode, text, source, by}`` when it differs from the session's last one; whether it did.
        ``None`` (none sent) keeps what the session has. The next request's system text carries it
        (``agent.header``: a change in ``append`` mode is a note, one involving ``override`` renders
        the system text anew, a named break). ``HostError`` ``internal`` (``STORAGE``) when the log
        cannot be written."""
        if prompt is None:
            return False
        log = self.session(session_id).log
        last = log.latest("client/system_prompt")
        if last is not None and (last.data.get("mode"), last.data.get("text")) == (prompt["mode"], prompt["text"]):
            return False
        try:
            log.append("client/system_prompt", {"mode": prompt["mode"], "text": prompt["text"],
                                                "source": prompt.get("source", "systemPrompt"), "by": by})
        except LogWriteError as exc:
            error = log_write_failure(exc)
            raise HostError("internal", error["message"], error) from None
        return True

    def adopt(self, session_id: str, event_log: EventLog, roots: list[str]) -> AgentSession:
        """Make live a new session whose log was created before this host existed (the CLI's
        ``session/new`` fast path): as ``create`` after its log is written — the sandbox probe
        started, the session opened (``open_session``)."""
        self.policies.start_probe()  # overlapped: the first turn waits for its result
        try:
            return self.open_session(session_id, event_log, roots)
        except Exception as exc:  # its session/new was answered: say what went wrong on its next request
            self.adoption_failed(session_id, exc)
            self.sessions.pop(session_id, None)
            event_log.close()
            raise self.unusable[session_id] from exc

    def adoption_failed(self, session_id: str, exc: BaseException) -> None:
        """Remember that the session ``session_id``, answered by the CLI's fast path, could not be
        made live: each request about it is answered with this error (``STORAGE`` when its log could
        not be written) until a ``session/load`` succeeds."""
        if isinstance(exc, HostError):
            self.unusable[session_id] = exc
        elif isinstance(exc, LogWriteError):
            self.unusable[session_id] = HostError(
                "internal", f"session {session_id} could not be opened: its log cannot be written ({exc}); free "
                "space and load it again (session/load)",
                {"code": "STORAGE", "path": str(exc.path), "message": str(exc), "retryable": True})
        else:
            self.unusable[session_id] = HostError(
                "internal", f"session {session_id} could not be opened: {type(exc).__name__}: {exc}; load it again "
                "(session/load)", {"code": "INTERNAL", "message": str(exc), "retryable": True})

    def preconnect(self, session_id: str) -> None:
        """Make the HTTP client of ``session_id``'s endpoint and start opening the connection its
        first request will use (``ChatClient.preconnect``), when the network layer is imported
        (``llm.preloaded()``; nothing is imported here). A load calls it before its replay: the
        connection is open by the answer, and nothing of it (its connect, the endpoint woken to
        accept it) is left to run after the answer, where a prompt sent at once waited behind it."""
        session = self.sessions.get(session_id)
        if session is None or not llm.preloaded():
            return
        try:
            client = self._client(self._provider(session.log))
        except TurnFailed:
            return  # no endpoint or no key: its prompt reports it
        client.warm()
        client.preconnect()

    def prepare_prompt(self, session_id: str) -> bool:
        """Before a ``session/load`` is answered (its history replayed): make, on the loop, what its
        first prompt would otherwise make on its way to the model — its request header, checked
        (``AgentSession.prepare_turn``), the HTTP client of its endpoint (its first connection
        started: ``ChatClient.preconnect``) and the tools' JSON schemas —
        when the load's worker thread has imported the network layer
        by then (``llm.preloaded()``; nothing is imported here). ``True`` when done: no warm-up
        follows the answer (on the loop it ran between a prompt sent at once and its request,
        bench/README.md); ``False``: ``warm`` after the answer, as for ``session/new``."""
        session = self.sessions.get(session_id)
        if session is None:
            return False
        session.prepare_turn()
        if session.prepare_instructions is not None:
            try:
                session.prepare_instructions()
            except Exception:  # noqa: BLE001 — only a head start: the turn reads them again
                log.debug("reading the AGENTS.md files of %s ahead failed", session_id, exc_info=True)
        if not llm.preloaded():
            return False
        try:
            client = self._client(self._provider(session.log))
        except TurnFailed:
            pass  # no endpoint or no key: its prompt reports it
        else:
            client.warm()
            client.preconnect()  # its first connection opened now (a plain-http endpoint): nothing is sent
        tool_schemas(self.tool_tables.get(session_id, {}).values())
        return True

    async def warm(self, session_id: str | None = None) -> None:
        """Prepare, off the critical path (after the ``session/new`` answer is out), what the first
        prompt of ``session_id`` would otherwise build on its way to the model: the HTTP client of
        its endpoint with its network layer and its first connection (``ChatClient.preconnect``), the tools' JSON schemas (built once per process), and
        the loop's default executor with its first worker thread (the file tools read and write in
        it: made on the first call, its thread start and ``concurrent.futures.thread`` import would
        delay the first tool call). The imports (httpx, anyio's backend: ``ChatClient.preload``) and
        the builtin tools' schemas are made in a worker thread: on the loop they held every request
        read meanwhile — a ``session/list`` right after ``session/new`` waited 0.3–1.3 s for them
        (bench/README.md, *sessions_mcp.py*). Yields between steps, so a prompt already read goes
        ahead; a session that cannot reach a model (no endpoint, no key) is left for its prompt to
        report. ``session_id`` ``None``: before any session (a front end that makes its session with
        the first prompt, as the LSP one does, once the editor is idle): the configured model's
        endpoint — unless its key is still in the keyring, which nobody asked for yet (a locked one
        would ask to be unlocked) —, the builtin tools."""
        for step in ("imports", "client", "schemas", "executor"):
            await asyncio.sleep(0)
            session = self.sessions.get(session_id) if session_id is not None else None
            if session_id is not None and session is None:
                return
            if step == "imports":
                await asyncio.to_thread(_warm_imports)  # also starts the executor's first worker thread
            elif step == "client":
                if session is not None:
                    provider = self._provider(session.log)
                else:
                    provider = self.config.provider_for(self.config.provider.model)
                    if signin.missing_key(provider) and provider.key_store == "keyring":
                        continue  # before anyone asked: never the keyring (it may ask to be unlocked)
                try:
                    client = self._client(provider)
                except TurnFailed:
                    pass
                else:
                    client.warm()
                    client.preconnect()  # its first connection (TLS included) opened in a task: nothing is sent
            elif step == "schemas":
                if session_id is not None:  # (the builtin tools' schemas: ``_warm_imports``)
                    tool_schemas(self.tool_tables.get(session_id, {}).values())
            else:
                await asyncio.get_running_loop().run_in_executor(None, int)  # starts the pool's first thread

    def open_session(self, session_id: str, event_log: EventLog, roots: list[str],
                     projection: ProjectionMemo | None = None, requests: Any = None) -> AgentSession:
        """Make the live ``AgentSession`` over an open log (new or loaded) and register it;
        ``projection``: a memo that already saw the log (a load's), for its first request;
        ``requests``: a ``RequestMemo`` that did (``RequestMemo.prepare``), instead."""
        assert self.frontend is not None, "SessionHost.attach(frontend) first"
        batch = getattr(self.frontend, "batch_emitter", None)
        gate = self.gates[session_id] = UpdateGate(self.frontend.emitter(session_id),
                                                   send_many=batch(session_id) if batch is not None else None)
        emit = gate.emit
        policy = self.policies.create(session_id, event_log, roots, emit, self.frontend.approver(session_id))
        policy.ask_edits = self.frontend.edits_need_approval()
        # the file tools' own rules: credential stores closed in every mode, writes anchored in a root
        policy.protected = self._credential_stores(event_log.path.parent, roots)
        access = FileAccess(roots, protected=policy.protected.match, protected_paths=policy.protected.paths(),
                            write_outside=lambda: policy.modes.current == DANGER_FULL_ACCESS,
                            gate=lambda kind, real: policy.open_refusal(CURRENT_TOOL_CALL.get(), kind, real))
        inner = self.frontend.files(session_id, emit)
        if hasattr(inner, "auto_apply"):  # accept-edits: the agent's edits applied without review
            inner.auto_apply = lambda: policy.modes.current == ACCEPT_EDITS
        for backend in (inner, getattr(inner, "disk", None)):  # the disk backend, also behind the editor's
            if isinstance(backend, DiskFiles):
                backend.access = access
        state_dir = self.store.root.parent
        checkpoints = Checkpoints(event_log, BlobStore(state_dir / "blobs"), [Path(r) for r in roots], state_dir,
                                  is_secret=lambda p: policy.secrets.match(p, resolve(p)),
                                  name_patterns=tuple(pt for pt in self.config.policy.secret_patterns if "/" not in pt),
                                  emit=emit, max_file_bytes=self.config.agent.checkpoint_max_file_bytes)
        files = checkpoints.files(inner)
        # restores go through the inner seam: an undo is not a change of the agent to record
        # … and reviewed in every mode: a restore over the user's text is asked through its proposal
        reviewed = inner.reviewed() if hasattr(inner, "reviewed") else inner
        self.restorers[session_id] = Restorer(event_log, reviewed, checkpoints.blobs, policy.approver, emit, roots,
                                              is_secret=checkpoints.is_secret)
        tool_env, env_dropped = self._tool_env_split()
        context = ToolContext(tuple(Path(r) for r in roots), files, LoggedReadLedger.from_log(event_log),
                              session_dir=event_log.path.parent, shell_launcher=policy.shell_launcher,
                              env=tool_env, env_dropped=tuple(env_dropped), access=access, redact=self._secrets(),
                              is_secret=lambda p: policy.secrets.match(p, resolve(p)) is not None,
                              is_secret_resolved=lambda p: policy.secrets.match(p) is not None,
                              secret_rules=SecretRules(policy.secrets.name_patterns, policy.secrets.path_patterns,
                                                       policy.secrets.exact_paths),
                              max_spill_bytes=self.config.agent.max_spill_bytes,
                              max_session_spill_bytes=self.config.agent.max_session_spill_bytes)
        # one result may fill at most a quarter of the model's context window
        budget = int(self.config.provider.context_window * self.config.agent.chars_per_token / 4)
        tools = {t.name: checkpoints.shell(t) if t.name == "bash" else t for t in BUILTIN_TOOLS}
        self.checkpoints[session_id] = checkpoints
        self.tool_tables[session_id] = tools  # MCP tools join (and leave) this table in place
        runner = ToolRunner(event_log, context, emit, tools, guards=[policy.guard], result_budget=budget,
                            terminal_output=self.frontend.terminal_output)
        session = self.sessions[session_id] = AgentSession(
            session_id,
            event_log,
            self.config,
            header_factory=self._header_factory(roots, policy, event_log, tools),
            client_factory=lambda: self._client(self._provider(event_log)),
            emit=emit,
            flush=gate.flush,
            runner=runner,
            provider_factory=lambda: self._provider(event_log),
            projection=projection,
            requests=requests,
        )
        instructions = InstructionsMemo()
        session.before_turn = lambda blocks: self._refresh_instructions(event_log, roots, blocks, policy, instructions,
                                                                        emit)
        # read at a load's end (``prepare_prompt``), so its first turn finds them unchanged with a stat
        session.prepare_instructions = lambda: self._instruction_records(roots, [], policy, instructions)
        session.tool_owner = lambda name: getattr(getattr(tools.get(name), "mcp", None), "server", None)
        return session

    async def load(self, session_id: str, cwd: str, additional_directories: Sequence[str] = (), *,
                   system_prompt: dict[str, str] | None = None, take_over: bool = False) -> dict[str, Any] | None:
        """Make a stored session live (or find it live) and replay its whole history as updates;
        returns the recovery ``_meta`` when a dead process's turn or queue was closed, else ``None``.

        A session already live in this process is not reopened: its history is replayed from
        memory (with what the request in flight streamed so far) while its live updates wait, so
        a running turn goes on with nothing interleaved or lost. What the first prompt needs is made
        before the replay (``continuity.attach``'s ``first_prompt_now``) and the answer waits for it
        (``continuity.prepared``). Errors: see ``lifecycle.open_log``
        and ``lifecycle.load_roots`` (``HostError``). ``take_over``: a session another agent-server
        process holds is asked of it (``continuity.attach``).
        """
        session, meta, _ = await continuity.attach(self, session_id, cwd, additional_directories, take_over,
                                                   first_prompt_now=True)
        self.set_system_prompt(session_id, system_prompt, "session/load")
        self.preconnect(session_id)  # opened while the history is replayed, not after the answer
        await continuity.replay(self, session, cwd)
        await continuity.prepared(session)  # what the load's worker makes for the first prompt: done before the answer
        return meta

    async def resume(self, session_id: str, cwd: str, additional_directories: Sequence[str] = (), *,
                     system_prompt: dict[str, str] | None = None,
                     take_over: bool = False) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """Make a stored session live (or find it live) without replaying it. Returns the recovery
        ``_meta`` (or ``None``) and the ``tool_call_update``\\s (``failed``) of the calls a dead
        process left running, for the front end to send after its answer. Errors as ``load``."""
        _, meta, closed = await continuity.attach(self, session_id, cwd, additional_directories, take_over)
        self.set_system_prompt(session_id, system_prompt, "session/resume")
        return meta, closed

    async def release_requested(self) -> None:
        """Release the live sessions another agent-server process asked to take over (on ``SIGUSR1``:
        ``continuity.release_requested``)."""
        await continuity.release_requested(self)

    async def close(self, session_id: str) -> None:
        """Cancel ``session_id``'s turn, stop its commands, free it; its log stays (``continuity.close``)."""
        await continuity.close(self, session_id)

    async def fork(self, session_id: str, cwd: str, additional_directories: Sequence[str] = (),
                   mcp_servers: Sequence[str | None] = (), turn: int | None = None, *,
                   system_prompt: dict[str, str] | None = None) -> str:
        """A new live session whose history is ``session_id``'s up to a closed turn; its id
        (``continuity.fork``); ``system_prompt``: the client's, for the fork (``set_system_prompt``)."""
        fork_id = await continuity.fork(self, session_id, cwd, additional_directories, mcp_servers, turn)
        self.set_system_prompt(fork_id, system_prompt, "session/fork")
        return fork_id

    def list(self, cwd: str | None = None, cursor: str | None = None,
             defer_save: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the stored sessions as ACP ``SessionInfo``\\s, newest first, and the next
        page's cursor (``lifecycle.list_sessions``; ``defer_save``: call ``save_listing`` after)."""
        return lifecycle.list_sessions(self.store, cwd, cursor, defer_save)

    async def save_listing(self) -> None:
        """Write the sessions' index file a deferred ``list`` left unsaved, in a worker thread."""
        await asyncio.to_thread(self.store.save_listing)

    async def forget(self, session_id: str) -> AgentSession | None:
        """Drop what the host keeps for ``session_id`` — its policy, restorer, tool table, update
        gate — and stop its MCP servers; returns the live session (not closed), or ``None``."""
        session = self.sessions.pop(session_id, None)
        policy = self.policies.policies.get(session_id)
        if policy is not None:
            policy.release()  # no cycle left: the closed session is freed by its last reference
        for kept in (self.policies.policies, self.restorers, self.checkpoints, self.tool_tables, self.gates):
            kept.pop(session_id, None)
        servers = self.mcp.pop(session_id, None)
        if servers is not None:
            await servers.close()
        return session

    async def delete(self, session_id: str) -> None:
        """Cancel and close ``session_id`` if live here (a load of it in progress is waited for
        first), then remove its folder under the log's lock (``SessionStore.delete``).

        Errors: ``HostError`` ``invalid`` for a malformed id, ``not_found`` for an unknown one,
        ``internal`` with ``data.code`` ``SESSION_BUSY`` when another agent-server process has the
        session open (nothing is removed; retryable once it is closed there).
        """
        try:
            path = self.store.log_path(session_id)
        except ValueError as exc:
            raise HostError("invalid", str(exc), {"sessionId": session_id}) from None
        opening = self.opening.get(session_id)
        if opening is not None:  # a load here is opening it: let it finish, then close it as live
            try:
                await asyncio.shield(opening)
            except Exception:
                pass
        session = await self.forget(session_id)
        if session is not None:
            session.cancel()
            await session.close()
        try:
            self.store.delete(session_id)
        except FileNotFoundError:
            if session is None:
                raise unknown_session(session_id) from None
        except LogBusyError:
            raise lifecycle.busy_error("delete", session_id, path) from None
        collect_blobs(self.store)  # the deleted session's checkpoints go with it
        await asyncio.to_thread(prune_shadows, self.store.root.parent)

    def cancel(self, session_id: str) -> None:
        """Stop the running turn of ``session_id`` (nothing when it is unknown or idle)."""
        if session_id in self.sessions:
            self.sessions[session_id].cancel()

    def prepare_mcp(self, session_id: str, entries: Sequence[Any]) -> None:
        """Set up the MCP servers of ``session_id`` (ACP ``mcpServers`` entries); they start when
        ``start_mcp`` is called, after the front end's answer has left. Entries that cannot run are
        logged; a failing server never fails the session."""
        if not entries or session_id not in self.sessions or session_id in self.mcp:
            return
        from agent_server.tools.mcp import specs_from_acp
        from agent_server.tools.mcp.session import McpTools

        session = self.sessions[session_id]
        specs, problems = specs_from_acp(entries)
        for problem in problems:
            session.log.append("mcp/failed", {"server": None, "error": problem})
        servers = McpTools(specs, self._tool_env(), set(self.config.policy.mcp_trusted),
                           self.tool_tables[session_id], session.log, self.emitter(session_id),
                           call_timeout=self.config.agent.mcp_call_timeout, problems=problems,
                           max_tools=self.config.agent.max_tools,
                           elicit=self.frontend.elicitor(session_id) if hasattr(self.frontend, "elicitor") else None,
                           wrap=self.checkpoints[session_id].shell if session_id in self.checkpoints else None)
        servers.gate = asyncio.Event()
        servers.start(servers.gate)
        self.mcp[session_id] = servers

    def start_mcp(self, session_id: str) -> None:
        """Let the MCP servers prepared for ``session_id`` start (nothing when it has none)."""
        servers = self.mcp.get(session_id)
        if servers is not None:
            servers.gate.set()

    # -- turns --------------------------------------------------------------------------------

    async def turn(self, session: AgentSession, blocks: list[dict[str, Any]], ticket: PromptTicket) -> TurnOutcome:
        """Run one turn of ``session`` on prompt ``blocks`` (ACP content blocks); after a turn
        without error the session's title is announced once (``session_info_update``). Every
        update of the turn has left (held streamed text flushed) when this returns."""
        # MCP servers still starting, the sandbox status (known and logged before the system text
        # says it or a tool runs): waited for cancellably — a Stop right after the first prompt counts
        restorer = self.restorers.get(session.id)
        waits = (session.id in self.mcp or not self.policies.status_known(session.id)
                 or (restorer is not None and restorer.busy))  # behind a /undo or /redo: below
        if not await session.wait_ready(ticket, asyncio.ensure_future(self._before_turn(session)) if waits else None):
            await self.flush(session.id)
            return TurnOutcome("cancelled", "cancelled")
        try:
            await self._log_params_change(session)
            blocks = await self._screen_attachments(session, blocks)
            outcome = await session.prompt(blocks, ticket)
            try:
                await self._say_hook_runs(session)
            except Exception:  # noqa: BLE001 - a summary never fails the turn it follows
                log.exception("the end-of-turn hook summary failed")
            if outcome.error is None:
                await self._announce_title(session)
        finally:
            await self.flush(session.id)  # every update of the turn leaves before its answer
        return outcome

    async def _log_params_change(self, session: AgentSession) -> None:
        """Before a turn of an idle session: when the configuration's parameters for its next request
        differ from those its last request was sent with (``[agent] params`` edited between runs, a
        session loaded or resumed under another configuration), log ``params/changed`` — the break of
        the stable head it causes is then a named, planned one (``agent.prefix``) — and tell the user
        once. ``LogWriteError`` is the turn's to meet."""
        if session.running:
            return  # the running turn's requests already carry these parameters
        log = session.log
        provider = self._provider(log)
        change = options.params_change(log, options.request_params(self.config.agent.params, provider,
                                                                   options.option_values(log)))
        if change is None:
            return
        try:
            log.append(options.PARAMS_EVENT, change)
        except LogWriteError:
            return  # the turn's own first append meets the same failure and reports it
        await self.emitter(session.id)({"sessionUpdate": "agent_message_chunk", "content": {
            "type": "text", "text": options.params_change_text(change)},
            "_meta": {"agentServer": {"notice": {"severity": "info"}}}})

    def store_images(self, session: AgentSession, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``blocks`` with each image block stored in the session folder (``session.images``) and
        replaced by its reference ``{"type": "image", "mimeType", "sha256", "bytes"}``, so the log
        names it and never holds its base64. ``HostError`` ``invalid`` — nothing stored or logged,
        the prompt may be sent again — for an image the session's model does not take (no
        ``vision``), an unsupported type, bad base64, bytes of another type, or one over ``[agent]
        max_image_bytes``; ``internal`` ``STORAGE`` when it cannot be written."""
        if not any(b.get("type") == "image" for b in blocks):
            return blocks
        provider = self._provider(session.log)
        checked: list[tuple[int, bytes]] = []
        errors = []
        for index, block in enumerate(blocks):
            if block.get("type") != "image":
                continue
            try:
                checked.append((index, check_image(block.get("mimeType"), block.get("data"),
                                                   self.config.agent.max_image_bytes)))
            except ImageError as exc:
                errors.append({"path": f"prompt.{index}", "message": str(exc)})
        if not provider.vision:
            vision = [c.id for c in self.config.models if c.provider.vision]
            errors.insert(0, {"path": "prompt", "message": (
                f"the model {provider.model} does not take images (no vision = true in its configuration); "
                + (f"switch to {', '.join(vision)} to send images" if vision else "no configured model does"))})
        if errors:
            raise HostError("invalid", "; ".join(e["message"] for e in errors), {"errors": errors})
        store = ImageStore(session.log.path.parent)
        out = list(blocks)
        try:
            for index, raw in checked:
                out[index] = {"type": "image", "mimeType": blocks[index]["mimeType"], "sha256": store.put(raw),
                              "bytes": len(raw)}
        except OSError as exc:
            error = log_write_failure(LogWriteError(store.path, exc))
            raise HostError("internal", error["message"], error) from None
        return out

    async def _say_hook_runs(self, session: AgentSession) -> None:
        """The turn's summary of files it changed that the repository's git hooks run or read
        (issue 32 §1): outside the sandbox, on the user's next commit. Logged (``policy/hook_run``,
        shown again on load) and said to the user, not to the model."""
        policy = self.policies.policies.get(session.id)
        events = session.log.events
        start = next((i for i in range(len(events) - 1, -1, -1) if events[i].type == "turn/start"), None)
        if policy is None or start is None:
            return
        changed = list(dict.fromkeys(str(e.data.get("path")) for e in events[start:]
                                     if e.type == "checkpoint/file" and e.data.get("path")))
        if not changed:
            return
        from agent_server.policy.git_hooks import hook_runs

        nested = [os.path.dirname(g) for g in policy.shell_launcher.config_index.nested_gits]  # their hooks too
        runs = await asyncio.to_thread(hook_runs, [*policy.roots, *nested])
        found = [] if runs is None else [{"path": p, "hook": why} for p in changed if (why := runs.why(p))]
        if not found:
            return
        data = {"turn": events[start].data.get("turn"), "files": found}
        try:
            session.log.append("policy/hook_run", data)
        except LogWriteError:
            return
        roots = [str(r) for r in policy.roots]
        await self.emitter(session.id)({"sessionUpdate": "agent_message_chunk", "content": {
            "type": "text", "text": lifecycle.hook_run_text(data, roots)}, "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    async def _before_turn(self, session: AgentSession) -> None:
        restorer = self.restorers.get(session.id)
        if restorer is not None and restorer.busy:
            # a prompt sent while /undo or /redo runs (its question about a file waits for the user)
            # starts its turn once that has ended, on the files as it left them: never beside it
            await self.emitter(session.id)({"sessionUpdate": "agent_message_chunk", "content": {
                "type": "text", "text": f"[agent-server] Your prompt waits for /{restorer.which} to end (it may be "
                f"waiting for your answer); its turn starts then. Cancel to drop it."},
                "_meta": {"agentServer": {"notice": {"severity": "info"}}}})
            await restorer.idle()
        servers = self.mcp.get(session.id)
        if servers is not None:  # the first prompt waits a little for servers still starting
            await servers.wait_ready(self.config.agent.mcp_start_wait)
        await self.policies.ensure_status(session.id)

    async def dispatch(self, session: AgentSession, typed: list[dict[str, Any]],
                       context: Sequence[dict[str, Any]] = ()) -> commands.Dispatched:
        """What a prompt is, for every front end: ``typed`` — the blocks the user wrote (ACP: the whole
        prompt; LSP: ``agentServer.ask``'s ``prompt``) — that is a slash command (``commands.parse_command``)
        is run as one (``command``), whatever ``context`` the front end adds (the range's text, the
        diagnostics): a command does not use it, so it is neither logged nor sent (``/init``'s turn is
        ``commands.INIT_PROMPT`` alone). Any other prompt is a turn on ``typed`` then ``context``, images
        stored (``store_images``). ``HostError`` as ``command`` and ``store_images``."""
        command = commands.parse_command(typed)
        if command is None:
            return commands.Dispatched(blocks=self.store_images(session, [*typed, *context]))
        reply = await self.command(session, *command)
        if reply is not None:
            return commands.Dispatched(reply=reply, command=command[0])
        return commands.Dispatched(blocks=[{"type": "text", "text": commands.INIT_PROMPT}], command=command[0])

    async def command(self, session: AgentSession, name: str, argument: str) -> dict[str, Any] | None:
        """Run a slash command; returns the prompt's answer (``{"stopReason"}``), or ``None`` when
        it becomes a turn (``/init``: prompt with ``commands.INIT_PROMPT``). An unknown ``name`` is
        answered with the list of commands; ``HostError`` ``invalid`` for ``/mode`` with an unknown mode,
        ``internal`` ``STORAGE`` when the session log cannot be written."""
        try:
            return await self._command(session, name, argument)
        except LogWriteError as exc:
            error = log_write_failure(exc)
            raise HostError("internal", error["message"], error) from None
        finally:
            await self.flush(session.id)

    async def _command(self, session: AgentSession, name: str, argument: str) -> dict[str, Any] | None:
        emit = self.emitter(session.id)
        if not commands.is_known(name):  # never sent to the model: the list of commands answers
            text = commands.unknown_command_text(name)
            event = commands.log_command(session.log, name, argument, "unknown command")
            await emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                        "messageId": commands.reply_id(event)})
            return {"stopReason": "end_turn"}
        if name == "init":
            commands.log_command(session.log, name, argument, "turn")
            return None
        if name == "mode":
            policy = self.policies.policies[session.id]
            try:
                changed = policy.modes.set(argument, "/mode") if argument else False
            except UnknownMode as exc:
                commands.log_command(session.log, name, argument, str(exc))
                raise HostError("invalid", str(exc), {"modeId": argument, "details": str(exc)}) from None
            text = (f"Mode: {policy.modes.current}." if changed or not argument
                    else f"The mode already is {argument}.")
            if argument and policy.modes.current == argument:
                await emit({"sessionUpdate": "current_mode_update", "currentModeId": policy.modes.current})
                if self.config.acp.sends_config_option_update:  # [acp] for clients that reject it (Toad)
                    # the whole set (mode and model): a client replaces its pickers with it
                    await emit({"sessionUpdate": "config_option_update",
                                "configOptions": self.state(session.id)["configOptions"]})
        elif name == "model":
            text, changed = models.model_command(session.log, self.config, argument)
            if changed:
                await self.announce_config(session.id)
        elif name in ("undo", "redo"):
            text = await self.restorers[session.id].run(name, lambda: session.running)
        elif name == "checkpoints":
            text = checkpoints_report(session.log.events, self.restorers[session.id].roots)
            text += "\n\n" + await asyncio.to_thread(storage_text, self.store.root.parent)
        elif name == "compact":
            text = await session.compact_now()
            if text is None:
                commands.log_command(session.log, name, argument, "cancelled")
                return {"stopReason": "cancelled"}
        else:
            try:
                estimate: int | None = await session.compactor.estimate_soon()
            except Exception:  # noqa: BLE001 — no request made yet (no header to estimate from): no estimate
                estimate = None
            text = commands.usage_report(session.log.events, session.provider.context_window, self.config.agent,
                                         estimate)
        event = commands.log_command(session.log, name, argument, text)
        await emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                    "messageId": commands.reply_id(event)})
        return {"stopReason": "end_turn"}

    def prompt_usage(self, session_id: str) -> dict[str, Any] | None:
        """The prompt response's ``usage`` (ACP, unstable): the session's tokens so far —
        ``inputTokens``, ``outputTokens``, ``totalTokens`` and ``cachedReadTokens`` (when the
        provider reported its cache) — or ``None`` before any request reported usage."""
        session = self.sessions.get(session_id)
        if session is None:
            return None
        totals = session.costs.tokens(session.log.events, self.config.agent)
        if not totals["prompt"] and not totals["completion"]:
            return None
        usage = {"totalTokens": totals["prompt"] + totals["completion"], "inputTokens": totals["prompt"],
                 "outputTokens": totals["completion"]}
        if totals["cached"] is not None:
            usage["cachedReadTokens"] = totals["cached"]
        return usage

    # -- modes --------------------------------------------------------------------------------

    def state(self, session_id: str) -> dict[str, Any]:
        """``{"modes", "configOptions"}`` of a live session: the ``mode`` option, the ``model`` option
        when a model is configured, then the current model's own options (``host.options``)."""
        mode = self.policies.get(session_id).modes.current
        log = self.session(session_id).log
        changed = log.latest("model/changed")  # it alone decides: no walk of the log
        own = options.options_view(self._provider(log), options.option_values(log), self.boolean_options)
        return session_state(mode, models.model_option(self.config, [changed] if changed is not None else []), own)

    def set_option(self, session_id: str, option_id: str, value: Any, by: str) -> bool:
        """Set one of the current model's own options (``thought_level``, a switch; ``host.options``),
        logged with ``by``; whether it changed. ``HostError`` ``not_found`` / ``invalid``. Call
        ``announce_config`` after the front end has answered."""
        log = self.session(session_id).log
        try:
            return options.set_option(log, self._provider(log), option_id, value, by)
        except options.OptionError as exc:
            raise HostError("invalid", str(exc), {"configId": option_id, "value": value}) from None
        except LogWriteError as exc:
            error = log_write_failure(exc)
            raise HostError("internal", error["message"], error) from None

    def set_model(self, session_id: str, model: str, by: str) -> bool:
        """Switch the session's model (logged, ``by`` who); whether it changed. ``HostError``
        ``not_found`` / ``invalid`` (not a listed model; the message says how to add one). Call
        ``announce_config`` after the front end has answered."""
        session = self.session(session_id)
        try:
            return models.switch_model(session.log, self.config, model, by)
        except models.UnknownModel as exc:
            raise HostError("invalid", str(exc), {"value": model}) from None

    async def announce_config(self, session_id: str) -> None:
        """Tell the front end the session's config options (``config_option_update``; not when
        ``[acp] config_option_update`` is off)."""
        if not self.config.acp.sends_config_option_update:
            return
        await self.emitter(session_id)({"sessionUpdate": "config_option_update",
                                        "configOptions": self.state(session_id)["configOptions"]})

    def set_mode(self, session_id: str, mode: str, by: str) -> bool:
        """Switch the mode (logged, ``by`` who); whether it changed. ``HostError`` ``not_found`` /
        ``invalid``. Call ``announce_mode`` after the front end has answered."""
        return self.policies.switch(session_id, mode, by)

    async def announce_mode(self, session_id: str) -> None:
        """Tell the front end the mode: ``current_mode_update`` then ``config_option_update``."""
        policy = self.policies.get(session_id)
        emit = self.emitter(session_id)
        await emit({"sessionUpdate": "current_mode_update", "currentModeId": policy.modes.current})
        if self.config.acp.sends_config_option_update:
            await emit({"sessionUpdate": "config_option_update", "configOptions": self.state(session_id)["configOptions"]})

    # -- helpers ------------------------------------------------------------------------------

    async def _announce_title(self, session: AgentSession) -> None:
        """After the first turn, name the session after its first prompt (``session_info_update``)."""
        if not self.config.acp.session_info_update:
            return  # switched off for clients that reject it ([acp] session_info_update = false)
        if session.log.count("turn/end") != 1:  # kept by the log as it grows: no walk of it per turn
            return  # the title is derived from the log (as session/list does), announced once
        events = session.log.events
        title = lifecycle.session_title(next((e for e in events if e.type == "user"), None))
        if title is None:
            return
        updated = datetime.datetime.fromtimestamp(events[-1].time, datetime.timezone.utc).isoformat()
        await self.emitter(session.id)({"sessionUpdate": "session_info_update", "title": title, "updatedAt": updated})

    async def _screen_attachments(self, session: AgentSession, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``blocks`` with each attached file (an embedded ``file:`` resource the editor read for the
        prompt: ``#file:``, an @-mention) that the file tools would never open left out — a
        credential store, or a file reached through a link to one that may hold secrets (a cloned
        repository's innocently named link to ``~/.ssh/id_ed25519``) or that lies outside the workspace
        where a read would ask (``etclink/passwd``) — replaced by a note the model
        reads (and the log keeps: the file's text never reaches either), the user told once per
        prompt (``policy/notice``). A secret file attached by its own name is the user's choice."""
        if not any(b.get("type") == "resource" for b in blocks):
            return blocks
        policy = self.policies.get(session.id)
        kept: list[dict[str, Any]] = []
        left: list[str] = []
        for block in blocks:
            resource = block.get("resource") if block.get("type") == "resource" else None
            uri = str(resource.get("uri", "")) if isinstance(resource, dict) else ""
            if not uri.startswith("file:"):
                kept.append(block)
                continue
            lexical = os.path.normpath(unquote(urlsplit(uri).path))
            real = await asyncio.to_thread(os.path.realpath, lexical)
            why = policy.protected.match(lexical, real) if policy.protected is not None else None
            if why is None and real != lexical and policy.secrets.match(real) is not None:
                why = f"it leads to {real}, a file that may hold secrets (attach that file itself to send it)"
            if why is None and real != lexical and not await asyncio.to_thread(policy.reads_unasked, Path(real)):
                why = f"it leads to {real}, outside the workspace (attach that file itself to send it)"
            if why is None:
                kept.append(block)
                continue
            left.append(f"{lexical}: {why}")
            kept.append({"type": "text", "text": f"[attachment {lexical} left out by agent-server: {why}]"})
        if left:
            text = "Attachments left out of the prompt, never sent to the model: " + "; ".join(left) + "."
            session.log.append("policy/notice", {"rule": "attachment", "text": text})
            await self.emitter(session.id)({"sessionUpdate": "agent_message_chunk",
                                            "content": {"type": "text", "text": f"\n[agent-server] {text}\n"},
                                            "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})
        return kept

    def _refresh_instructions(self, log: Any, roots: list[str], blocks: list[dict[str, Any]], policy: Any,
                              memo: InstructionsMemo, emit: Any = None) -> Any:
        """Log the AGENTS.md files that apply when they are first seen or have changed (one linked to a
        secret or protected file is not read); returns the notice telling the user so (an awaitable
        the turn awaits before it goes on), else ``None``."""
        focus = [Path(urlsplit(b["resource"]["uri"]).path) for b in blocks
                 if b.get("type") == "resource" and str(b["resource"].get("uri", "")).startswith("file:")]
        records = self._instruction_records(roots, focus, policy, memo)
        last = log.latest("project/instructions")  # kept by the log: no walk back to the session's start
        before = last.data["files"] if last else []
        if before != records:
            log.append("project/instructions", {"files": records})
            told = lifecycle.instructions_text(before, records, roots)
            if told is not None and emit is not None:  # the user sees what steers the model, before the turn goes on
                return emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": told},
                             "_meta": {"agentServer": {"notice": {"severity": "info"}}}})
        return None

    @staticmethod
    def _instruction_records(roots: list[str], focus: list[Path], policy: Any,
                             memo: InstructionsMemo) -> list[dict[str, Any]]:
        """The AGENTS.md records for ``roots`` and ``focus`` now (``memo``: the session's, unchanged
        ones found with a ``stat``)."""
        def may_read(real: Path) -> bool:
            return policy.secrets.match(real) is None and (policy.protected is None or
                                                           policy.protected.match(real) is None)

        return memo.records([Path(r) for r in roots], focus, may_read)

    def _credential_stores(self, session_dir: Path, roots: list[str]) -> CredentialStores:
        """What no file tool may open: config, state (but this session's spill/tmp), keyrings, ~/.ssh …"""
        config = [self.config.source, os.environ.get("AGENT_SERVER_CONFIG"), default_config_path().parent]
        return CredentialStores(config=config, state_dir=self.store.root.parent, session_dir=session_dir,
                                roots=roots, named=named_credentials(roots))

    def _secrets(self) -> tuple[str, ...]:
        """Values no tool result may show (defence in depth: the key itself never reaches a tool)."""
        providers = [self.config.provider, *(c.provider for c in self.config.models)]  # every model's key
        return tuple(dict.fromkeys(p.api_key for p in providers if p.api_key))

    def _tool_env(self) -> dict[str, str]:
        """The environment tools (the shell, ``rg``, MCP servers) get: ours minus agent-server's own
        settings, anything holding the model's API key and variables named like a provider's key
        (unless ``[policy] shell_env_allow`` names them) — a command must never print a key."""
        return self._tool_env_split()[0]

    def _tool_env_split(self) -> tuple[dict[str, str], list[str]]:
        """``_tool_env`` and the names it left out (``child_env.split_environ``)."""
        drop = {self.config.provider.api_key_env, *(c.provider.api_key_env for c in self.config.models)}
        return split_environ(secrets=self._secrets(), drop=[v for v in drop if v],
                             allow=self.config.policy.shell_env_allow)

    def _provider(self, log: EventLog) -> ProviderSettings:
        """Where the requests of the session of ``log`` go: the provider of its current model."""
        changed = log.latest("model/changed")  # as commands.current_model, without a walk of the log
        return self.config.provider_for(changed.data["to"] if changed is not None else self.config.provider.model)

    def _header_factory(self, roots: list[str], policy: Any, log: EventLog,
                        tools: dict[str, Any]) -> Callable[[], RequestHeader]:
        """The session's ``_request_header``, made again only when something it is made of changed:
        the events it reads (the newest of each type in ``HEADER_INPUTS``), the mode, the sandbox,
        the tools offered, the configuration or the date; a step makes it more than once, and a
        turn's first step three times."""
        memo: list[Any] = [None, None]

        def header() -> RequestHeader:
            key = (self.config, policy.modes.current, policy.sandboxed, tuple(tools.items()), datetime.date.today(),
                   *map(log.latest, HEADER_INPUTS))
            if memo[0] != key:
                memo[1] = self._request_header(roots, policy, log, tools)
                memo[0] = key
            return memo[1]
        return header

    def _request_header(self, roots: list[str], policy: Any = None, log: Any = None,
                        tools: dict[str, Any] | None = None) -> RequestHeader:
        """The next request's header (a stable head, ``agent.header``): the logged system text kept
        for the whole session, with a note of what changed since it (or the last note) was written;
        rendered anew only for the first request, after a compaction, for other roots, or for a client
        system prompt whose change involves ``override``. Tools: the
        logged ones while the same tools are offered; the model and its quirks from the session's
        current model."""
        provider = self._provider(log) if log is not None else self.config.provider
        records = tuple(_latest(log, "project/instructions", {"files": []})["files"])
        mode = policy.modes.current if policy is not None else None
        sandboxed = policy.sandboxed if policy is not None else None
        params = options.request_params(self.config.agent.params, provider,
                                        options.option_values(log) if log is not None else {})
        client = log.latest("client/system_prompt") if log is not None else None
        context = context_data(mode, sandboxed, records, client.data if client is not None else None)
        tool_names = list(tools) if tools is not None else [t.name for t in BUILTIN_TOOLS]
        kept = kept_header(log.events, roots, latest=log.latest) if log is not None else None
        if kept is not None:
            offered = kept.data.get("tools") or []
            if [t.get("function", {}).get("name") for t in offered] != tool_names or (
                    tools is not None and any(getattr(t, "mcp", None) is not None for t in tools.values())):
                # another tool list, or an MCP server changed a tool's description or schema and kept its name
                current = tool_schemas(tools.values() if tools is not None else BUILTIN_TOOLS)
                offered = current if current != offered else offered
            return RequestHeader(system=kept.data["system"], model=provider.model or "",
                                 params=params, tools=offered,
                                 reasoning_content=provider.reasoning_content, context=context,
                                 note=header_note(kept, context, provider.model or "", records, latest=log.latest))
        env = PromptEnvironment(
            roots=tuple(roots),
            os_name=f"{platform.system()} {platform.release()}",
            shell=os.environ.get("SHELL", "/bin/sh"),
            date=datetime.date.today().isoformat(),
            tool_names=tuple(t.name for t in BUILTIN_TOOLS),
            mode=mode,
            sandboxed=sandboxed,
            instructions=records,
            client=(str(client.data.get("mode")), str(client.data.get("text"))) if client is not None else None,
        )
        return RequestHeader(
            system=render_system_prompt(env),
            model=provider.model or "",
            params=params,
            tools=tool_schemas(tools.values() if tools is not None else BUILTIN_TOOLS),
            reasoning_content=provider.reasoning_content,
            context=context,
        )

    def _client(self, provider: ProviderSettings):
        if self.config_error:
            raise TurnFailed({"code": "BAD_REQUEST", "message": f"configuration error: {self.config_error}", "retryable": False})
        if not provider.base_url:
            raise TurnFailed({"code": "BAD_REQUEST", "retryable": False, "message":
                              "no model endpoint configured: set AGENT_SERVER_BASE_URL (or a profile with "
                              "AGENT_SERVER_PROFILE / the config file), see the README"})
        if not provider.model:
            raise TurnFailed({"code": "BAD_REQUEST", "retryable": False, "message":
                              f"no model configured for profile {provider.profile!r}: set AGENT_SERVER_MODEL"})
        if signin.missing_key(provider) and provider.key_store == "keyring":  # another profile's model
            try:
                self.config = signin.fetch_keyring_key(self.config, provider.profile)
            except credentials.KeyringTimeout as exc:
                raise TurnFailed({"code": "AUTH", "retryable": True, "message": str(exc)}) from None
            provider = self.config.provider_for(provider.model)
        if provider.key_required and not provider.api_key:
            var = provider.api_key_env
            hint = (f"set {var} or AGENT_SERVER_API_KEY" if var else "set AGENT_SERVER_API_KEY") + \
                ", or sign in with `agent-server login`"
            raise TurnFailed({"code": "AUTH", "retryable": False,
                              "message": f"no API key for profile {provider.profile!r}: {hint}"})
        try:
            return self.pool.get(provider.base_url, provider.api_key)
        except ValueError as exc:  # the environment's proxy for the endpoint cannot be used (llm's ProxySetupError)
            raise TurnFailed({"code": "BAD_REQUEST", "retryable": False,
                              "message": f"cannot reach the model endpoint: {exc}"}) from None
