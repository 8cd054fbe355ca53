"""Talk to an agent subprocess in plain NDJSON, without any SDK (malformed-input tests).

Role: the low-level harness. ``RawAgentProcess`` writes whatever bytes a test gives it (non-JSON
lines, batches, requests without ``params``, unknown methods) and reads the agent's stdout line by
line in a background thread. Every line in both directions is recorded in ``transcript``; stderr is
captured; the process runs in its own process group and ``close()`` kills the whole group.

It is synchronous (threads, no asyncio) so it can be used from plain ``def`` tests::

    with RawAgentProcess(cmd, env=env) as agent:
        agent.send_line("this is not json")
        error = agent.recv()
        assert error["error"]["code"] == -32700 and error["id"] is None
"""

from __future__ import annotations

import collections
import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .procs import child_env, group_members, kill_group, signal_group, tail
from .timeouts import HANG
from .transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT, Transcript, WireMessage


class _Omit:
    """Sentinel: leave the member out of the message (e.g. a request without ``params``)."""

    def __repr__(self) -> str:
        return "OMIT"


_OMIT: Any = _Omit()
_EOF = object()


class RawAgentProcess:
    """An agent subprocess spoken to with raw NDJSON.

    ``recv()`` returns the agent's messages in order; ``request()`` sends a request and returns its
    response, keeping every other message it reads on the way for later ``recv()`` calls.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | Path | None = None,
        timeout: float = HANG,
    ) -> None:
        self.command = [str(c) for c in command]
        self.timeout = timeout
        self.transcript = Transcript()
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._held: collections.deque[WireMessage] = collections.deque()
        self._stderr = bytearray()
        self._write_lock = threading.Lock()
        self._next_id = 1
        self._partial = b""
        self._eof = False
        self._closed = False
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(env, inherit=inherit_env),
            cwd=str(cwd) if cwd is not None else None,
            start_new_session=True,
        )
        self._threads = [
            threading.Thread(target=self._read_stdout, name="raw-agent-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="raw-agent-stderr", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> RawAgentProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        """PID (= process group id) of the agent."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """Exit status if the agent has exited."""
        return self.process.poll()

    def close_stdin(self) -> None:
        """Close the agent's stdin (EOF): a well-behaved agent exits."""
        with self._write_lock:
            if self._partial:  # a last line sent without its newline
                self.transcript.record(CLIENT_TO_AGENT, self._partial)
                self._partial = b""
            if self.process.stdin and not self.process.stdin.closed:
                try:
                    self.process.stdin.close()
                except OSError:
                    pass

    def wait_exit(self, timeout: float | None = None) -> int:
        """Wait for the agent to exit; returns its exit status (raises ``subprocess.TimeoutExpired``).
        Also waits (briefly) for the stderr reader to reach EOF, so ``stderr_text()`` is complete."""
        status = self.process.wait(timeout=timeout or self.timeout)
        self._threads[1].join(timeout=2)  # a grace: not a hang guard
        return status

    def close(self, grace: float = 2.0) -> None:
        """Close stdin, wait up to ``grace`` s, then kill the whole process group (always)."""
        if self._closed:
            return
        self._closed = True
        self.close_stdin()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.process.pid)
        signal_group(self.process.pid, signal.SIGKILL)  # sweep the group
        self.process.wait()
        for thread in self._threads:
            thread.join(timeout=2)  # a grace: not a hang guard

    def group_members(self) -> list[int]:
        """Live processes still in the agent's process group."""
        return group_members(self.pid)

    # -- streams -------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self._inbox.put(self.transcript.record(AGENT_TO_CLIENT, line))
        self._inbox.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := self.process.stderr.read1(65536):
            self._stderr.extend(chunk)

    def stderr_text(self) -> str:
        """Everything the agent wrote to stderr so far."""
        return self._stderr.decode("utf-8", errors="replace")

    def diagnostics(self) -> str:
        """Transcript tail, exit status and stderr tail, for assertion messages."""
        return (
            f"agent {self.command} pid={self.pid} returncode={self.returncode}\n"
            f"--- transcript (tail) ---\n{self.transcript.format(limit=40)}\n"
            f"--- stderr (tail) ---\n{tail(self.stderr_text())}"
        )

    # -- sending -------------------------------------------------------------------------------

    def send_line(self, data: str | bytes, *, newline: bool = True) -> None:
        """Write ``data`` (plus ``\\n`` unless ``newline=False`` or already there) to stdin, verbatim."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if newline and not data.endswith(b"\n"):
            data += b"\n"
        with self._write_lock:
            assert self.process.stdin is not None
            # recorded before the write: the agent's answer (recorded by the reader thread) must
            # never come before the request it answers in the transcript
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self.transcript.record(CLIENT_TO_AGENT, line)
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def send(self, message: Any) -> None:
        """Serialise ``message`` as one JSON line and send it."""
        self.send_line(json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    def next_id(self) -> int:
        """A fresh request id."""
        rid = self._next_id
        self._next_id += 1
        return rid

    def send_request(self, method: str, params: Any = _OMIT, *, id: Any = _OMIT) -> Any:  # noqa: A002
        """Send a request (``params`` omitted from the message if not given); returns its id."""
        rid = self.next_id() if id is _OMIT else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not _OMIT:
            message["params"] = params
        self.send(message)
        return rid

    def notify(self, method: str, params: Any = _OMIT) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not _OMIT:
            message["params"] = params
        self.send(message)

    def respond(self, request_id: Any, result: Any) -> None:
        """Answer an agent→client request with ``result``."""
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, code: int, message: str, data: Any = _OMIT) -> None:
        """Answer an agent→client request with an error."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not _OMIT:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    # -- receiving -----------------------------------------------------------------------------

    def _next_record(self, deadline: float, what: str = "a message") -> WireMessage:
        if self._held:
            return self._held.popleft()
        if self._eof:
            raise EOFError(f"agent closed stdout\n{self.diagnostics()}")
        remaining = deadline - time.monotonic()
        try:
            item = self._inbox.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            raise TimeoutError(f"timed out waiting for {what} from the agent\n{self.diagnostics()}") from None
        if item is _EOF:
            self._eof = True
            raise EOFError(f"agent closed stdout\n{self.diagnostics()}")
        return item

    def recv_record(self, timeout: float | None = None) -> WireMessage:
        """The next line from the agent as a ``WireMessage`` (JSON or not).

        Raises ``TimeoutError`` if none arrives in time, ``EOFError`` once stdout is closed.
        """
        return self._next_record(time.monotonic() + (self.timeout if timeout is None else timeout))

    def recv(self, timeout: float | None = None) -> Any:
        """The next message from the agent, parsed (raises ``AssertionError`` on a non-JSON line)."""
        record = self.recv_record(timeout)
        if not record.is_json:
            raise AssertionError(f"agent wrote a non-JSON line: {record.raw!r}\n{self.diagnostics()}")
        return record.message

    def recv_until(self, predicate: Callable[[Any], bool], timeout: float | None = None,
                   what: str = "a matching message") -> Any:
        """Read until a message matches ``predicate``; the others are kept for later ``recv()``."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        skipped: list[WireMessage] = []
        try:
            while True:
                record = self._next_record(deadline, what)
                if record.is_json and predicate(record.message):
                    return record.message
                skipped.append(record)
        finally:
            self._held.extendleft(reversed(skipped))

    def response(self, request_id: Any, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the response carrying ``request_id`` (type-sensitive id match)."""

        def match(msg: Any) -> bool:
            return (
                isinstance(msg, dict)
                and "method" not in msg
                and "id" in msg
                and type(msg["id"]) is type(request_id)
                and msg["id"] == request_id
            )

        return self.recv_until(match, timeout, f"the response to request {request_id!r}")

    def request(self, method: str, params: Any = _OMIT, *, timeout: float | None = None) -> dict[str, Any]:
        """Send a request and return the whole response message (``result`` or ``error``)."""
        return self.response(self.send_request(method, params), timeout)

    def drain(self, quiet: float = 0.2) -> list[Any]:
        """Every message received until the agent has been silent for ``quiet`` s."""
        out = []
        while True:
            try:
                out.append(self.recv_record(timeout=quiet).message)
            except (TimeoutError, EOFError):
                return out
