"""The warm-up after ``session/new`` leaves the event loop free (issue 31 item 7's first page).

In process: the real ``AcpServer`` (no connection). A ``session/list`` sent right after a
``session/new`` answer waited for the warm-up's imports (httpx, anyio's backend), made on the event
loop: 0.3–1.3 s under load at 2,000 sessions (bench/README.md, *sessions_mcp.py*).
"""

from __future__ import annotations

import json
import os
import threading

from agent_server.config.load import load_config
from agent_server.llm import ChatClient
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore
from support.probe import answered
from support.timeouts import HANG


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


async def test_the_first_prompt_to_an_https_endpoint_opened_its_connection_after_the_user_pressed_enter(
        tmp_path, monkeypatch):
    """A remote provider's first request resolved its name, connected and did its TLS handshake
    after the prompt was sent (tens to hundreds of ms): ``session/new``'s warm-up opened a spare
    only for a plain-http endpoint at an IP address. Now it opens the https endpoint's (a real TLS
    endpoint, its CA trusted as httpx reads the environment), and the first prompt's request goes
    out on it, the first bytes it carries."""
    import asyncio

    from support.tls import TLSEndpoint

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    endpoint = TLSEndpoint(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))
    async with endpoint:
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.url(),
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
                                                   "AGENT_SERVER_SANDBOX": "off"})
        server = AcpServer(config, SessionStore(tmp_path / "state"))
        try:
            # (the answer, then what follows it: the warm-up)
            sid = (await answered(server, "session/new", {"cwd": str(tmp_path), "mcpServers": []}, 10))["sessionId"]
            client = server.host.pool.get(endpoint.url(), "k")
            assert await asyncio.wait_for(asyncio.gather(*client._tails), HANG) == [True]
            await endpoint.wait_connections(1)
            assert endpoint.connections[0]["received"] == b""  # nothing sent on it
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
            assert (await answered(server, "session/prompt", prompt, 10))["stopReason"] == "end_turn"
        finally:
            await server.aclose()
    assert len(endpoint.connections) == 1
    assert endpoint.connections[0]["received"].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")


async def test_an_editor_opened_with_its_key_in_the_keyring_was_asked_for_it_before_anyone_asked_the_agent(
        tmp_path, monkeypatch):
    """The warm-up before any session (``SessionHost.warm(None)``: the LSP front end runs it once
    the editor is idle after ``initialized``) leaves a key still in the system keyring there: a
    locked keyring would ask to be unlocked when the editor merely opened a file. The first prompt
    reads it. A key in memory is warmed as usual (the client made)."""
    from agent_server.config import credentials
    from agent_server.host import SessionHost

    asked: list[str] = []
    monkeypatch.setattr(credentials, "keyring_get", lambda profile, timeout=None: asked.append(profile) or "sk-x")
    home = tmp_path / "home"  # what `agent-server login` leaves when it stored the key in the keyring
    (home / ".config" / "agent-server").mkdir(parents=True)
    (home / ".config" / "agent-server" / "config.toml").write_text(
        '[profiles.remote]\nbase_url = "http://127.0.0.1:9/v1"\nkey_required = true\n')
    (home / ".config" / "agent-server" / "credentials.json").write_text(json.dumps(
        {"version": 1, "profile": "remote", "profiles": {"remote": {"model": "m", "key_store": "keyring"}}}))
    config = load_config(env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "AGENT_SERVER_SANDBOX": "off"})
    assert config.provider_for(config.provider.model).key_store == "keyring"
    host = SessionHost(config, SessionStore(tmp_path / "state"))
    try:
        await host.warm()
        assert asked == [] and not host.pool._clients
    finally:
        await host.aclose()
    env = {"AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1", "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
           "AGENT_SERVER_SANDBOX": "off"}
    host = SessionHost(load_config(path=os.devnull, env=env), SessionStore(tmp_path / "state2"))
    try:
        await host.warm()
        assert len(host.pool._clients) == 1  # the control: a key in memory is warmed
    finally:
        await host.aclose()
