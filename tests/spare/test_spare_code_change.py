"""A warm spare never serves code older than the launch's (agent_server/spare/): its own module
file, since a change anywhere in the package changes every launch's key. In a module of its own:
the change it makes would also stop test_spare.py's shared spare."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.spare import AGENT, INIT, SpareFolder, wait_gone

import agent_server.spare
from agent_server.spare._daemon import SERVED_NOTE


def test_after_a_code_change_the_stale_spare_serves_no_launch_and_exits(tmp_path):
    folder = SpareFolder(tmp_path / "spare", idle=5)  # checks its code every 0.5 s
    env = folder.full_env({"AGENT_SERVER_STATE_DIR": str(tmp_path / "state"), "AGENT_SERVER_LOG_LEVEL": "DEBUG",
                           "AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1", "AGENT_SERVER_API_KEY": "k",
                           "AGENT_SERVER_MODEL": "m"})

    def served() -> bool:
        done = subprocess.run(AGENT, input=INIT, capture_output=True, env=env, timeout=30, check=True)
        assert b'"protocolVersion":1' in done.stdout
        return SERVED_NOTE.encode() in done.stderr

    stale = folder.start()
    old_key = folder.status()["key"]
    assert served()
    module = Path(agent_server.spare.__file__).with_name("__main__.py")
    st = module.stat()
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as an editor's save would
        assert folder.status()["key"] != old_key
        assert not served()  # cold: the stale spare's key no longer matches (and a new one is started)
        assert wait_gone(stale, 5), "the stale spare is still running"
        assert not (folder.path / f"spare-{old_key}.sock").exists()
        fresh = folder.wait_serving()
        assert fresh != stale and served()
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
        folder.stop()
