"""The sandbox probe leaves no ``agent-server-probe-*`` folder behind, even when the server is
killed mid-probe: the probe removes its own folder when it ends, and runs in a process group of its
own, so a kill of the server's group lets it end. Real subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agent_server.policy.sandbox.confiner import EXEC_WRAPPER

ROOT = Path(__file__).resolve().parents[2]


def test_a_probe_removes_its_own_folder_when_it_ends(tmp_path):
    base = tmp_path / "agent-server-probe-x"
    base.mkdir()
    out = subprocess.run([sys.executable, "-I", "-S", "-B", str(EXEC_WRAPPER), "--probe", str(base)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and '"abi"' in out.stdout
    assert not base.exists()


def probes_in(tmp: Path) -> tuple[list[str], list[int]]:
    dirs = [n for n in os.listdir(tmp) if n.startswith("agent-server-probe-")]
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"--probe\0" + str(tmp).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                procs.append(int(pid))
        except OSError:
            pass
    return dirs, procs


def test_a_server_killed_with_its_group_mid_probe_leaves_no_probe_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    holder = tmp_path / "holder.py"
    holder.write_text(textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT)!r})
        from agent_server.config.load import PolicySettings
        from agent_server.policy.sandbox.confiner import probe_status
        asyncio.run(probe_status(PolicySettings()))
        asyncio.run(asyncio.sleep(60))
    """))
    proc = subprocess.Popen([sys.executable, str(holder)], env={**os.environ, "TMPDIR": str(tmp)},
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not probes_in(tmp)[1] and time.monotonic() < deadline:
            time.sleep(0.002)
        assert probes_in(tmp)[1], "the probe never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while probes_in(tmp) != ([], []) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert probes_in(tmp) == ([], [])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
