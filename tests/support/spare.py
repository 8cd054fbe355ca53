"""Helpers of the warm-spare tests (tests/spare): a spare in a private folder, the processes of a launch.

``SpareFolder(path)``: the environment that turns the spare on for one launch, with the folder and a
short idle time; ``start()`` runs one launch with stdin at end of file (cold: it starts the spare)
and waits until the spare listens; ``stop()`` is ``agent-server spare stop`` and waits until the
process is gone. ``server_of(launcher)`` finds the process that serves a launch (the one that
holds the launcher's stdin).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from .fixtures import agent_server_command

AGENT = agent_server_command()
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def new_session(request_id: int, cwd: str) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "session/new",
                        "params": {"cwd": cwd, "mcpServers": []}}) + "\n").encode()


class SpareFolder:
    def __init__(self, path: Path, idle: float = 20) -> None:
        self.path = path
        self.env = {"AGENT_SERVER_SPARE": "on", "AGENT_SERVER_SPARE_DIR": str(path),
                    "AGENT_SERVER_SPARE_IDLE": str(idle)}
        self.pid = 0

    def full_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, **self.env, **(extra or {})}

    def status(self) -> dict:
        done = subprocess.run([*AGENT, "spare", "status", "--json"], env=self.full_env(), capture_output=True,
                              text=True, timeout=30, check=True)
        return json.loads(done.stdout)

    def live(self) -> dict[str, int]:
        return {s["key"]: s["pid"] for s in self.status()["spares"]}

    def start(self, extra: dict[str, str] | None = None, timeout: float = 20) -> int:
        """One launch with stdin at its end (it runs cold and starts the spare); the spare's pid."""
        subprocess.run(AGENT, stdin=subprocess.DEVNULL, capture_output=True, env=self.full_env(extra), timeout=30,
                       check=True)
        return self.wait_serving(timeout)

    def wait_serving(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            pid = {s["key"]: s["pid"] for s in status["spares"]}.get(status["key"])
            if pid and (self.path / f"spare-{status['key']}.sock").exists():
                self.pid = pid
                return pid
            time.sleep(0.05)
        raise AssertionError(f"no spare listening in {self.path}: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"{p.name}: {p.read_text(errors='replace')}" for p in self.path.glob("*.log"))

    def stop(self) -> None:
        pids = list(self.live().values()) if self.path.is_dir() else []
        subprocess.run([*AGENT, "spare", "stop"], env=self.full_env(), capture_output=True, timeout=30)
        for pid in pids:
            assert wait_gone(pid, 10), f"spare {pid} still runs after agent-server spare stop"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def fd_inode(pid: int, fd: int) -> int:
    return os.stat(f"/proc/{pid}/fd/{fd}").st_ino


def fd_targets(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def server_of(launcher: int, timeout: float = 5, parent: int | None = None) -> int | None:
    """The pid, other than the launcher's, of the process holding the launcher's stdin (its server
    when a spare serves it) — a child of ``parent`` if given; ``None`` if there is none (the launch
    runs cold in the launcher)."""
    deadline = time.monotonic() + timeout
    wanted = os.readlink(f"/proc/{launcher}/fd/0")
    while True:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == launcher:
                continue
            try:
                if os.readlink(f"/proc/{entry}/fd/0") == wanted and alive(int(entry)) and (
                        parent is None or ppid(int(entry)) == parent):
                    return int(entry)
            except OSError:
                continue
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def read_response(proc: subprocess.Popen, request_id: int, timeout: float = 20) -> dict:
    """Read the launch's stdout lines until the response to ``request_id``."""
    import select

    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    buffer = getattr(proc, "_buffer", b"")
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                proc._buffer = buffer
                return message
        left = deadline - time.monotonic()
        assert left > 0, f"no response {request_id}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"stdout closed before response {request_id} (exit {proc.poll()})"
            buffer += chunk
