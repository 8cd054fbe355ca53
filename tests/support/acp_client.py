"""Drive an ACP agent subprocess with the official ACP Python SDK as the client, recording the wire.

Role: the main harness for protocol tests. ``AcpHarness`` spawns the agent command in its own
process group, hands the SDK's ``ClientSideConnection`` a tee of the agent's stdio so every
JSON-RPC line in both directions lands verbatim in ``harness.transcript`` (with a monotonic
timestamp), answers the agent's calls through a configurable ``HarnessClient`` and always kills
the whole process group on exit (no orphans).

Typical use::

    async with AcpHarness(cmd, env=env, config=ClientConfig(permission="allow_once")) as h:
        await h.initialize()
        session = await h.new_session(str(tmp_path))
        response = await h.prompt(session.session_id, "hello")
        assert response.stop_reason == "end_turn"
        h.validate()                        # whole transcript against the ACP schema

For malformed input (non-JSON lines, batches, bad params) use ``RawAgentProcess`` (re-exported
here from ``raw_agent``), which talks plain NDJSON without the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
)

from .acp_schema import TranscriptReport, validate_transcript
from .client_impl import (
    AGENT_SERVER_EXTENSION,
    APPLY_WORKSPACE_EDIT,
    ClientConfig,
    HarnessClient,
    MemoryFs,
    never_answer,
    select_permission,
)
from .procs import child_env, group_members, kill_group, tail
from .timeouts import HANG
from .raw_agent import RawAgentProcess
from .transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT, Transcript, WireMessage

__all__ = [
    "AGENT_SERVER_EXTENSION",
    "AGENT_TO_CLIENT",
    "APPLY_WORKSPACE_EDIT",
    "CLIENT_TO_AGENT",
    "AcpHarness",
    "AgentExited",
    "ClientConfig",
    "HarnessClient",
    "MemoryFs",
    "RawAgentProcess",
    "Transcript",
    "WireMessage",
    "never_answer",
    "select_permission",
]

STREAM_LIMIT = 64 * 1024 * 1024
DEFAULT_TIMEOUT = HANG  # every awaited operation's hang guard (support/timeouts.py)


class AgentExited(AssertionError):
    """The agent process closed its stdout (exited) while the harness was waiting on it."""


class _TeeWriter(asyncio.StreamWriter):
    """The agent's stdin as the SDK sees it: every complete line written is recorded first."""

    def __init__(self, inner: asyncio.StreamWriter, record: Callable[[bytes], None]) -> None:
        super().__init__(inner.transport, inner._protocol, None, asyncio.get_running_loop())  # noqa: SLF001
        self._record = record
        self._partial = b""

    def write(self, data: bytes) -> None:  # type: ignore[override]
        """Record complete lines, then forward the bytes unchanged."""
        buffered = self._partial + bytes(data)
        *lines, self._partial = buffered.split(b"\n")
        for line in lines:
            self._record(line)
        super().write(data)

    def flush_partial(self) -> None:
        """Record a trailing line that never got its newline (raw sends only)."""
        if self._partial:
            self._record(self._partial)
            self._partial = b""


