"""A model stream that breaks and is retried, end to end (real server, offline endpoint over
127.0.0.1, the official ACP SDK client).

The bug: the dead try's text was glued to the retry's ("partial final"), nothing said a retry was
happening, and ``session/load`` showed only "final" (the log kept only the attempt's error), so the
reloaded transcript differed from the live one. Now the user is told before each retry — a notice
chunk after the dead text, before the wait — and the ``assistant/attempt`` event keeps what the user
saw, which a load replays; the model never sees any of it (every request is rebuilt byte for byte
by ``agent-server replay``: tests/e2e/conftest.py, and explicitly below).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support.replay import assert_replay_matches
from support.sessions import config_env, events

from agent_server.offline import text_stream

NO_BACKOFF = "[agent]\nretry_base_delay = 0.0\n"


def _frame(delta, finish=None):
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def broken(text):
    """A 200 stream that sends ``text`` and ends without a finish and without ``[DONE]``."""
    return {"kind": "sse", "frames": [_frame({"role": "assistant", "content": text})], "done": False}


RATE_LIMITED = {"kind": "error", "status": 429, "headers": {"Retry-After": "0.2"},
                "json": {"error": {"message": "slow down"}}}


async def start(factory, endpoint, workspace, tmp_path, config=NO_BACKOFF):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **config_env(tmp_path, config)})
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


def chat(endpoint):
    return [r for r in endpoint.requests if r.method == "POST" and r.path.endswith("/chat/completions")]


def is_notice(update):
    return "retry" in ((update.get("_meta") or {}).get("agentServer") or {})


def shown(updates):
    """What the user reads of the agent: its chunks, adjacent plain chunks of one kind joined (live
    text is coalesced into arbitrary pieces, a load sends one piece), each retry notice on its own."""
    out: list[tuple[str, str, bool]] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind not in ("agent_message_chunk", "agent_thought_chunk"):
            continue
        notice = is_notice(u)
        if out and not notice and not out[-1][2] and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + u["content"]["text"], False)
        else:
            out.append((kind, u["content"]["text"], notice))
    return out


def per_turn(updates):
    """The loaded updates split at each ``user_message_chunk`` (one list per turn)."""
    turns: list[list[dict]] = []
    for u in updates:
        if u["sessionUpdate"] == "user_message_chunk":
            turns.append([])
        elif turns:
            turns[-1].append(u)
    return turns


async def load(factory, endpoint, workspace, tmp_path, sid):
    h, _ = await start(factory, endpoint, workspace, tmp_path)
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    return h, h.updates(sid)


async def test_retried_stream_shows_the_break_and_load_replays_it(acp_harness_factory, endpoint, workspace,
                                                                   tmp_path, agent_state_dir):
    endpoint.push(RATE_LIMITED)  # a retry before any text: one line says so, too
    endpoint.push(broken("partial "))
    endpoint.push(text_stream("final"))
    endpoint.push(text_stream("second answer"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    live_first = list(h.updates(sid))
    assert (await h.prompt(sid, "next")).stop_reason == "end_turn"
    live_second = h.updates(sid)[len(live_first):]
    await h.close()

    told = shown(live_first)
    assert [(kind, notice) for kind, _, notice in told] == [
        ("agent_message_chunk", True), ("agent_message_chunk", False), ("agent_message_chunk", True),
        ("agent_message_chunk", False)]
    assert told[0][1] == ("\n\n[agent-server] The model request failed (rate limited, HTTP 429); "
                          "retrying in 0.2 s (attempt 2 of 4)…\n\n")
    assert told[1][1] == "partial "  # every piece of the dead text left before the notice (the gate's flush)
    assert told[2][1] == ("\n\n[agent-server] The model's answer broke off (the stream closed); "
                          "retrying now (attempt 3 of 4)…\n\n")
    assert told[3][1] == "final"
    notices = [u for u in live_first if is_notice(u)]
    assert [u["_meta"]["agentServer"]["retry"]["code"] for u in notices] == ["RATE_LIMIT", "STREAM_CLOSED"]

    # the log keeps what the user saw, in the failed tries' events, and nothing the model reads
    log = events(agent_state_dir, sid)
    attempts = [e.data for e in log if e.type == "assistant/attempt"]
    assert [a.get("text") for a in attempts] == [None, "partial "]
    assert [a["retry"]["notice"] for a in attempts] == [told[0][1], told[2][1]]

    # the model never saw the dead try: the retries re-send the same body, the next turn has only "final"
    bodies = [r.body for r in chat(endpoint)]
    assert len(bodies) == 4 and len(set(bodies[:3])) == 1
    for body in bodies:
        assert b"partial" not in body and b"[agent-server]" not in body and b"broke off" not in body
    assistant = [m["content"] for m in json.loads(bodies[3])["messages"] if m["role"] == "assistant"]
    assert assistant == ["final"]
    assert_replay_matches(agent_state_dir, endpoint.requests)  # `agent-server replay`: byte for byte

    # and session/load replays exactly what the live client saw
    h2, loaded = await load(acp_harness_factory, endpoint, workspace, tmp_path, sid)
    first, second = per_turn(loaded)
    assert shown(first) == told
    assert shown(second) == shown(live_second) == [("agent_message_chunk", "second answer", False)]
    assert [u for u in first if is_notice(u)] == notices  # the very updates, _meta included
    await h2.close()


def _bad_json_frame():
    return {"kind": "sse", "frames": [_frame({"role": "assistant", "content": "a"}), "{not json",
                                      _frame({"content": "b"}, "stop")]}


def _error_in_stream():
    return {"kind": "sse", "frames": [_frame({"role": "assistant", "content": "a"}),
                                      {"error": {"message": "upstream overloaded", "type": "server_error"}}]}


def _close_no_done():
    return {"kind": "sse", "frames": [_frame({"role": "assistant", "content": "partial answer "}),
                                      _frame({"content": "more"})], "done": False}


def _trickled_then_closed():
    """Word by word, faster than the gate's 16 ms: most of the dead text is held when the stream breaks."""
    words = [_frame({"role": "assistant", "content": "w0 "})] + [_frame({"content": f"w{i} "}) for i in range(1, 40)]
    return {"kind": "sse", "frames": words, "delay": 0.002, "done": False}


