"""End to end: modes, the path policy and the approval flow (issue 5) through the official ACP
Python SDK, the real server and scripted model turns. Each test is named after the failure it
pins; transcripts are schema-validated at teardown (both directions unless said otherwise)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest
from acp import RequestError
from support.acp_client import AGENT_TO_CLIENT, ClientConfig
from support.client_impl import never_answer, select_permission
from support.sessions import call, config_env, events
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream

NO_SANDBOX = {"AGENT_SERVER_SANDBOX": "off"}


async def start(factory, endpoint, workspace, env=None, config=None, validate=True, **session):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})}, config=config,
                      validate=validate)
    await h.initialize()
    new = await h.new_session(str(workspace), **session)
    return h, new.session_id


def script(endpoint, *steps, final="done"):
    for calls in steps:
        endpoint.push(tool_call_stream(calls))
    endpoint.push(text_stream(final))


def tool_results(endpoint, index=-1):
    """The tool messages of model request ``index`` (oldest first), by call id."""
    return {m["tool_call_id"]: m["content"] for m in endpoint.requests[index].json()["messages"] if m["role"] == "tool"}


def decisions(state_dir, sid):
    return [e.data for e in events(state_dir, sid) if e.type == "policy/decision"]


def why(params):
    """The plain-words reason of a permission request: its toolCall's last content block (after
    the diff or the command)."""
    return params["toolCall"]["content"][-1]["content"]["text"]


def asks(h):
    return [p for m, p in h.client.calls if m == "session/request_permission"]


class Recorder:
    """A permission handler answering from a list (last answer repeats) and recording titles."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.seen = []

    def __call__(self, params):
        self.seen.append(params)
        choice = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return select_permission(choice)(params)


# -- modes ----------------------------------------------------------------------------------------