class AcpHarness:
    """An agent subprocess driven through the official SDK's ``ClientSideConnection``.

    ``command``: argv of the agent. ``env``: variables merged over ``os.environ`` (or used alone
    with ``inherit_env=False``). ``cwd``: working directory of the process. ``config``: the client
    behaviour (``ClientConfig``). ``timeout``: default seconds for every awaited operation.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | Path | None = None,
        config: ClientConfig | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        shutdown_grace: float = 2.0,
    ) -> None:
        self.command = [str(c) for c in command]
        self.env = child_env(env, inherit=inherit_env)
        self.cwd = str(cwd) if cwd is not None else None
        self.config = config or ClientConfig()
        self.timeout = timeout
        self.shutdown_grace = shutdown_grace
        self.transcript = Transcript()
        self.client = HarnessClient(self.config, on_update=self._notify)
        self.process: asyncio.subprocess.Process | None = None
        self.conn: ClientSideConnection | None = None
        self._writer: _TeeWriter | None = None
        self._stderr = bytearray()
        self._stderr_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._stdout_eof = asyncio.Event()
        self._changed = asyncio.Event()
        self._closed = False
        self.transcript.listeners.append(lambda _item: self._notify())

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> AcpHarness:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> AcpHarness:
        """Spawn the agent (own process group) and connect the SDK client to it."""
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            limit=STREAM_LIMIT,
        )
        assert self.process.stdin and self.process.stdout and self.process.stderr
        sdk_reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        self._writer = _TeeWriter(self.process.stdin, lambda line: self.transcript.record(CLIENT_TO_AGENT, line))
        self._tasks = [
            asyncio.create_task(self._pump_stdout(self.process.stdout, sdk_reader), name="acp-harness-stdout"),
            asyncio.create_task(self._pump_stderr(self.process.stderr), name="acp-harness-stderr"),
        ]
        self.conn = ClientSideConnection(self.client, self._writer, sdk_reader)
        return self

    @property
    def pid(self) -> int:
        """PID (= process group id) of the agent."""
        assert self.process is not None, "harness not started"
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """Exit status once the agent has exited (negative: killed by that signal)."""
        return None if self.process is None else self.process.returncode

    async def close(self) -> None:
        """Close the SDK connection and stdin, give the agent ``shutdown_grace`` s to exit, then kill its group."""
        if self._closed or self.process is None:
            return
        self._closed = True
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), timeout=2)  # a grace, then killed: not a hang guard
        if self._writer is not None:
            self._writer.flush_partial()
            with contextlib.suppress(Exception):
                self._writer.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await self._exited(self.shutdown_grace)
        await asyncio.to_thread(kill_group, self.process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # sweep anything left in the group
        await self.process.wait()
        for task in self._tasks:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=2)  # a grace, then killed: not a hang guard

    def group_members(self) -> list[int]:
        """Live processes still in the agent's process group (empty after ``close()``)."""
        return [] if self.process is None else group_members(self.pid)

    async def _exited(self, timeout: float) -> int:
        # Process.wait() (3.11) also waits for every pipe to close, which a grandchild holding
        # stderr can delay forever: poll the exit status the child watcher records instead.
        assert self.process is not None
        deadline = asyncio.get_running_loop().time() + timeout
        while self.process.returncode is None:
            if asyncio.get_running_loop().time() >= deadline:
                raise TimeoutError
            await asyncio.sleep(0.01)
        return self.process.returncode

    async def wait_exit(self, timeout: float | None = None) -> int:
        """Wait for the agent to exit on its own; returns its exit status (``asyncio.TimeoutError`` if not)."""
        return await self._exited(timeout or self.timeout)

    # -- streams -------------------------------------------------------------------------------

    async def _pump_stdout(self, stdout: asyncio.StreamReader, sdk_reader: asyncio.StreamReader) -> None:
        try:
            while True:
                try:
                    line = await stdout.readline()
                except (ValueError, asyncio.LimitOverrunError) as exc:  # a line over STREAM_LIMIT
                    self.transcript.record(AGENT_TO_CLIENT, f"<line over {STREAM_LIMIT} bytes: {exc}>")
                    break
                if not line:
                    break
                self.transcript.record(AGENT_TO_CLIENT, line)
                sdk_reader.feed_data(line if line.endswith(b"\n") else line + b"\n")
        finally:
            sdk_reader.feed_eof()
            self._stdout_eof.set()
            self._notify()

    async def _pump_stderr(self, stderr: asyncio.StreamReader) -> None:
        while chunk := await stderr.read(65536):
            self._stderr.extend(chunk)
            self._stderr_changed.set()
        self._stderr_changed.set()

    def _notify(self) -> None:
        self._changed.set()

    async def wait_for_stderr(self, text: str, timeout: float | None = None) -> str:
        """Everything the agent wrote to stderr, once it holds ``text`` (``AssertionError`` on timeout)."""
        async def arrived() -> str:
            while text not in self.stderr_text():
                self._stderr_changed.clear()
                if text in self.stderr_text():
                    break
                await self._stderr_changed.wait()
            return self.stderr_text()
        return await self._await(f"{text!r} on stderr", arrived(), timeout)

    def stderr_text(self) -> str:
        """Everything the agent wrote to stderr so far."""
        return self._stderr.decode("utf-8", errors="replace")

    def diagnostics(self) -> str:
        """Transcript tail, exit status and stderr tail, for assertion messages."""
        return (
            f"agent {self.command} pid={self.process.pid if self.process else None} "
            f"returncode={self.returncode}\n--- transcript (tail) ---\n{self.transcript.format(limit=40)}"
            f"\n--- stderr (tail) ---\n{tail(self.stderr_text())}"
        )

    # -- awaiting ------------------------------------------------------------------------------

    async def _await(self, what: str, awaitable: Any, timeout: float | None) -> Any:
        try:
            return await asyncio.wait_for(awaitable, timeout=timeout or self.timeout)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout or self.timeout}s waiting for {what}\n{self.diagnostics()}"
            ) from None
        except ConnectionError as exc:
            await asyncio.sleep(0.05)  # let the exit status and stderr arrive
            raise AgentExited(f"connection lost during {what}: {exc}\n{self.diagnostics()}") from exc

    async def wait_for(
        self, predicate: Callable[[WireMessage], bool], *, after: int = -1, timeout: float | None = None
    ) -> WireMessage:
        """First transcript record with ``seq > after`` matching ``predicate``.

        Fails with ``AgentExited`` as soon as the agent closed its stdout without a match, and with
        ``AssertionError`` on timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or self.timeout)
        seen = after + 1
        while True:
            self._changed.clear()
            items = self.transcript.snapshot()
            for item in items[seen:]:
                if predicate(item):
                    return item
            seen = max(seen, len(items))
            if self._stdout_eof.is_set():
                raise AgentExited(f"agent closed stdout before the awaited message\n{self.diagnostics()}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for a matching message\n{self.diagnostics()}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=remaining)

    async def wait_for_update(
        self,
        session_update: str | None = None,
        *,
        session_id: str | None = None,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        after: int = -1,
        timeout: float | None = None,
    ) -> WireMessage:
        """Wait for a ``session/update`` (optionally of kind ``session_update`` / matching ``predicate(update)``)."""

        def match(item: WireMessage) -> bool:
            if item.direction != AGENT_TO_CLIENT or item.method != "session/update" or item.kind != "notification":
                return False
            params = item.message.get("params") or {}
            update = params.get("update") or {}
            return (
                (session_id is None or params.get("sessionId") == session_id)
                and (session_update is None or update.get("sessionUpdate") == session_update)
                and (predicate is None or predicate(update))
            )

        return await self.wait_for(match, after=after, timeout=timeout)

    # -- ACP calls (through the SDK) -----------------------------------------------------------

    def _connection(self) -> ClientSideConnection:
        assert self.conn is not None, "harness not started"
        return self.conn

    async def initialize(
        self,
        client_capabilities: dict[str, Any] | None = None,
        *,
        protocol_version: int = 1,
        client_info: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> InitializeResponse:
        """``initialize`` with ``client_capabilities`` (default: ``config.capabilities()``)."""
        caps = client_capabilities if client_capabilities is not None else self.config.capabilities()
        info = client_info if client_info is not None else self.config.client_info
        call = self._connection().initialize(
            protocol_version=protocol_version,
            client_capabilities=ClientCapabilities.model_validate(caps),
            client_info=Implementation.model_validate(info),
            **(meta or {}),
        )
        return await self._await("initialize", call, timeout)

    async def new_session(
        self,
        cwd: str | Path,
        *,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> NewSessionResponse:
        """``session/new`` with an absolute ``cwd``."""
        call = self._connection().new_session(
            cwd=str(cwd),
            additional_directories=additional_directories,
            mcp_servers=mcp_servers or [],
            **(meta or {}),
        )
        return await self._await("session/new", call, timeout)

    async def prompt(
        self,
        session_id: str,
        prompt: str | list[dict[str, Any]] | list[Any],
        *,
        meta: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> PromptResponse:
        """``session/prompt``: a string becomes one text block; dicts are wire-format content blocks."""
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt
        typed = PromptRequest.model_validate({"sessionId": session_id, "prompt": blocks}).prompt
        call = self._connection().prompt(session_id=session_id, prompt=typed, **(meta or {}))
        return await self._await("session/prompt", call, timeout)

    def start_prompt(self, session_id: str, prompt: str | list[Any], **kwargs: Any) -> asyncio.Task[PromptResponse]:
        """Run ``prompt`` in a task (to cancel it, or to queue a second prompt meanwhile)."""
        return asyncio.create_task(self.prompt(session_id, prompt, **kwargs))

    async def cancel(self, session_id: str) -> None:
        """Send the ``session/cancel`` notification."""
        await self._await("session/cancel", self._connection().cancel(session_id=session_id), None)

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Any request through the SDK connection (methods the SDK has no helper for); returns the raw result."""
        conn = self._connection()._conn  # noqa: SLF001 - the SDK's generic JSON-RPC connection
        return await self._await(method, conn.send_request(method, params), timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        """Any notification through the SDK connection."""
        conn = self._connection()._conn  # noqa: SLF001
        await self._await(method, conn.send_notification(method, params), None)

    async def cancel_request(self, request_id: Any) -> None:
        """Send ``$/cancel_request {requestId}``."""
        await self.notify("$/cancel_request", {"requestId": request_id})

    def last_request_id(self, method: str) -> Any:
        """The id of the most recent ``method`` request the client sent (e.g. to ``cancel_request`` it)."""
        requests = self.transcript.requests(method, CLIENT_TO_AGENT)
        assert requests, f"no {method} request sent yet"
        return requests[-1].message["id"]

    async def send_raw(self, data: str | bytes | dict[str, Any] | list[Any]) -> None:
        """Write raw bytes to the agent's stdin (a dict/list is serialised and newline-terminated)."""
        assert self._writer is not None, "harness not started"
        if isinstance(data, dict | list):
            data = json.dumps(data, separators=(",", ":")) + "\n"
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._writer.write(data)
        await self._writer.drain()

    # -- results -------------------------------------------------------------------------------

    def session_updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Raw ``params`` of every ``session/update`` received (optionally for one session)."""
        return self.transcript.session_updates(session_id)

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Raw ``update`` objects received, optionally filtered by session and ``sessionUpdate`` kind."""
        out = [p["update"] for p in self.session_updates(session_id) if isinstance(p.get("update"), dict)]
        return [u for u in out if kind is None or u.get("sessionUpdate") == kind]

    def agent_text(self, session_id: str | None = None) -> str:
        """Concatenated text of the ``agent_message_chunk`` updates received."""
        return "".join(
            (u.get("content") or {}).get("text", "") for u in self.updates(session_id, "agent_message_chunk")
        )

    def validate(self, **kwargs: Any) -> TranscriptReport:
        """``validate_transcript`` on everything recorded so far (kwargs passed through)."""
        return validate_transcript(self.transcript.snapshot(), **kwargs)
