"""The warm-up after ``session/new`` leaves the event loop free (issue 31 item 7's first page).

In process: the real ``AcpServer`` (no connection). A ``session/list`` sent right after a
``session/new`` answer waited for the warm-up's imports (httpx, anyio's backend), made on the event
loop: 0.3–1.3 s under load at 2,000 sessions (bench/README.md, *sessions_mcp.py*).
"""

from __future__ import annotations

import os
import threading

from agent_server.config.load import load_config
from agent_server.llm import ChatClient
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore
from support.probe import answered


async def test_a_session_list_right_after_session_new_waited_for_the_warm_ups_imports_on_the_loop(
        tmp_path, monkeypatch):
    loop_thread = threading.current_thread()
    preloaded: list[threading.Thread] = []
    real = ChatClient.preload

    def recording() -> None:
        preloaded.append(threading.current_thread())
        real()

    monkeypatch.setattr(ChatClient, "preload", staticmethod(recording))
    config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1",
                                               "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
                                               "AGENT_SERVER_SANDBOX": "off"})
    server = AcpServer(config, SessionStore(tmp_path / "state"))
    try:
        sid = (await answered(server, "session/new", {"cwd": str(tmp_path), "mcpServers": []}, 1))["sessionId"]
        await server.host.warm(sid)
        # the first preload imports (a later one, on the loop, finds every module loaded)
        assert preloaded and preloaded[0] is not loop_thread, preloaded
    finally:
        await server.aclose()
