"""MCP servers run with the official SDK: real servers from PyPI (``mcp-server-time``) and a server
the test builds with the SDK (stdio and Streamable HTTP); failures each give a clear error."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support.procs import descendants, wait_gone
from support.timeouts import HANG

from agent_server.tools.mcp import McpServerSpec, expose_names, render_result, specs_from_acp
from agent_server.tools.mcp.connection import McpConnection, McpError

HERE = Path(__file__).resolve().parent
SCRIPTED = [sys.executable, str(HERE / "scripted_server.py")]
BIN = Path(sys.executable).parent


def stdio(name: str, *argv: str) -> McpServerSpec:
    return McpServerSpec(name, "stdio", command=argv[0], args=tuple(argv[1:]))


def outer_pid(inner: int) -> int:
    """Our pid of a descendant that reported ``inner``, its pid in its own PID namespace (stdio
    servers run in one: ``reaper.py``); the ``NSpid`` line of ``/proc/PID/status`` lists both."""
    for pid in descendants(os.getpid()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if nspid and int(nspid[-1]) == inner:
            return pid
    raise AssertionError(f"no descendant has pid {inner} in its namespace")


def env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}


async def test_real_time_server_from_pypi_answers_a_call():
    conn = McpConnection(stdio("time", str(BIN / "mcp-server-time"), "--local-timezone", "UTC"), env())
    try:
        tools = {t["name"] for t in await conn.start()}
        assert "get_current_time" in tools
        result = await conn.call("get_current_time", {"timezone": "Europe/Paris"})
        text, is_error = render_result(result)
        assert not is_error and "Europe/Paris" in text
    finally:
        await conn.close()


async def test_http_server_built_with_the_sdk_answers_with_structured_content():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*SCRIPTED, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        conn = McpConnection(McpServerSpec("web", "http", url=f"http://127.0.0.1:{port}/mcp",
                                           headers={"X-Test": "1"}), env())
        try:
            tools = {t["name"]: t for t in await conn.start()}
            assert tools["add"]["annotations"]["readOnlyHint"] is True
            text, is_error = render_result(await conn.call("add", {"a": 40, "b": 2}))
            assert (text, is_error) == ("42", False)
        finally:
            await conn.close()
    finally:
        proc.terminate()
        proc.wait(HANG)


async def test_server_that_exits_mid_call_gives_a_clear_error_and_restarts_on_the_next_call():
    conn = McpConnection(stdio("s", *SCRIPTED, "stdio"), env())
    try:
        await conn.start()
        with pytest.raises(McpError, match="stopped during the call"):
            await conn.call("crash", {})
        text, _ = render_result(await conn.call("add", {"a": 1, "b": 1}))
        assert text == "2"
    finally:
        await conn.close()


async def test_server_that_never_starts_is_reported_with_its_name():
    conn = McpConnection(stdio("broken", "/bin/false"), env(), start_timeout=10)
    with pytest.raises(McpError, match="'broken' did not start"):
        await conn.start()


async def test_hanging_tool_times_out_and_cancel_reaches_the_caller():
    conn = McpConnection(stdio("s", *SCRIPTED, "stdio"), env())
    try:
        await conn.start()
        with pytest.raises(McpError, match="timed out after 1 s"):
            await conn.call("sleep", {"seconds": 30}, timeout=1)
        task = asyncio.create_task(conn.call("sleep", {"seconds": 30}))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        text, _ = render_result(await conn.call("add", {"a": 2, "b": 2}))
        assert text == "4"
    finally:
        await conn.close()


async def test_close_leaves_no_server_process():
    conn = McpConnection(stdio("s", *SCRIPTED, "stdio"), env())
    await conn.start()
    servers = descendants(os.getpid())
    assert servers, "the server process should be our child"
    await conn.close()
    assert wait_gone(servers)


def test_kill_9_of_the_agent_leaves_no_server_process(tmp_path):
    holder = tmp_path / "holder.py"
    holder.write_text(
        "import asyncio, os, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from agent_server.tools.mcp import McpServerSpec\n"
        "from agent_server.tools.mcp.connection import McpConnection\n"
        "async def main():\n"
        "    c = McpConnection(McpServerSpec('s', 'stdio', command=sys.executable, args=(sys.argv[2], 'stdio')),"
        " dict(os.environ))\n"
        "    await c.start()\n"
        "    print('ready', flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n")
    proc = subprocess.Popen([sys.executable, str(holder), str(HERE.parents[1]), str(HERE / "scripted_server.py")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    kids = descendants(proc.pid)
    assert kids
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(kids), kids


def test_exposed_names_are_valid_unique_and_deterministic():
    tools = {"git hub": ["create issue", "create-issue"], "x" * 70: ["t"], "time": ["get_current_time"]}
    names = expose_names(tools)
    assert all(len(n) <= 64 and n.replace("_", "a").replace("-", "a").isalnum() for n in names)
    assert names["mcp__git_hub__create_issue"] == ("git hub", "create issue")
    assert names["mcp__git_hub__create-issue"] == ("git hub", "create-issue")
    assert names["mcp__time__get_current_time"] == ("time", "get_current_time")
    assert expose_names(tools) == names and len(names) == 4
    clash = expose_names({"a.b": ["c"], "a_b": ["c"]})
    assert list(clash) == ["mcp__a_b__c", "mcp__a_b__c_2"]


def test_specs_from_acp_reads_stdio_and_http_and_reports_the_rest():
    specs, problems = specs_from_acp([
        {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"],
         "env": [{"name": "TZ", "value": "UTC"}]},
        {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "A", "value": "b"}]},
        {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []},
        {"name": "time", "command": "again"},
        {"command": "nameless"},
    ])
    assert [(s.name, s.transport) for s in specs] == [("time", "stdio"), ("web", "http")]
    assert specs[0].env == {"TZ": "UTC"} and specs[1].headers == {"A": "b"}
    assert len(problems) == 3 and "SSE" in problems[0] and "twice" in problems[1]


def test_render_result_describes_images_and_resources_and_keeps_errors():
    text, is_error = render_result({"content": [
        {"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"}},
        {"type": "resource_link", "uri": "file:///b", "name": "b"}], "structuredContent": {"n": 1}, "isError": True})
    assert is_error
    assert text.splitlines() == ["see", "[image: image/png, 5 bytes — not shown to the model]",
                                 "[resource: file:///a.txt (text/plain)]", "A", "[resource link: file:///b — b]",
                                 json.dumps({"n": 1})]
    assert render_result({"content": [{"type": "text", "text": '{"n": 1}'}], "structuredContent": {"n": 1}})[0] == '{"n": 1}'


def test_the_acp_start_up_path_does_not_import_the_mcp_sdk():
    code = ("import sys, agent_server.server.acp.server, agent_server.server.rpc.stdio, agent_server.tools; "
            "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))); "
            "print(loaded); sys.exit(1 if loaded else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_request_waited_while_the_mcp_sdk_was_imported_on_the_event_loop(tmp_path):
    """Issue 31 item 11: starting a stdio server imported the SDK on the event loop, so every request
    waited 2–4 s. Now the SDK is imported in a worker thread: no module of it is first looked up
    on the loop's thread."""
    script = tmp_path / "spy.py"
    script.write_text(
        "import asyncio, os, sys, threading\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from agent_server.tools.mcp import McpServerSpec\n"
        "from agent_server.tools.mcp.connection import McpConnection\n"
        "on_loop = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'mcp_types'):\n"
        "            on_loop.append((name, threading.current_thread() is threading.main_thread()))\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        "async def main():\n"
        "    c = McpConnection(McpServerSpec('s', 'stdio', command=sys.executable, args=(sys.argv[2], 'stdio')),"
        " dict(os.environ))\n"
        "    await c.start()\n"
        "    await c.call('add', {'a': 1, 'b': 2})\n"
        "    await c.close()\n"
        "asyncio.run(main())\n"
        "print(sorted({name for name, main in on_loop if main}), len(on_loop))\n")
    proc = subprocess.run([sys.executable, str(script), str(HERE.parents[1]), str(HERE / "scripted_server.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    on_loop, looked_up = proc.stdout.split("] ")
    assert on_loop + "]" == "[]" and int(looked_up) > 0, proc.stdout


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_tool_list_changed_mid_session_is_listed_again(protocol):
    """Before: notifications/tools/list_changed was ignored, so a tool a server added mid-session
    was never offered and a changed description never reached the model."""
    changes: list[list[dict]] = []

    async def changed(server, tools):
        changes.append(tools)

    conn = McpConnection(stdio("changing", sys.executable, str(HERE / "changing_server.py"), protocol), env(),
                         on_tools_changed=changed)
    try:
        assert sorted(t["name"] for t in await conn.start()) == ["add", "grow", "reword"]
        await conn.call("grow", {})
        await conn.settled()
        assert changes, "no tool list change was seen"
        assert sorted(t["name"] for t in changes[-1]) == ["add", "extra", "grow", "reword"]
        await conn.call("reword", {})
        await conn.settled()
        tools = {t["name"]: t for t in changes[-1]}
        assert len(changes) == 2 and conn.tools == changes[-1]
        assert tools["add"]["description"] == "Add two integers (now described anew)."
        text, is_error = render_result(await conn.call("extra", {"text": "ab"}))
        assert not is_error and "abab" in text
    finally:
        await conn.close()


async def test_server_that_fails_to_start_said_only_connection_closed_and_its_stderr_leaked_into_ours(capfd):
    """Before: the reason ("setpriv: failed to execute …", a server's own error) went to the agent's
    stderr and the user read only "did not start: Connection closed"."""
    conn = McpConnection(stdio("broken", "sh", "-c", "echo 'boom: no config at /etc/x.toml' >&2; exit 3"), env(),
                         start_timeout=20)
    with pytest.raises(McpError) as raised:
        await conn.start()
    assert "'broken' did not start" in str(raised.value)
    assert "boom: no config at /etc/x.toml" in str(raised.value)
    assert "boom" not in capfd.readouterr().err


async def test_a_server_logging_to_stderr_grew_its_capture_file_without_bound():
    """Before: a stdio server's stderr went to a temporary file that grew with everything it ever
    wrote (a day of request logs: gigabytes). Now it is a pipe we read, keeping only the end."""
    conn = McpConnection(stdio("noisy", *SCRIPTED, "stdio"), env())
    try:
        await conn.start()
        text, is_error = render_result(await conn.call("noise", {"megabytes": 8}))
        assert not is_error, text
        captured = os.stat(f"/proc/{outer_pid(int(text))}/fd/2")
        assert stat.S_ISFIFO(captured.st_mode), "the server's stderr is a file on disk"
        async def read_to_the_end() -> None:  # the loop reads the pipe as it fills
            while not conn.stderr_tail(100).endswith("LAST-LINE"):
                await asyncio.sleep(0.01)
        await asyncio.wait_for(read_to_the_end(), HANG)
        with pytest.raises(McpError) as raised:
            await conn.call("crash", {})
        said = str(raised.value)
        assert said.endswith("LAST-LINE") and "its stderr ends (" in said and " cut)" in said, said
        written = int(said.split("its stderr ends (")[1].split(" bytes written")[0].replace(",", ""))
        cut = int(said.split("the first ")[1].split(" cut)")[0].replace(",", ""))
        from agent_server.tools.mcp.stderr import KEEP_BYTES

        assert written > 8_000_000 and written - cut <= KEEP_BYTES
        text, _ = render_result(await conn.call("add", {"a": 1, "b": 2}))  # restarted: a new pipe, the same tail
        assert text == "3" and conn.stderr_tail(100).endswith("LAST-LINE")
    finally:
        await conn.close()


async def test_a_server_restarted_after_a_crash_kept_its_old_tool_list_offered(tmp_path):
    """Before: the restart on the next call listed the new server's tools but told no one, so the
    model was offered the tools of the process that had died."""
    changes: list[list[str]] = []

    async def changed(server, tools):
        changes.append(sorted(t["name"] for t in tools))

    conn = McpConnection(stdio("r", sys.executable, str(HERE / "restarting_server.py"), str(tmp_path / "runs")),
                         env(), on_tools_changed=changed)
    try:
        assert sorted(t["name"] for t in await conn.start()) == ["crash", "ping"]
        with pytest.raises(McpError, match="stopped during the call"):
            await conn.call("crash", {})
        assert render_result(await conn.call("ping", {}))[0].startswith("run 2")
        assert changes == [["after_restart", "crash", "ping"]]
        assert render_result(await conn.call("after_restart", {"text": "hi"}))[0].startswith("restarted: hi")
    finally:
        await conn.close()


async def test_a_servers_elicitation_and_sampling_requests_are_declined_at_once_never_left_hanging():
    """Issue 31 item 12 (the declining part): an MCP server's ``elicitation/create`` and
    ``sampling/createMessage`` are answered at once with an error that says so (we advertise neither
    capability: the SDK's own decline, for a connection given no ``elicit``); the tool call goes on.
    Forwarding to a client that takes elicitations: tests/e2e/test_ts_sdk_client.py."""
    conn = McpConnection(stdio("asking", sys.executable, str(HERE / "asking_server.py")), env(), call_timeout=60)
    try:
        assert {t["name"] for t in await conn.start()} == {"ask", "ask_name", "sample"}
        asked, _ = render_result(await conn.call("ask", {}))
        sampled, _ = render_result(await conn.call("sample", {}))
        # the SDK's words differ by protocol version ("Elicitation not supported"; on a 2026-07-28
        # connection "no back-channel for server-initiated requests"): refused at once, either way
        assert asked.startswith("refused:") and "licitation" in asked, asked
        assert sampled.startswith("refused:") and ("ampling" in sampled or "createMessage" in sampled), sampled
    finally:
        await conn.close()


async def test_an_elicitation_the_user_never_answers_ends_with_the_call_timeout_never_hanging():
    """Issue 31 item 12: an elicitation forwarded to a client that never answers is bounded by the
    call timeout (the call fails and says so); one the user declines goes back as declined."""
    asked: list[tuple[str, dict]] = []

    async def never(server, params):
        asked.append((server, params))
        await asyncio.Event().wait()

    async def decline(server, params):
        return {"action": "decline"}

    conn = McpConnection(stdio("asking", sys.executable, str(HERE / "asking_server.py")), env(), call_timeout=3,
                         elicit=never)
    try:
        await conn.start()
        with pytest.raises(McpError, match="timed out after 3 s"):
            await conn.call("ask_name", {})
        assert [(s, p["message"]) for s, p in asked] == [("asking", "Your name, please?")]
    finally:
        await conn.close()
    conn = McpConnection(stdio("asking", sys.executable, str(HERE / "asking_server.py")), env(), call_timeout=30,
                         elicit=decline)
    try:
        await conn.start()
        text, _ = render_result(await conn.call("ask_name", {}))
        assert text.startswith("no name: decline"), text
    finally:
        await conn.close()
