"""A stdlib LSP client for the bench: ``agent-server lsp`` driven over its stdio as an editor does.

Role: measurement plumbing for ``bench/run.py``'s ``lsp`` group. Messages are framed with
``Content-Length`` (LSP base protocol); every message the server sends is timestamped on arrival
(``time.time()``), and requests the server sends (``window/workDoneProgress/create`` …) are
answered with ``null`` so it never waits on the bench.

Must never: be imported by the server, or judge a figure (``run.py`` does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

NEOVIM_CAPABILITIES: dict[str, Any] = {
    "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
    "textDocument": {
        "synchronization": {"didSave": True, "dynamicRegistration": False, "willSave": True,
                            "willSaveWaitUntil": True},
        "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
            "", "quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite", "source",
            "source.organizeImports"]}}, "dataSupport": True, "dynamicRegistration": True,
            "isPreferredSupport": True, "resolveSupport": {"properties": ["edit", "command"]}},
    },
    "window": {"showDocument": {"support": True}, "showMessage": {"messageActionItem": {
        "additionalPropertiesSupport": True}}, "workDoneProgress": True},
    "workspace": {"applyEdit": True, "workspaceEdit": {"resourceOperations": ["rename", "create", "delete"]},
                  "workspaceFolders": True},
}
"""The parts of Neovim 0.11's ``initialize`` capabilities the agent's server reads (its code actions,
edits, questions and progress), as Neovim sends them."""


class LspProcess:
    """A language server on stdio; ``messages`` is ``[(arrival time.time(), message)]`` of its stdout."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        self.spawned = time.time()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._write_lock = threading.Lock()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        fd = self.proc.stdout.fileno()
        buffer = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            now = time.time()
            buffer += chunk
            while True:
                head, sep, rest = buffer.partition(b"\r\n\r\n")
                if not sep:
                    break
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                if len(rest) < length:
                    break
                message, buffer = json.loads(rest[:length]), rest[length:]
                if "method" in message and "id" in message:  # a request of the server's: answer null
                    self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
                with self._cond:
                    self.messages.append((now, message))
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr = (self.stderr + line)[-4000:]

    def _write(self, message: dict[str, Any]) -> float:
        body = json.dumps(message).encode()
        with self._write_lock:
            sent = time.time()
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()
        return sent

    def send(self, method: str, params: Any, *, notify: bool = False) -> tuple[int | None, float]:
        """Write one message; returns ``(id or None, time it was written)``."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        request_id = None
        if not notify:
            self._next_id += 1
            request_id = message["id"] = self._next_id
        return request_id, self._write(message)

    def response(self, request_id: int, timeout: float = 60.0) -> tuple[float, Any]:
        """Wait for the response to ``request_id``: ``(arrival time, result)``; raises on an error."""
        deadline = time.time() + timeout
        with self._cond:
            while True:
                for arrived, message in self.messages:
                    if message.get("id") == request_id and "method" not in message:
                        if "error" in message:
                            raise RuntimeError(f"request {request_id} failed: {message['error']}")
                        return arrived, message.get("result")
                if self.proc.poll() is not None:
                    raise EOFError(f"server exited ({self.proc.returncode}): "
                                   f"{self.stderr.decode(errors='replace')[-800:]}")
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"no answer in {timeout} s; stderr: {self.stderr.decode(errors='replace')[-800:]}")
                self._cond.wait(min(left, 0.5))

    def close(self) -> None:
        """``shutdown`` + ``exit`` when it still runs, close stdin, then kill the whole process group."""
        try:
            request_id, _ = self.send("shutdown", None)
            self.response(request_id, timeout=5)
            self.send("exit", None, notify=True)
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


def first_code_action(server: LspProcess, workspace: str, path: str, text: str) -> dict[str, float]:
    """What an editor does on start: ``initialize`` (Neovim's capabilities), then at once
    ``initialized``, ``didOpen`` and a ``textDocument/codeAction`` on line 1. Returns
    ``{"initialize": ms, "code_action": ms}``, both from spawn to the answer's arrival."""
    from pathlib import Path

    root = Path(workspace).as_uri()
    request_id, _ = server.send("initialize", {
        "processId": os.getpid(), "clientInfo": {"name": "agent-server-bench", "version": "1"},
        "rootUri": root, "rootPath": workspace, "workspaceFolders": [{"uri": root, "name": Path(workspace).name}],
        "capabilities": NEOVIM_CAPABILITIES, "trace": "off"})
    initialized, result = server.response(request_id)
    assert result["capabilities"]["codeActionProvider"], result
    server.send("initialized", {}, notify=True)
    uri = Path(path).as_uri()
    server.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1,
                                                          "text": text}}, notify=True)
    request_id, _ = server.send("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 4}},
        "context": {"diagnostics": [], "triggerKind": 1}})
    answered, actions = server.response(request_id)
    assert actions and all("Agent:" in a["title"] for a in actions), actions
    return {"initialize": (initialized - server.spawned) * 1000, "code_action": (answered - server.spawned) * 1000}