@pytest.mark.parametrize("script, dead", [(_close_no_done, "partial answer more"), (_bad_json_frame, "a"),
                                          (_error_in_stream, "a"),
                                          (_trickled_then_closed, "".join(f"w{i} " for i in range(40)))],
                         ids=["close_no_done", "bad_json_frame", "error_in_stream", "trickled_then_closed"])
async def test_each_kind_of_broken_stream_is_told_live_and_replayed_alike(
        acp_harness_factory, endpoint, workspace, tmp_path, agent_state_dir, script, dead):
    endpoint.push(script())
    endpoint.push(text_stream("recovered fine"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    live = shown(h.updates(sid))
    await h.close()
    assert [(text, notice) for _, text, notice in live][0] == (dead, False)
    assert live[1][2] and "[agent-server] The model's answer broke off (" in live[1][1]
    assert live[2:] == [("agent_message_chunk", "recovered fine", False)]
    bodies = [r.body for r in chat(endpoint)]
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    _, loaded = await load(acp_harness_factory, endpoint, workspace, tmp_path, sid)
    assert shown(per_turn(loaded)[0]) == live


async def test_a_try_that_breaks_off_and_is_the_last_is_kept_for_load_without_a_retry_notice(
        acp_harness_factory, endpoint, workspace, tmp_path, agent_state_dir):
    endpoint.push(broken("half an answer"))
    endpoint.push(broken(" and another half"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path,
                         "[agent]\nretry_base_delay = 0.0\nmax_attempts = 2\n")
    with pytest.raises(Exception):
        await h.prompt(sid, "go")
    live = shown(h.updates(sid))
    await h.close()
    assert [(t, n) for _, t, n in live][0] == ("half an answer", False)
    assert live[1][2] and live[2] == ("agent_message_chunk", " and another half", False)
    assert len(live) == 3  # no notice after the last try: the prompt's error answer says it
    _, loaded = await load(acp_harness_factory, endpoint, workspace, tmp_path, sid)
    replayed = shown(per_turn(loaded)[0])
    assert replayed[:2] == live[:2] and len(replayed) == 3
    # the last try's text, then the error as a load shows it (live, the prompt's error answer said it)
    assert replayed[2][1].startswith(" and another half\n\n[agent-server] The turn failed: the stream ended")


async def test_load_during_the_retry_wait_shows_the_break_once_then_the_retry(
        acp_harness_factory, endpoint, workspace, tmp_path):
    endpoint.push(broken("partial "))
    endpoint.push({**RATE_LIMITED, "headers": {"Retry-After": "1"}})
    endpoint.push(text_stream("final"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    task = asyncio.ensure_future(h.prompt(sid, "go"))
    await h.wait_for_update("agent_message_chunk", session_id=sid,
                            predicate=lambda u: "rate limited" in u["content"]["text"])
    before = len(h.updates(sid))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await task).stop_reason == "end_turn"
    live = shown(h.updates(sid)[:before])
    rest = per_turn(h.updates(sid)[before:])
    assert len(rest) == 1  # the replay: the one turn, then the retry's text live after it
    assert shown(rest[0]) == live + [("agent_message_chunk", "final", False)]
    assert [t for _, t, n in live if n][1].startswith("\n\n[agent-server] The model request failed (rate limited")
