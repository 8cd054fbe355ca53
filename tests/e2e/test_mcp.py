"""End to end: MCP servers from ``session/new`` — real servers from PyPI (``mcp-server-time``,
``mcp-server-git``) and one the test builds with the SDK over HTTP — called by the scripted model
through the real server, with the policy for untrusted and trusted servers, failures that leave
the session going, and no server process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.client_impl import ClientConfig
from support.procs import descendants, processes_naming, wait_gone
from support.replay import assert_replay_matches
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events

BIN = Path(sys.executable).parent
SCRIPTED = Path(__file__).resolve().parents[1] / "mcp" / "scripted_server.py"


def stdio(name: str, command: str, *args: str) -> dict:
    return {"name": name, "command": command, "args": list(args), "env": []}


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


def tool_results(endpoint, n: int) -> list[str]:
    return [m["content"] for m in endpoint.requests[n].json()["messages"] if m["role"] == "tool"]


def tool_names(endpoint, n: int) -> list[str]:
    return [t["function"]["name"] for t in endpoint.requests[n].json().get("tools", [])]


async def start(factory, endpoint, workspace, servers, *, permission="allow_once", agent: str = "", policy: str = ""):
    # servers start in parallel with the first prompt; on a loaded CI machine they may need long
    config = workspace.parent / "mcp-config.toml"
    config.write_text(f"[agent]\nmcp_start_wait = 120\n{agent}\n[policy]\n{policy}\n")
    client = ClientConfig(permission=permission)
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config)},
                      config=client)
    await h.initialize(client.capabilities())
    session = await h.new_session(str(workspace), mcp_servers=servers)
    return h, session.session_id


async def test_real_time_and_git_servers_answer_the_model_after_the_user_allows(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tracked.txt").write_text("x\n")
    asked = []

    def allow(params):
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    servers = [stdio("time", str(BIN / "mcp-server-time"), "--local-timezone", "UTC"),
               stdio("git", str(BIN / "mcp-server-git"), "--repository", str(workspace))]
    endpoint.push(call("t", "mcp__time__get_current_time", timezone="Asia/Tokyo"))
    endpoint.push(call("g", "mcp__git__git_status", repo_path=str(workspace)))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, permission=allow)
    assert (await h.prompt(sid, "what time is it, and what is untracked?")).stop_reason == "end_turn"
    assert {"mcp__time__get_current_time", "mcp__git__git_status"} <= set(tool_names(endpoint, 0))
    assert "Asia/Tokyo" in tool_results(endpoint, 1)[0]
    assert "tracked.txt" in tool_results(endpoint, 2)[1]
    # every call of an untrusted server asked, showing its arguments
    assert [q["toolCall"]["title"] for q in asked][:1] == ["get_current_time (time MCP server)"]  # the call's own
    shown = json.dumps(asked[0]["toolCall"])
    assert "Asia/Tokyo" in shown and "MCP servers run outside the sandbox" in shown
    calls = [u for u in h.updates(sid, "tool_call") if u["title"].startswith("get_current_time")]
    assert calls and calls[0]["kind"] == "read"  # from readOnlyHint: display only, the policy still asked
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    mapped = [e.data["map"] for e in events if e.type == "mcp/tools"]
    assert mapped[-1]["mcp__time__get_current_time"] == ["time", "get_current_time"]


async def test_trusted_read_only_tool_runs_without_asking_over_http_and_allow_always_is_exact_for_untrusted(
        acp_harness_factory, endpoint, workspace):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    web = subprocess.Popen([sys.executable, str(SCRIPTED), "http", str(port)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    h = None
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        asked = []

        def always(params):
            asked.append(params)
            return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

        servers = [{"type": "http", "name": "web", "url": f"http://127.0.0.1:{port}/mcp", "headers": []},
                   stdio("local", sys.executable, str(SCRIPTED), "stdio")]
        endpoint.push(call("a", "mcp__web__add", a=2, b=3))                 # trusted + readOnlyHint: no question
        endpoint.push(call("b", "mcp__local__shout", text="hi"))            # untrusted: asked, allowed always
        endpoint.push(call("c", "mcp__local__shout", text="hi"))            # same arguments: remembered
        endpoint.push(call("d", "mcp__local__shout", text="other"))         # other arguments: asked again
        endpoint.push(text_stream("done"))
        h, sid = await start(acp_harness_factory, endpoint, workspace, servers, permission=always,
                             policy='mcp_trusted = ["web"]')
        assert (await h.prompt(sid, "compute")).stop_reason == "end_turn"
        assert tool_results(endpoint, 1) == ["5"]
        assert "HI" in tool_results(endpoint, 2)[-1] and "HI" in tool_results(endpoint, 3)[-1]
        assert "OTHER" in tool_results(endpoint, 4)[-1]
        assert [json.loads(q["toolCall"]["rawInput"] if isinstance(q["toolCall"].get("rawInput"), str)
                           else json.dumps(q["toolCall"]["rawInput"]))["text"] for q in asked] == ["hi", "other"]
    finally:
        if h is not None:  # the agent first: it holds a subscriptions/listen stream the server would wait for
            await h.close()
        web.terminate()
        web.wait(HANG)


async def test_untrusted_server_asks_even_in_danger_full_access_and_a_rejection_tells_the_model(
        acp_harness_factory, endpoint, workspace):
    endpoint.push(call("a", "mcp__local__add", a=1, b=1))
    endpoint.push(text_stream("ok"))
    h, sid = await start(acp_harness_factory, endpoint, workspace,
                         [stdio("local", sys.executable, str(SCRIPTED), "stdio")], permission="reject_once")
    await h.request("session/set_mode", {"sessionId": sid, "modeId": "danger-full-access"})
    assert (await h.prompt(sid, "add")).stop_reason == "end_turn"
    assert "Rejected by the user" in tool_results(endpoint, 1)[0]


async def test_failing_servers_give_clear_results_and_the_session_goes_on(
        acp_harness_factory, endpoint, workspace):
    servers = [stdio("local", sys.executable, str(SCRIPTED), "stdio"), stdio("broken", "/bin/false")]
    endpoint.push(call("c", "mcp__local__crash"))
    endpoint.push(call("s", "mcp__local__sleep", seconds=30))
    endpoint.push(call("a", "mcp__local__add", a=20, b=22))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, agent="mcp_call_timeout = 2")
    assert (await h.prompt(sid, "try them")).stop_reason == "end_turn"
    crash, sleep, add = tool_results(endpoint, 1)[0], tool_results(endpoint, 2)[1], tool_results(endpoint, 3)[2]
    assert "stopped during the call" in crash
    assert "timed out after 2 s" in sleep
    assert add == "42"  # restarted after the crash
    said = "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))
    assert "'broken' did not start" in said
    assert not any(n.startswith("mcp__broken__") for n in tool_names(endpoint, 0))


async def test_cancel_of_a_hanging_mcp_call_ends_the_turn_and_the_next_call_is_answered(
        acp_harness_factory, endpoint, workspace):
    """session/cancel during a call the server never answers: the turn ends ``cancelled``, the
    call is not left running, and the next prompt's call to the same server is answered."""
    servers = [stdio("local", sys.executable, str(SCRIPTED), "stdio")]
    endpoint.push(call("s", "mcp__local__sleep", seconds=300))
    endpoint.push(call("a", "mcp__local__add", a=2, b=2))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers)
    task = h.start_prompt(sid, "sleep", timeout=120)
    await h.wait_for_update("tool_call_update", session_id=sid,
                            predicate=lambda u: u.get("toolCallId") and u.get("status") == "in_progress",
                            timeout=120)
    await h.cancel(sid)
    assert (await asyncio.wait_for(task, HANG)).stop_reason == "cancelled"
    ends = [u for u in h.updates(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert ends and ends[-1]["status"] == "failed"  # the hanging call is closed, not left running
    assert (await h.prompt(sid, "add", timeout=120)).stop_reason == "end_turn"
    assert tool_results(endpoint, 2)[-1] == "4"


@pytest.mark.replay_exempt("sessions are deleted and agents killed")
async def test_no_server_process_survives_close_delete_exit_or_kill_9(acp_harness_factory, endpoint, workspace):
    servers = [stdio("local", sys.executable, str(SCRIPTED), "stdio")]

    async def session_with_a_running_server():
        endpoint.push(call("a", "mcp__local__add", a=1, b=2))
        endpoint.push(text_stream("ok"))
        h, sid = await start(acp_harness_factory, endpoint, workspace, servers)
        assert (await h.prompt(sid, "add")).stop_reason == "end_turn"
        kids = descendants(h.pid)
        assert kids
        return h, sid, kids

    h, sid, kids = await session_with_a_running_server()
    await h.request("session/close", {"sessionId": sid})
    assert wait_gone(kids)
    h, sid, kids = await session_with_a_running_server()
    await h.request("session/delete", {"sessionId": sid})
    assert wait_gone(kids)
    h, sid, kids = await session_with_a_running_server()
    await h.close()  # the editor goes away: stdin closes, the agent exits
    assert wait_gone(kids)
    h, sid, kids = await session_with_a_running_server()
    os.kill(h.pid, signal.SIGKILL)
    assert wait_gone(kids)


FORKING = Path(__file__).resolve().parents[1] / "mcp" / "forking_server.py"


async def test_a_double_forked_setsid_helper_survived_session_close_exit_and_kill_9(
        acp_harness_factory, endpoint, workspace, tmp_path):
    """Issue 31 item 8: a server started through ``sh -c`` that double-forks a ``setsid`` helper
    ignoring SIGTERM/SIGHUP and stdin EOF: nothing of it is left after ``session/close``, the
    agent's normal exit, or its ``kill -9``."""
    async def session_with_a_running_server(n):
        pidfile = tmp_path / f"helper-{n}.pid"
        endpoint.push(call("p", "mcp__forking__ping"))
        endpoint.push(text_stream("ok"))
        h, sid = await start(acp_harness_factory, endpoint, workspace,
                             [stdio("forking", sys.executable, str(FORKING), str(pidfile), "sh")])
        assert (await h.prompt(sid, "ping")).stop_reason == "end_turn"
        assert tool_results(endpoint, -1)[0].startswith("pong")
        tree = processes_naming(str(pidfile))
        assert len(tree) >= 4, tree  # launcher, sh, server, helper
        return h, sid, tree, pidfile

    leftovers = []
    try:
        h, sid, tree, pidfile = await session_with_a_running_server(1)
        leftovers.append(pidfile)
        await h.request("session/close", {"sessionId": sid})
        assert wait_gone(tree), tree
        h, sid, tree, pidfile = await session_with_a_running_server(2)
        leftovers.append(pidfile)
        await h.close()  # the editor goes away: stdin closes, the agent exits
        assert wait_gone(tree), tree
        h, sid, tree, pidfile = await session_with_a_running_server(3)
        leftovers.append(pidfile)
        os.kill(h.pid, signal.SIGKILL)
        assert wait_gone(tree), tree
    finally:
        for pid in [p for f in leftovers for p in processes_naming(str(f))]:
            os.kill(pid, signal.SIGKILL)


CHANGING = Path(__file__).resolve().parents[1] / "mcp" / "changing_server.py"


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_tools_list_changed_mid_session_reaches_the_next_request_and_replay_stays_byte_exact(
        acp_harness_factory, endpoint, workspace, agent_state_dir, protocol):
    """Before: notifications/tools/list_changed was ignored — the tool the server added was never
    offered and the model kept the old description of the one it changed."""
    servers = [stdio("changing", sys.executable, str(CHANGING), protocol)]
    endpoint.push(call("g", "mcp__changing__grow"))
    endpoint.push(call("r", "mcp__changing__reword"))
    endpoint.push(call("e", "mcp__changing__extra", text="ab"))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, policy='mcp_trusted = ["changing"]')
    assert (await h.prompt(sid, "grow, then use the new tool")).stop_reason == "end_turn"

    def offered(n: int) -> dict[str, dict]:
        return {t["function"]["name"]: t["function"] for t in endpoint.requests[n].json().get("tools", [])}

    assert "mcp__changing__extra" not in offered(0)
    assert "mcp__changing__extra" in offered(1)  # the very next request
    assert offered(1)["mcp__changing__add"]["description"] == "Add two integers."
    # the same names, one description changed: the next request still offers the new text
    assert offered(2)["mcp__changing__add"]["description"] == "Add two integers (now described anew)."
    assert "abab" in tool_results(endpoint, 3)[-1]
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    headers = [e.data["tools"] for e in events if e.type == "request/header"]
    assert headers[-1] == endpoint.requests[3].json()["tools"]  # logged exactly as sent
    maps = [e.data["map"] for e in events if e.type == "mcp/tools"]
    assert "mcp__changing__extra" not in maps[0] and maps[-1]["mcp__changing__extra"] == ["changing", "extra"]
    await h.close()
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 4


async def test_a_server_restarted_after_a_crash_kept_the_dead_ones_tools_offered_to_the_model(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    """Before: after a crash, the next call restarted the server, but the model was still offered
    the old process's tools — a tool only the new one has was "no tool named …"."""
    restarting = Path(__file__).resolve().parents[1] / "mcp" / "restarting_server.py"
    servers = [stdio("r", sys.executable, str(restarting), str(tmp_path / "runs"))]
    endpoint.push(call("c", "mcp__r__crash"))
    endpoint.push(call("p", "mcp__r__ping"))
    endpoint.push(call("a", "mcp__r__after_restart", text="hi"))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, policy='mcp_trusted = ["r"]',
                         permission="allow_once")
    assert (await h.prompt(sid, "crash it, then use it")).stop_reason == "end_turn"
    assert "stopped during the call" in tool_results(endpoint, 1)[-1]
    assert tool_results(endpoint, 2)[-1].startswith("run 2")
    assert "mcp__r__after_restart" not in tool_names(endpoint, 1)
    assert "mcp__r__after_restart" in tool_names(endpoint, 2)  # the request right after the restart
    assert tool_results(endpoint, 3)[-1].startswith("restarted: hi")
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    maps = [e.data["map"] for e in events if e.type == "mcp/tools"]
    assert len(maps) == 2 and maps[-1]["mcp__r__after_restart"] == ["r", "after_restart"]
    await h.close()
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 4


async def test_a_reloaded_session_showed_mcp_calls_by_their_internal_name_and_no_slash_commands(
        acp_harness_factory, endpoint, workspace):
    """Issue 31 item 6: session/load replayed an MCP call as ``mcp__time__get_current_time`` with
    kind ``other`` (live: "get_current_time (time MCP server)", ``read``), and neither session/load
    nor session/resume was followed by ``available_commands_update``."""
    servers = [stdio("time", str(BIN / "mcp-server-time"), "--local-timezone", "UTC")]
    endpoint.push(call("t", "mcp__time__get_current_time", timezone="Asia/Tokyo"))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers)
    assert (await h.prompt(sid, "what time is it?")).stop_reason == "end_turn"
    (live,) = [u for u in h.updates(sid, "tool_call")]
    assert (live["title"], live["kind"]) == ("get_current_time (time MCP server)", "read")
    await h.request("session/close", {"sessionId": sid})  # free for another process
    for method in ("session/load", "session/resume"):
        other = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
        await other.initialize()
        await other.request(method, {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        await other.wait_for_update("available_commands_update", session_id=sid)
        replayed = other.updates(sid, "tool_call")
        if method == "session/load":
            (again,) = replayed
            assert (again["title"], again["kind"], again["rawInput"]) == (live["title"], live["kind"], live["rawInput"])
        else:
            assert replayed == []  # resume does not replay
        await other.request("session/close", {"sessionId": sid})
        await other.close()


WIDE = Path(__file__).resolve().parents[1] / "mcp" / "wide_server.py"


async def test_a_server_whose_tools_alone_overflow_the_window_logged_megabytes_per_failed_prompt(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Issue 31 item 9: a server whose tool schemas alone did not fit the model's window had every
    prompt fail after its whole tool list was logged (a ~10 MB ``request/header`` per failed
    prompt with 10,000 tools). Now the prompt is refused before anything is logged, with a clear
    error naming the server; a session without it goes on as usual."""
    servers = [stdio("wide", sys.executable, str(WIDE), "100", "200"), stdio("time", str(BIN / "mcp-server-time"))]
    endpoint.push(text_stream("never"))
    config = workspace.parent / "mcp-config.toml"
    config.write_text("[agent]\nmcp_start_wait = 120\nmax_tools = 200\n")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config),
                                       "AGENT_SERVER_CONTEXT_WINDOW": "32000"}, config=ClientConfig())
    await h.initialize()
    sid = (await h.new_session(str(workspace), mcp_servers=servers)).session_id
    path = agent_state_dir / "sessions" / sid / "events.jsonl"
    for attempt in range(2):
        size = path.stat().st_size
        with pytest.raises(Exception) as refused:
            await h.prompt(sid, "hello")
        error = refused.value
        assert error.code == -32603 and error.data["code"] == "CONTEXT_WINDOW_EXCEEDED", error.data
        details = error.data["message"]
        assert "MCP server 'wide': 100 tools" in details and "'time'" in details, details
        assert details.index("'wide'") < details.index("'time'")  # the largest first
        assert "nothing was sent or kept" in details and "max_tools" in details
        kinds = [e.type for e in read_events(path)]
        assert "request/header" not in kinds and "user" not in kinds and "turn/start" not in kinds
        assert attempt == 0 or path.stat().st_size == size  # a second refusal adds nothing either
    assert endpoint.requests == []


async def test_a_tool_list_change_broke_the_stable_head_uncounted_and_unsaid(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Issue 31 item 9: a ``tools/list_changed`` (or a server up late) changes the tools of the
    very next request, so its start no longer repeats the previous request's — a break of the
    stable head nobody was told of. Now it is counted in the log (``mcp/tools`` ``break``),
    named by ``agent.prefix`` and said to the user; still applied at once."""
    from agent_server.agent.prefix import prefix_report

    servers = [stdio("changing", sys.executable, str(CHANGING), "modern")]
    endpoint.push(call("g", "mcp__changing__grow"))
    endpoint.push(call("e", "mcp__changing__extra", text="ab"))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, policy='mcp_trusted = ["changing"]')
    assert (await h.prompt(sid, "grow, then use the new tool")).stop_reason == "end_turn"
    assert "mcp__changing__extra" in tool_names(endpoint, 1)  # applied at once
    said = h.agent_text(sid)
    assert "The MCP tools changed (1 added)" in said and "tool-list change 1 of this session" in said, said
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    assert [e.data.get("break") for e in events if e.type == "mcp/tools"] == [None, 1]
    assert prefix_report(events).breaks == {"tools": 1}
    await h.close()
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 3


async def test_a_loaded_session_lost_the_notices_its_mcp_servers_had_shown(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The notices an MCP connection sends live (a server that did not start, a tool-list change that
    broke the stable head) were not log events: ``session/load`` showed neither. Now each is logged
    (``mcp/notice``, never projected: the model's requests are as before, replay stays byte-exact) and
    replayed on load as it was sent live, in its place."""
    servers = [stdio("broken", "/bin/false"), stdio("changing", sys.executable, str(CHANGING), "modern")]
    endpoint.push(call("g", "mcp__changing__grow"))
    endpoint.push(text_stream("grown"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, servers, policy='mcp_trusted = ["changing"]')
    assert (await h.prompt(sid, "grow")).stop_reason == "end_turn"
    live = [u for u in h.updates(sid, "agent_message_chunk") if "notice" in (u.get("_meta") or {}).get("agentServer", {})]
    texts = [u["content"]["text"] for u in live]
    assert any("'broken' did not start" in t for t in texts) and any("The MCP tools changed" in t for t in texts), texts
    await h.request("session/close", {"sessionId": sid})
    other = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await other.initialize()
    await other.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = [u for u in other.updates(sid, "agent_message_chunk")
                if "notice" in (u.get("_meta") or {}).get("agentServer", {})]
    for update in live:  # each as it was sent live
        assert {k: update[k] for k in ("content", "_meta")} in [{k: r[k] for k in ("content", "_meta")} for r in replayed]
    shown = [u["content"]["text"] for u in other.updates(sid, "agent_message_chunk")]
    assert shown.index(next(t for t in shown if "The MCP tools changed" in t)) < shown.index("grown")  # in its place
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    assert [e.data["severity"] for e in events if e.type == "mcp/notice"] == ["warning", "info"]
    await other.request("session/close", {"sessionId": sid})
    await other.close()
    await h.close()
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 2