async def test_session_new_reports_modes_and_mode_option_and_switching_is_logged_announced_and_seen_by_the_model(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("first"))
    endpoint.push(text_stream("second"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    init = await h.initialize()
    assert init.agent_capabilities.session_capabilities.additional_directories is not None
    new = await h.new_session(str(workspace))
    sid = new.session_id
    assert new.modes.current_mode_id == "workspace-write"
    assert [m.id for m in new.modes.available_modes] == ["read-only", "workspace-write", "accept-edits",
                                                        "danger-full-access"]
    assert [o.id for o in new.config_options] == ["mode", "model"]
    option = new.config_options[0]
    assert option.id == "mode" and option.current_value == "workspace-write"
    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    assert "Mode: workspace-write" in endpoint.requests[0].json()["messages"][0]["content"]

    await h.conn.set_session_mode(session_id=sid, mode_id="read-only")
    await h.wait_for_update("config_option_update", session_id=sid)
    assert h.updates(sid, "current_mode_update")[-1]["currentModeId"] == "read-only"
    response = await h.conn.set_config_option(config_id="mode", session_id=sid, value="danger-full-access")
    assert response.config_options[0].current_value == "danger-full-access"
    await h.wait_for_update("current_mode_update", session_id=sid,
                            predicate=lambda u: u["currentModeId"] == "danger-full-access")
    assert (await h.prompt(sid, "and now?")).stop_reason == "end_turn"
    second = endpoint.requests[1].json()["messages"]
    assert second[0] == endpoint.requests[0].json()["messages"][0]  # the system message is never rewritten
    assert "Mode: danger-full-access" in second[-2]["content"]  # a note before the prompt

    with pytest.raises(RequestError) as bad_mode:
        await h.conn.set_session_mode(session_id=sid, mode_id="yolo")
    assert bad_mode.value.code == -32602
    with pytest.raises(RequestError) as bad_option:
        await h.conn.set_config_option(config_id="model", session_id=sid, value="x")
    assert bad_option.value.code == -32602
    changes = [(e.data["from"], e.data["to"], e.data["by"]) for e in events(agent_state_dir, sid) if e.type == "mode/changed"]
    assert changes == [(None, "workspace-write", "default_mode"), ("workspace-write", "read-only", "session/set_mode"),
                       ("read-only", "danger-full-access", "session/set_config_option")]


async def test_read_only_refuses_write_edit_and_a_writing_shell_command(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    (workspace / "a.txt").write_text("old\n")
    script(endpoint, [call("r", "read", path="a.txt")],
           [call("w", "write", path="new.txt", content="x"), call("e", "edit", path="a.txt", old_string="old",
                                                                    new_string="new"),
            call("b", "bash", command="touch made_by_shell.txt")])
    h, sid = await start(acp_harness_factory, endpoint, workspace,
                         config_env(tmp_path, '[policy]\ndefault_mode = "read-only"\n'))
    assert (await h.prompt(sid, "change things")).stop_reason == "end_turn"
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"] and (workspace / "a.txt").read_text() == "old\n"
    results = tool_results(endpoint)
    assert results["w"].startswith("Refused: the session is in read-only mode")
    assert results["e"].startswith("Refused: the session is in read-only mode")
    assert "Permission denied" in results["b"] and "read-only" in results["b"]  # confined by Landlock
    assert asks(h) == []
    outcome = {d["call_id"]: (d["outcome"], d["rule"]) for d in decisions(agent_state_dir, sid)}
    assert outcome["w"] == outcome["e"] == ("deny", "read-only") and outcome["b"] == ("allow", "sandbox-read-only")


# -- path policy ----------------------------------------------------------------------------------


async def test_path_escape_corpus_every_write_outside_is_refused_with_the_reason_logged(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched")
    (workspace / "sub").mkdir()
    (workspace / "evil.txt").symlink_to(outside / "victim.txt")   # a symlink inside pointing out
    (workspace / "sub" / "linkdir").symlink_to(outside)            # a symlinked parent directory
    os.link(outside / "victim.txt", workspace / "hardlink.txt")    # the known limit
    escapes = {
        "dotdot": "../outside/victim.txt",
        "absolute": str(outside / "victim.txt"),
        "symlink": "evil.txt",
        "parent": "sub/linkdir/new.txt",
        "proc": f"/proc/self/root{outside}/new2.txt",
    }
    script(endpoint, [call(k, "write", path=p, content="pwned") for k, p in escapes.items()]
           + [call("edit_escape", "edit", path="evil.txt", old_string="untouched", new_string="pwned")])
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "escape")).stop_reason == "end_turn"
    assert (outside / "victim.txt").read_text() == "untouched"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    results = tool_results(endpoint)
    for key in [*escapes, "edit_escape"]:
        assert results[key].startswith("Refused:") and "outside the workspace" in results[key], (key, results[key])
        assert "danger-full-access" in results[key]
    logged = {d["call_id"]: d for d in decisions(agent_state_dir, sid)}
    for key in [*escapes, "edit_escape"]:
        d = logged[key]
        assert (d["outcome"], d["rule"], d["decided_by"], d["mode"]) == ("deny", "workspace-boundary", "policy",
                                                                          "workspace-write")
        assert "outside the workspace" in d["reason"] and len(d["arguments_sha256"]) == 64
        assert not d["resolved"].startswith(str(workspace))
    assert asks(h) == []


async def test_hard_link_to_outside_is_a_known_limit_noted_in_the_decision(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    (tmp_path / "outside.txt").write_text("shared\n")
    os.link(tmp_path / "outside.txt", workspace / "linked.txt")
    script(endpoint, [call("r", "read", path="linked.txt")], [call("w", "write", path="linked.txt", content="x\n")])
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "write the link")).stop_reason == "end_turn"
    (d,) = [d for d in decisions(agent_state_dir, sid) if d["call_id"] == "w"]
    assert d["outcome"] == "allow" and d["links"] == 2  # noted: the other name may be anywhere


# -- approvals ------------------------------------------------------------------------------------


async def test_reading_env_in_the_workspace_asks_and_a_rejection_is_the_users(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / ".env").write_text("API_KEY=hunter2\n")
    (workspace / "ok.txt").write_text("fine\n")
    script(endpoint, [call("r1", "read", path=".env")], [call("r2", "read", path=".env"), call("r3", "read", path="ok.txt")])
    recorder = Recorder("allow_once", "reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, config=ClientConfig(permission=recorder))
    assert (await h.prompt(sid, "show the env")).stop_reason == "end_turn"
    assert len(recorder.seen) == 2  # ok.txt did not ask
    first = recorder.seen[0]
    assert first["toolCall"]["title"] == "Read .env" and "secret" in why(first)
    assert [o["optionId"] for o in first["options"]] == [o["kind"] for o in first["options"]] == \
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert "hunter2" in tool_results(endpoint, 1)["r1"]
    results = tool_results(endpoint)
    assert results["r2"].startswith("Rejected by the user") and "hunter2" not in results["r2"]
    assert "fine" in results["r3"]
    logged = {d["call_id"]: d for d in decisions(agent_state_dir, sid)}
    assert (logged["r1"]["outcome"], logged["r1"]["decided_by"], logged["r1"]["rule"]) == ("allow", "user", "secret-read")
    assert (logged["r2"]["outcome"], logged["r2"]["decided_by"]) == ("deny", "user")


async def test_sandbox_forced_off_every_shell_command_asks_and_the_user_is_told_once(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    script(endpoint, [call("b1", "bash", command="echo one")], [call("b2", "bash", command="echo two")],
           [call("b3", "bash", command="ls")])
    recorder = Recorder("allow_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=recorder))
    assert (await h.prompt(sid, "run things")).stop_reason == "end_turn"
    assert [p["toolCall"]["title"] for p in recorder.seen] == ["Run `echo one`", "Run `echo two`", "Run `ls`"]
    assert "no OS sandbox confines the shell" in why(recorder.seen[0])
    assert "```sh\necho one\n```" in recorder.seen[0]["toolCall"]["content"][0]["content"]["text"]
    assert h.agent_text(sid).count("shell sandbox is not fully enforceable") == 1
    assert "one" in tool_results(endpoint)["b1"] and "two" in tool_results(endpoint)["b2"]
    status = [e.data for e in events(agent_state_dir, sid) if e.type == "sandbox/status"]
    assert status and status[0]["level"] == "none" and "switched off" in status[0]["problems"][0]
    assert "not sandboxed" in endpoint.requests[0].json()["messages"][0]["content"]


async def test_client_that_never_answers_times_out_to_a_denial_and_the_request_is_withdrawn(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    script(endpoint, [call("b", "bash", command="echo hi")], final="gave up")
    h, sid = await start(acp_harness_factory, endpoint, workspace, {**NO_SANDBOX, "AGENT_SERVER_APPROVAL_TIMEOUT": "0.5"},
                         config=ClientConfig(permission=never_answer))
    response = await h.prompt(sid, "run")
    assert response.stop_reason == "end_turn"
    assert tool_results(endpoint)["b"].startswith("Timed out") and "0.5 s" in tool_results(endpoint)["b"]
    (request,) = h.transcript.requests("session/request_permission", AGENT_TO_CLIENT)
    await h.wait_for(lambda m: m.method == "$/cancel_request" and m.direction == AGENT_TO_CLIENT
                     and m.message["params"]["requestId"] == request.message["id"])
    (d,) = decisions(agent_state_dir, sid)
    assert (d["outcome"], d["decided_by"]) == ("deny", "fail-closed:timeout")


async def test_session_cancel_while_a_permission_request_is_pending_ends_cancelled_and_the_result_says_so(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    script(endpoint, [call("b", "bash", command="echo hi")], final="after")
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=never_answer))
    task = h.start_prompt(sid, "run")
    pending = await h.wait_for(lambda m: m.method == "session/request_permission" and m.kind == "request")
    await h.cancel(sid)
    assert (await asyncio.wait_for(task, HANG)).stop_reason == "cancelled"
    await h.wait_for(lambda m: m.method == "$/cancel_request" and m.direction == AGENT_TO_CLIENT
                     and m.message["params"]["requestId"] == pending.message["id"])
    (result,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert result["content"].startswith("Cancelled") and "did not run" in result["content"]
    (d,) = decisions(agent_state_dir, sid)
    assert (d["outcome"], d["decided_by"]) == ("deny", "fail-closed:turn-cancelled")
    assert (await h.prompt(sid, "hello")).stop_reason == "end_turn"  # the session goes on
    assert tool_results(endpoint)["b"].startswith("Cancelled")


async def test_unknown_option_malformed_outcome_and_error_response_all_deny_without_hanging(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    answers = iter([
        {"outcome": {"outcome": "selected", "optionId": "allow_everything"}},
        {"outcome": {"outcome": "approved", "optionId": "allow_once"}},
        {"outcome": "allow_once"},
        RequestError(-32603, "the dialog crashed"),
    ])

    def handler(params):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    script(endpoint, [call(f"b{i}", "bash", command=f"echo {i}") for i in range(4)])
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=handler),
                         validate={"check": {AGENT_TO_CLIENT}})  # the client's bad answers are the point
    assert (await h.prompt(sid, "run")).stop_reason == "end_turn"
    results = tool_results(endpoint)
    assert all(r.startswith("Approval failed") for r in results.values()), results
    assert "allow_everything" in results["b0"] and "dialog crashed" in results["b3"]
    assert [d["decided_by"] for d in decisions(agent_state_dir, sid)] == [
        "fail-closed:unknown_option", "fail-closed:malformed", "fail-closed:malformed", "fail-closed:error"]
    assert [d["outcome"] for d in decisions(agent_state_dir, sid)] == ["deny"] * 4


async def test_allow_always_of_awk_sed_tar_then_system_sed_e_and_checkpoint_action_ran_without_asking(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Issue 11 §1 h: without an enforced sandbox an ``allow_always`` remembers the exact command."""
    (workspace / "a.txt").write_text("one two\n")
    subprocess.run(["tar", "-cf", str(workspace / "a.tar"), "-C", str(workspace), "a.txt"], check=True)
    attacks = {"awk2": "awk 'BEGIN{system(\"touch pwned-awk\")}'",
               "sed2": "sed -n '1e touch pwned-sed' a.txt",
               "tar2": "tar -cf b.tar --checkpoint=1 --checkpoint-action=exec='touch pwned-tar' a.txt"}
    script(endpoint, [call("awk1", "bash", command="awk '{print $1}' a.txt")],
           [call("awk1b", "bash", command="awk '{print $1}' a.txt")],
           [call("sed1", "bash", command="sed -n 1p a.txt")], [call("tar1", "bash", command="tar -tf a.tar")],
           *[[call(k, "bash", command=v)] for k, v in attacks.items()],
           [call("rm", "bash", command="rm -rf build")], [call("cmp", "bash", command="awk 1 a.txt && rm -rf x")])
    recorder = Recorder("allow_always", "allow_always", "allow_always", "reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=recorder))
    assert (await h.prompt(sid, "test")).stop_reason == "end_turn"
    titles = [p["toolCall"]["title"] for p in recorder.seen]
    assert len(titles) == 8, titles  # awk1, sed1, tar1, the three attacks, rm, cmp — not awk1b
    assert titles[0].startswith("Run `awk '{print $1}' a.txt`") and titles[3].startswith("Run `awk 'BEGIN")
    assert "always allow exactly `awk '{print $1}' a.txt`" in why(recorder.seen[3])
    assert [o["optionId"] for o in recorder.seen[7]["options"]] == ["allow_once", "reject_once"]  # never remembered
    logged = {d["call_id"]: d for d in decisions(agent_state_dir, sid)}
    assert logged["awk1b"]["outcome"] == "allow"
    assert logged["awk1b"]["decided_by"] == "remembered: always allow exactly `awk '{print $1}' a.txt`"
    assert all(logged[k]["outcome"] == "deny" for k in (*attacks, "rm", "cmp"))
    assert not any(p.name.startswith("pwned") for p in workspace.iterdir())
    remembered = [e.data for e in events(agent_state_dir, sid) if e.type == "policy/remembered"]
    assert [(r["prefix"], r["exact"]) for r in remembered] == [
        ("awk '{print $1}' a.txt", True), ("sed -n 1p a.txt", True), ("tar -tf a.tar", True)]
    assert "Rejected by the user" in tool_results(endpoint)["awk2"]


async def test_reject_always_is_remembered_per_prefix_and_answers_without_asking(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    script(endpoint, [call("a", "bash", command="npm test")], [call("b", "bash", command="npm test -- --watch")],
           [call("c", "bash", command="npm install")])
    recorder = Recorder("reject_always", "allow_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=recorder))
    assert (await h.prompt(sid, "npm")).stop_reason == "end_turn"
    assert len(recorder.seen) == 2 and "always reject `npm test`" in why(recorder.seen[1])
    results = tool_results(endpoint)
    assert results["b"].startswith("Rejected by the user") and "always reject `npm test`" in results["b"]


async def test_client_without_a_permission_method_gets_approval_unavailable_not_rejected(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / ".env").write_text("X=1\n")
    script(endpoint, [call("b", "bash", command="echo hi")], [call("r", "read", path=".env")])
    h, sid = await start(acp_harness_factory, endpoint, workspace, NO_SANDBOX, config=ClientConfig(permission=None))
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    results = tool_results(endpoint)
    for key in ("b", "r"):
        assert results[key].startswith("Approval unavailable") and "no one could be asked" in results[key]
        assert "Rejected" not in results[key]
    assert len(h.transcript.requests("session/request_permission", AGENT_TO_CLIENT)) == 1  # -32601 is remembered
    assert [d["decided_by"] for d in decisions(agent_state_dir, sid)] == ["fail-closed:unavailable"] * 2


async def test_the_file_google_application_credentials_points_to_stayed_readable(
        acp_harness_factory, endpoint, workspace, tmp_path, agent_state_dir):
    """The files the server's credential-path variables point to (``$GOOGLE_APPLICATION_CREDENTIALS``,
    ``$KUBECONFIG``'s list, ``$DOCKER_CONFIG``'s folder, ``$AWS_SHARED_CREDENTIALS_FILE``, a
    ``*_PASSWORD_FILE``) were read without a question, and a folder-wide ``grep`` searched them —
    unless their name happened to look secret. Each is a credential store now (refused without a
    question, as the same files at their default places), also through a link, and ``grep`` leaves
    them out."""
    (workspace / "sa-key.json").write_text('{"private_key": "GCP-MATERIAL"}\n')
    (workspace / "link.json").symlink_to(workspace / "sa-key.json")
    (workspace / "kube").mkdir()
    (workspace / "kube" / "prod.yaml").write_text("token: KUBE-MATERIAL\n")
    (workspace / "dock").mkdir()
    (workspace / "dock" / "config.json").write_text('{"auths": {"x": "DOCKER-MATERIAL"}}\n')
    (workspace / "db-password.txt").write_text("PG-MATERIAL\n")
    (workspace / "ok.txt").write_text("fine MATERIAL\n")
    aws = tmp_path / "elsewhere" / "aws-creds"
    aws.parent.mkdir()
    aws.write_text("aws_secret_access_key = AWS-MATERIAL\n")
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(workspace / "sa-key.json"),
           "KUBECONFIG": f"{tmp_path / 'missing'}:{workspace / 'kube' / 'prod.yaml'}",
           "DOCKER_CONFIG": str(workspace / "dock"), "AWS_SHARED_CREDENTIALS_FILE": str(aws),
           "POSTGRES_PASSWORD_FILE": str(workspace / "db-password.txt")}
    reads = ["sa-key.json", "link.json", "kube/prod.yaml", "dock/config.json", str(aws), "db-password.txt"]
    script(endpoint, [call(f"r{i}", "read", path=p) for i, p in enumerate(reads)]
           + [call("g", "grep", pattern="MATERIAL"), call("ok", "read", path="ok.txt")])
    recorder = Recorder("allow_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, env, config=ClientConfig(permission=recorder))
    assert (await h.prompt(sid, "look around")).stop_reason == "end_turn"
    assert recorder.seen == []  # refused, never asked
    results = tool_results(endpoint)
    for i, variable in enumerate(("$GOOGLE_APPLICATION_CREDENTIALS", "$GOOGLE_APPLICATION_CREDENTIALS", "$KUBECONFIG",
                                  "$DOCKER_CONFIG", "$AWS_SHARED_CREDENTIALS_FILE", "$POSTGRES_PASSWORD_FILE")):
        assert results[f"r{i}"].startswith("Refused") and variable in results[f"r{i}"], results[f"r{i}"]
    assert "fine MATERIAL" in results["ok"] and "ok.txt:1:" in results["g"], results["g"]
    assert "not searched" in results["g"], results["g"]
    for cid, text in results.items():
        for material in ("GCP-", "KUBE-", "DOCKER-", "AWS-", "PG-"):
            assert material + "MATERIAL" not in text, (cid, text)
