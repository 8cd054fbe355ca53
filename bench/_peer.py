"""The two peers of every benchmark run: a stdlib ACP client driving an agent process, and the
bundled offline endpoint in a process of its own that records when each request arrived and when
the last byte of its answer left.

Role: measurement plumbing for ``bench/run.py``. The client timestamps every stdout line of the
agent on arrival (``time.time()``, the clock the endpoint uses too) and parses lazily, so a flood of
200,000 notifications costs the client a split, not a JSON parse each.

Must never: be imported by the server, or judge a figure (``run.py`` does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


class AgentProcess:
    """An ACP agent on stdio. ``lines`` is ``[(arrival time.time(), raw bytes)]`` of its stdout."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        self.spawned = time.time()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        self.lines: list[tuple[float, bytes]] = []
        self._cond = threading.Condition()
        self._next_id = 0
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
            *whole, buffer = buffer.split(b"\n")
            with self._cond:
                self.lines.extend((now, line) for line in whole if line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr = (self.stderr + line)[-4000:]

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> tuple[int | None, float]:
        """Write one message; returns ``(id or None, time it was written)``."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        request_id = None
        if not notify:
            self._next_id += 1
            request_id = message["id"] = self._next_id
        data = (json.dumps(message) + "\n").encode()
        sent = time.time()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        return request_id, sent

    def wait(self, predicate: Callable[[bytes], bool], start: int = 0, timeout: float = 60.0
             ) -> tuple[int, float, dict[str, Any]]:
        """The first line at index ≥ ``start`` whose raw bytes satisfy ``predicate``:
        ``(index, arrival time, message)``. Raises ``TimeoutError`` / ``EOFError``."""
        deadline = time.time() + timeout
        index = start
        with self._cond:
            while True:
                while index < len(self.lines):
                    arrived, raw = self.lines[index]
                    if predicate(raw):
                        return index, arrived, json.loads(raw)
                    index += 1
                if self.proc.poll() is not None:
                    raise EOFError(f"agent exited ({self.proc.returncode}): {self.stderr.decode(errors='replace')[-800:]}")
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"no such line in {timeout} s; stderr: {self.stderr.decode(errors='replace')[-800:]}")
                self._cond.wait(min(left, 0.5))

    def response(self, request_id: int, start: int = 0, timeout: float = 60.0) -> tuple[int, float, dict[str, Any]]:
        """Wait for the response to ``request_id`` (raises on an error response)."""
        needle = f'"id":{request_id}'.encode()
        needle2 = f'"id": {request_id}'.encode()

        def is_it(raw: bytes) -> bool:
            return (needle in raw or needle2 in raw) and b'"method"' not in raw[:40] and (
                json.loads(raw).get("id") == request_id and "method" not in json.loads(raw))
        index, arrived, message = self.wait(is_it, start, timeout)
        if "error" in message:
            raise RuntimeError(f"request {request_id} failed: {message['error']}")
        return index, arrived, message

    def request(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> tuple[float, float, dict[str, Any]]:
        """Send and wait: ``(sent, answered, result)``."""
        start = len(self.lines)
        request_id, sent = self.send(method, params)
        _, answered, message = self.response(request_id, start, timeout)
        return sent, answered, message["result"]

    def server_pid(self) -> int:
        """The pid of the process serving this agent's stdio: the spawned process itself."""
        return self.proc.pid

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the serving process so far (``/proc/<pid>/stat``)."""
        fields = Path(f"/proc/{self.server_pid()}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_kib(self, field: str = "VmRSS", pid: int | None = None) -> int:
        """``VmRSS`` (or ``VmHWM``, the peak) of the serving process (or of ``pid``), in KiB."""
        for line in Path(f"/proc/{pid or self.server_pid()}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return -1

    def close(self) -> None:
        """Close stdin, then kill the whole process group."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


_ENDPOINT_MAIN = r"""
import asyncio, json, os, re, selectors, sys, time
from agent_server.offline import OfflineEndpoint

CONTENT = re.compile(rb'"content":"[^"]')
SCHED = os.open("/proc/thread-self/schedstat", os.O_RDONLY) if os.path.exists("/proc/thread-self/schedstat") else None
def runq():  # seconds this (the loop's) thread waited on a run queue so far
    return int(os.pread(SCHED, 64, 0).split()[1]) / 1e9 if SCHED is not None else 0.0
waited = [0.0]
select = selectors.EpollSelector.select
def timed_select(self, timeout=None):  # the run-queue clock when the loop went to sleep
    waited[0] = runq()
    return select(self, timeout)
selectors.EpollSelector.select = timed_select

class Timed(OfflineEndpoint):
    async def _connection(self, reader, writer):
        feed = reader.feed_data
        def timed(data):  # each read of a request's bytes: when, how many, the run-queue wait since the loop slept
            self.reads.append((time.time(), len(data), round((runq() - waited[0]) * 1000, 3)))
            feed(data)
        reader.feed_data = timed
        await super()._connection(reader, writer)

    async def _serve(self, r, reader, writer):
        self.content_seen = False
        try:
            await super()._serve(r, reader, writer)
        finally:
            self.done_times.append(time.time())

    async def _write(self, writer, data, chunked):
        if self.content_seen or not CONTENT.search(data):
            return await OfflineEndpoint._write(writer, data, chunked)
        self.content_seen = True  # the answer's first text: timed when it goes to the socket (after framing)
        original = writer.write
        def timed(framed):
            self.first_content_times.append(time.time())
            original(framed)
        writer.write = timed
        try:
            await OfflineEndpoint._write(writer, data, chunked)
        finally:
            del writer.write  # the class's own method again

async def main():
    script = json.load(open(sys.argv[1]))
    endpoint = Timed(script)
    endpoint.done_times = []
    endpoint.first_content_times = []
    endpoint.reads = []
    await endpoint.start()
    print(endpoint.base_url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    print(json.dumps({"requests": [{"time": q.time, "body": q.body.decode("utf-8", "replace")}
                                   for q in endpoint.requests],
                      "done": endpoint.done_times, "first_content": endpoint.first_content_times,
                      "reads": endpoint.reads}), flush=True)
    await endpoint.stop()

asyncio.run(main())
"""


class Endpoint:
    """The offline endpoint playing ``script`` in a child process.

    ``base_url``; ``finish()`` → ``{"requests": [{"time", "body"}], "done": [time the last byte of
    each answer was written], "first_content": [time the first write carrying answer text was
    written, per answer that had one], "reads": [[time, bytes, ms the endpoint's loop waited on a
    run queue since it last slept] of each read of a connection's bytes]}``.
    """

    def __init__(self, script: list[dict[str, Any]], python: str = sys.executable) -> None:
        handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(script, handle)
        handle.close()
        self._script_path = handle.name
        self.proc = subprocess.Popen([python, "-c", _ENDPOINT_MAIN, handle.name], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError("the offline endpoint did not start")

    def finish(self) -> dict[str, Any]:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        report = json.loads(self.proc.stdout.readline())
        self.proc.wait(timeout=10)
        os.unlink(self._script_path)
        return report


def compile_package() -> None:
    """Write the package's bytecode (``__pycache__``), as ``pip install`` does for an installed package.

    The bench measures the agent as an editor runs it. An editable checkout gets its bytecode on the
    first import, unless ``PYTHONDONTWRITEBYTECODE`` is set (CI and sandboxes often set it): then
    every agent process would compile the whole package from source (~100 ms of CPU here), a cost
    no installed agent pays. ``compileall`` writes the files even with that variable set.
    """
    import compileall

    compileall.compile_dir(str(ROOT / "agent_server"), quiet=1)


def agent_env(state_dir: str, base_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The agent's environment: a fresh state folder, the endpoint, a dummy key and model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SERVER_")}
    env.update({"AGENT_SERVER_STATE_DIR": state_dir, "AGENT_SERVER_BASE_URL": base_url,
                "AGENT_SERVER_API_KEY": "bench", "AGENT_SERVER_MODEL": "offline-model",
                "AGENT_SERVER_CONFIG": os.path.join(state_dir, "no-config.toml")})
    env.update(extra or {})
    Path(env["AGENT_SERVER_CONFIG"]).touch()  # an empty config file: no user settings leak in
    return env
