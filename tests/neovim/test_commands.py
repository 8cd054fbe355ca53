"""The plugin's commands against the real agent-server: permissions asked through vim.ui.select,
:AgentCancel during a slow tool, :AgentSessions loading an earlier session (also one past the first
page of `session/list`), :AgentMode, :checkhealth agent_server, :help agent-server, and no process left
after :qa."""

from __future__ import annotations

import time
from pathlib import Path

from support.nvim import call, quit_editor, tool_messages
from support.procs import group_members, pid_alive
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream

NO_SANDBOX = {"AGENT_SERVER_SANDBOX": "off"}  # every shell command asks first


def descendants(pid: int) -> list[int]:
    """Live processes below ``pid`` (Linux ``/proc``; the shell's own process group included)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def wait_for_shell(ed, timeout: float = HANG) -> list[int]:
    """Wait until the server has a child process (its shell command runs); returns the processes."""
    deadline = time.monotonic() + timeout
    ed.note_server()
    (pid,) = ed.server_pids
    while not descendants(pid):
        assert time.monotonic() < deadline, "the shell command never started"
        time.sleep(0.05)
    return descendants(pid)


def test_shell_command_needing_approval_runs_when_allowed_once(make_editor, endpoint, workspace):
    endpoint.push(tool_call_stream([call("b", "bash", command="echo hi > out.txt", description="write a file")]))
    endpoint.push(text_stream("wrote it"))
    ed = make_editor(env=NO_SANDBOX)
    ed.choose("allow_once")
    ed.cmd("AgentAsk write out.txt")
    ed.idle()
    (question,) = ed.lua("return _G.selects")
    assert {i["optionId"] for i in question["items"]} >= {"allow_once", "reject_once"}
    assert (workspace / "out.txt").read_text() == "hi\n"
    chat = ed.chat()
    # the question carries the call's own title (its description); the command is shown in its content
    assert "**Permission needed:** write a file" in chat and "```sh\necho hi > out.txt\n```" in chat
    assert "permission: " in chat
    assert "wrote it" in chat


def test_permission_picker_opens_before_the_command_is_on_screen_or_in_its_prompt(make_editor, endpoint, workspace):
    # the chat showed only "- ⏳ Write perm1" while the picker waited: the question was drawn after the answer
    endpoint.push(tool_call_stream([call("b", "bash", command="echo first > perm1.txt", description="Write perm1")]))
    endpoint.push(text_stream("not written"))
    ed = make_editor(env=NO_SANDBOX)
    ed.lua("""
        vim.ui.select = function(items, opts, on_choice)  -- what the user sees when the picker opens
          local rows = {}
          for r = 1, vim.o.lines do
            local cells = {}
            for c = 1, vim.o.columns do
              cells[#cells + 1] = vim.fn.screenstring(r, c)
            end
            rows[#rows + 1] = table.concat(cells)
          end
          _G.seen = { prompt = opts.prompt, screen = table.concat(rows, "\\n") }
          for _, it in ipairs(items) do
            if it.optionId == "reject_once" then
              return on_choice(it)
            end
          end
        end
    """)
    ed.cmd("AgentAsk write perm1")
    ed.idle()
    seen = ed.lua("return _G.seen")
    assert seen["prompt"] == "agent-server: Write perm1 — $ echo first > perm1.txt"
    assert "Permission needed:** Write perm1" in seen["screen"] and "echo first > perm1.txt" in seen["screen"], seen["screen"]
    assert not (workspace / "perm1.txt").exists()


def test_shell_command_rejected_is_not_run_and_the_model_is_told(make_editor, endpoint, workspace):
    endpoint.push(tool_call_stream([call("b", "bash", command="echo hi > out.txt", description="write a file")]))
    endpoint.push(text_stream("ok, I will not"))
    ed = make_editor(env=NO_SANDBOX)
    ed.choose("reject_once")
    ed.cmd("AgentAsk write out.txt")
    ed.idle()
    assert not (workspace / "out.txt").exists()
    assert "rejected by the user" in tool_messages(endpoint, 1)[-1]["content"].lower()
    assert "ok, I will not" in ed.chat()


def test_cancel_during_a_slow_tool_shows_cancelled_and_the_next_ask_works(make_editor, endpoint, workspace):
    endpoint.push(tool_call_stream([call("b", "bash", command="sleep 30", description="wait")]))
    endpoint.push(text_stream("second turn answer"))
    ed = make_editor(env=NO_SANDBOX)
    ed.choose("allow_once")
    ed.cmd("AgentAsk wait a bit")
    ed.wait("return require('agent_server.chat').text():find('permission: Allow once', 1, true) ~= nil",
            what="the approval")
    wait_for_shell(ed)
    ed.cmd("AgentCancel")
    ed.idle()
    chat = ed.chat()
    assert "_— cancelled —_" in chat
    assert "- ⚠ wait (unfinished)" in chat or "- ✗ wait" in chat, chat  # not shown as running
    assert ed.lua("return require('agent_server.chat').state.header.state") == "idle"
    ed.cmd("AgentAsk and now?")
    ed.idle()
    assert "second turn answer" in ed.chat()
    assert ed.chat().rstrip().endswith("_— stop: end_turn —_")


def test_quit_while_a_tool_runs_leaves_no_process(make_editor, endpoint, workspace, tmp_path):
    endpoint.push(tool_call_stream([call("b", "bash", command="sleep 60", description="wait")]))
    ed = make_editor(env=NO_SANDBOX)
    ed.choose("allow_once")
    ed.cmd("AgentAsk wait")
    ed.wait("return require('agent_server.chat').text():find('permission: Allow once', 1, true) ~= nil",
            what="the approval")
    shell = wait_for_shell(ed)
    (pid,) = ed.server_pids
    assert quit_editor(ed) == []
    deadline = time.monotonic() + HANG
    while any(pid_alive(p) for p in [pid, *shell]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid) and not group_members(pid)
    assert not [p for p in shell if pid_alive(p)], "the shell command outlived :qa"


def earlier_session_then_a_new_one(make_editor, endpoint, answer: str):
    """An editor that asked "remember this" (answered ``answer``), then started a new session:
    ``(editor, the first session's id)``."""
    endpoint.push(text_stream(answer))
    ed = make_editor()
    ed.cmd("AgentAsk remember this")
    ed.idle()
    first = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentNew")
    ed.wait("return require('agent_server.client').state.session_id ~= ...", first, what="a new session")
    return ed, first


def test_sessions_lists_the_earlier_session_and_loading_it_replays_it(make_editor, endpoint, workspace):
    ed, first = earlier_session_then_a_new_one(make_editor, endpoint, "the first session's answer")
    ed.choose(first)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.client').state.session_id == ... "
            "and require('agent_server.chat').text():find('replayed', 1, true) ~= nil", first, what="the load")
    (picker,) = ed.lua("return _G.selects")
    assert first in [s["sessionId"] for s in picker["items"]]
    replay = ed.chat().rsplit(f"# Session {first} (loaded)", 1)[1]
    assert "remember this" in replay and "the first session's answer" in replay


def test_sessions_picker_showed_raw_utc_iso_stamps_with_milliseconds(make_editor, endpoint, workspace):
    """Newcomer 4, finding 8: :AgentSessions listed ``2026-12-06T19:47:00.507Z`` (UTC, milliseconds)
    where VS Code's picker says "today 19:47" in local time; now the same words as VS Code's."""
    from datetime import datetime, timedelta

    def label(stamp: str, now: datetime) -> str:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone()
        day = when.date()
        if day == now.date():
            return f"today {when:%H:%M}"
        if day == (now - timedelta(days=1)).date():
            return f"yesterday {when:%H:%M}"
        return f"{when:%Y-%m-%d %H:%M}"

    ed, first = earlier_session_then_a_new_one(make_editor, endpoint, "ok")
    ed.choose(None)
    before = datetime.now().astimezone()
    ed.cmd("AgentSessions")
    (picker,) = ed.wait("return _G.selects and #_G.selects > 0 and _G.selects", what="the picker")
    after = datetime.now().astimezone()
    (item,), (shown,) = picker["items"], picker["shown"]
    assert shown.split("  ")[0] in {label(item["updatedAt"], before), label(item["updatedAt"], after)}, shown
    assert "T" not in shown.split("  ")[0] and "remember this" in shown, shown


def test_sessions_picker_reaches_sessions_past_the_first_page(make_editor, endpoint, workspace):
    # with 63 sessions in the folder :AgentSessions offered the newest 50: list_sessions read one page
    for _ in range(63):
        endpoint.push(text_stream("ok"))
    ed = make_editor()
    ed.lua("""
        local client, cwd = require('agent_server.client'), ...
        _G.made = {}
        client.ensure_server(function(err)
          for _ = 1, 63 do  -- session/list lists a session once it had a prompt
            client.state.rpc:request('session/new', { cwd = cwd, mcpServers = {} }, function(e, r)
              if e then table.insert(_G.made, 'error: ' .. e.message) return end
              client.state.rpc:request('session/prompt', { sessionId = r.sessionId,
                prompt = { { type = 'text', text = 'hi' } } }, function(pe)
                table.insert(_G.made, pe and ('error: ' .. pe.message) or r.sessionId)
              end)
            end)
          end
        end)
    """, str(workspace))
    made = ed.wait("return #_G.made == 63 and _G.made", timeout=60, what="63 sessions")
    assert not [m for m in made if m.startswith("error: ")], made
    oldest = made[0]
    ed.choose(oldest)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.client').state.session_id == ...", oldest, what="the oldest loaded")
    (picker,) = ed.lua("return _G.selects")
    listed = [s["sessionId"] for s in picker["items"]]
    assert len(listed) == 63 and set(listed) == set(made)
    stamps = [s["updatedAt"] for s in picker["items"]]
    assert stamps == sorted(stamps, reverse=True)  # newest first, across the page boundary


def test_mode_command_switches_the_session_mode(make_editor, endpoint, workspace):
    ed = make_editor()
    ed.cmd("AgentMode read-only")
    ed.wait("return require('agent_server.chat').state.header.mode == 'read-only'", what="the mode update")
    assert "mode read-only" in ed.chat().splitlines()[0]


def test_checkhealth_is_ok_with_the_server_installed(make_editor):
    ed = make_editor()
    ed.cmd("checkhealth agent_server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "OK Neovim 0.11.4" in report
    assert "OK server:" in report and "agent-server 0.1.0" in report
    assert "ERROR" not in report


def test_checkhealth_agent_server_with_a_hyphen_found_nothing(make_editor):
    """``:checkhealth agent-server``, the plugin's name as users type it, said 'No healthcheck found
    for "agent-server" plugin' (its Lua modules are ``agent_server``). Both names run the checks, and
    a ``:checkhealth`` that matches both runs them once."""
    ed = make_editor()
    ed.cmd("checkhealth agent-server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "No healthcheck found" not in report and "ERROR" not in report, report
    assert "OK Neovim 0.11.4" in report and "OK server:" in report, report
    ed.cmd("checkhealth agent*")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert report.count("OK Neovim 0.11.4") == 1 and report.count("OK server:") == 1, report
    assert "the same checks as under agent-server above" in report, report
    assert "\nagent-server: " in report and "\nagent_server: " in report, report


def test_checkhealth_said_configuration_ok_on_a_first_run_with_no_model_set_up(make_editor, endpoint):
    """The first-run path: with nothing configured ``:checkhealth agent_server`` showed "OK
    configuration OK: … model '(none)'" and no error, while the first prompt could not be sent. It
    says what is missing and how to set it up here; with a model it names the model, the endpoint
    and where the key comes from (never the key)."""
    ed = make_editor(env={"AGENT_SERVER_BASE_URL": "", "AGENT_SERVER_API_KEY": "", "AGENT_SERVER_MODEL": ""})
    ed.cmd("checkhealth agent_server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "ERROR no model endpoint is set up (profile 'custom' has no base URL): a prompt cannot be sent yet" in report
    assert ":AgentLogin signs in" in report and "AGENT_SERVER_BASE_URL" in report, report
    assert "configuration OK" not in report and "'(none)'" not in report, report
    set_up = make_editor()
    set_up.cmd("checkhealth agent_server")
    report = "\n".join(set_up.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert f"OK model test-model at {endpoint.base_url}; API key: from AGENT_SERVER_API_KEY" in report, report
    assert "test-key" not in report and "ERROR" not in report, report


def test_checkhealth_said_ok_model_fake_for_an_endpoint_that_refuses_connections(make_editor, endpoint):
    """``:checkhealth agent-server`` reported "OK model fake at http://127.0.0.1:18999/v1" while
    nothing listened there (newcomer 5 finding 9g). It asks the endpoint as ``agent-server login``
    does (``GET <base_url>/models``): an error with the reason when it cannot be reached, OK only
    when it answers; the key is never shown."""
    import socket
    with socket.socket() as s:  # a port that was free a moment ago and that nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    ed = make_editor(env={"AGENT_SERVER_BASE_URL": closed, "AGENT_SERVER_MODEL": "fake"})
    ed.cmd("checkhealth agent-server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert f"OK model fake at {closed}" not in report, report
    assert f"ERROR model fake at {closed}" in report and f"cannot reach {closed}/models" in report, report
    assert "test-key" not in report, report
    answering = make_editor()
    answering.cmd("checkhealth agent-server")
    report = "\n".join(answering.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert f"OK model test-model at {endpoint.base_url}" in report and "HTTP 200" in report, report
    assert "ERROR" not in report and "test-key" not in report, report
    assert any(r.path.endswith("/models") for r in endpoint.requests), "the endpoint was not asked"


def test_checkhealth_reports_an_error_without_the_server(make_editor, tmp_path):
    ed = make_editor(server_cmd=[str(tmp_path / "no-such-agent-server")])
    ed.cmd("checkhealth agent_server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "ERROR" in report and "not executable" in report


def test_help_agent_server_opens_with_the_readmes_plain_runtimepath_set_up(make_editor):
    """`:help agent-server` failed (E149) after the README's set-up (`vim.opt.rtp:append(...)`,
    no plugin manager to run :helptags): doc/tags is committed."""
    ed = make_editor()  # the plugin is on the runtimepath, as the README's set-up puts it; nothing else
    ed.cmd("help agent-server")
    assert ed.lua("return vim.bo.filetype") == "help"
    ed.cmd("help :AgentAskAgain")
    assert ed.lua("return vim.fn.expand('%:t')") == "agent-server.txt"


def test_the_committed_doc_tags_are_what_helptags_makes_of_the_help_file(make_editor, tmp_path):
    """doc/tags is committed, so it must follow the help file: regenerate it and compare."""
    import shutil
    from support.nvim import PLUGIN
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copy(PLUGIN / "doc" / "agent-server.txt", doc)
    ed = make_editor()
    ed.cmd(f"helptags {doc}")
    assert (doc / "tags").read_text() == (PLUGIN / "doc" / "tags").read_text(), (
        "clients/neovim/doc/tags is stale: run nvim --headless -c 'helptags clients/neovim/doc' -c q")


def test_help_tags_are_accepted_and_help_opens(make_editor, tmp_path):
    import shutil
    from support.nvim import PLUGIN
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    ed = make_editor()
    ed.cmd(f"helptags {doc}")
    ed.cmd(f"set rtp^={tmp_path}")
    ed.cmd("help agent-server")
    assert ed.lua("return vim.bo.filetype") == "help"
    assert "*agent-server*" in "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    tags = (doc / "tags").read_text()
    for tag in (":AgentAsk", ":AgentAcceptHunk", "agent-server-proposals", "agent_server.setup()"):
        assert tag in tags


def test_model_command_switches_the_model_of_the_next_requests(make_editor, endpoint, workspace, tmp_path):
    endpoint.push(text_stream("answered by the other model"))
    config = tmp_path / "models.toml"  # only configured models may be picked
    config.write_text('[[models]]\nid = "other-model"\n')
    ed = make_editor(env={"AGENT_SERVER_CONFIG": str(config)})
    ed.cmd("AgentModel other-model")
    ed.wait("return require('agent_server.chat').text():find('other-model', 1, true) ~= nil", what="the switch")
    ed.idle()
    ed.cmd("AgentAsk hello")
    ed.idle()
    assert endpoint.requests[-1].json()["model"] == "other-model"


def test_checkhealth_reports_a_broken_config_file_and_says_how_to_install(make_editor, tmp_path):
    from support.fixtures import agent_server_command
    bad = tmp_path / "bad.toml"
    bad.write_text('profile = "x\n')
    ed = make_editor(server_cmd=[*agent_server_command(), "--config", str(bad)])
    ed.cmd("checkhealth agent_server")
    report = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "ERROR" in report and str(bad) in report and "line 1, column 13" in report, report
    missing = make_editor(server_cmd=[str(tmp_path / "no-such-agent-server")])
    missing.cmd("checkhealth agent_server")
    report = "\n".join(missing.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "pip install agent-server" not in report and "bash scripts/setup.sh" in report, report


def test_a_server_found_through_a_relative_path_entry_inside_the_workspace_is_not_started(make_editor, tmp_path):
    """`agent-server` by name, $PATH with "bin" (relative): the workspace's bin/agent-server (a cloned
    repository's, or one a command wrote) must not be the server; an absolute $PATH entry is used."""
    ed = make_editor()
    ed.lua("""
      local dir = vim.fn.getcwd() .. '/bin'
      vim.fn.mkdir(dir, 'p')
      vim.fn.writefile({ '#!/bin/sh', 'exit 0' }, dir .. '/agent-server')
      vim.fn.setfperm(dir .. '/agent-server', 'rwxr-xr-x')
      vim.env.PATH = 'bin:' .. vim.env.PATH
      require('agent_server.config').setup({})
    """)
    got = ed.lua("local c, w = require('agent_server.config').server_cmd(); return { cmd = c or false, why = w or '' }")
    cmd, why = got["cmd"] or None, got["why"]
    assert cmd is None and "inside the current folder" in why, (cmd, why)
    outside = tmp_path / "outside-bin"
    outside.mkdir()
    (outside / "agent-server").write_text("#!/bin/sh\nexit 0\n")
    (outside / "agent-server").chmod(0o755)
    ed.lua(f"vim.env.PATH = '{outside}:' .. vim.env.PATH")
    got = ed.lua("local c, w = require('agent_server.config').server_cmd(); return { cmd = c or false, why = w or '' }")
    cmd, why = got["cmd"] or None, got["why"]
    assert cmd == [str(outside / "agent-server")], (cmd, why)


def test_a_permission_question_never_cuts_or_hides_the_command(make_editor, endpoint, workspace):
    """Parity (issue 29 item 5): the command is never cut in a question — the picker's prompt cut it
    at 160 characters — and a run of blanks cannot push its tail out of sight."""
    command = "echo harmless" + " " * 300 + "; echo hidden tail > tail.txt" + "x" * 200
    endpoint.push(tool_call_stream([call("b", "bash", command=command, description="Print something")]))
    endpoint.push(text_stream("ok"))
    ed = make_editor(env=NO_SANDBOX)
    ed.choose(None)  # dismissed: denied
    ed.cmd("AgentAsk print")
    ed.idle()
    (question,) = ed.lua("return _G.selects")
    assert "echo harmless⟨300 spaces⟩; echo hidden tail > tail.txt" + "x" * 200 in question["prompt"], question["prompt"]
    assert not (workspace / "tail.txt").exists()


def test_agent_log_of_a_quiet_running_server_asked_whether_none_had_run_yet(make_editor, endpoint):
    """The first-run path's "Show the server's log" (:AgentLog) on a server that ran and wrote nothing
    (quiet at the default log level) said "(the server wrote nothing on stderr; none has run yet?)".
    It says which server, why it is quiet and how to make it say more; before any server, that none
    has run."""
    endpoint.push(text_stream("hi"))
    ed = make_editor()
    ed.cmd("AgentLog")
    log = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert log == "(no server has run yet in this Neovim: it starts when the chat opens, or with any :Agent command)"
    ed.cmd("close")
    ed.cmd("AgentAsk hello")
    ed.idle()
    pid = ed.lua("return require('agent_server.client').pid()")
    ed.cmd("AgentLog")
    log = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert "none has run yet" not in log, log
    assert f"(the server, pid {pid}, has written nothing on stderr: it is quiet at the default log level" in log, log
    assert "AGENT_SERVER_LOG_LEVEL" in log, log
