"""What the user and the model read: a stale edit says "read it again" once, and a resume of a
session that does not exist says so before anything about signing in — through the real server."""

import json
import os
import subprocess
import sys

from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig
from support.editor import Buffer, MemoryEditor

from agent_server.offline import text_stream, tool_call_stream


def call(cid, name, **args):
    return tool_call_stream([(cid, name, json.dumps(args))])


async def test_stale_edit_result_says_read_it_again_only_once(acp_harness_factory, endpoint, workspace):
    path = workspace / "a.txt"
    path.write_text("one\ntwo\n")
    editor = MemoryEditor({str(path): Buffer("one\ntwo\n", version=3)})

    def keystroke(ed, p):  # the user types between the agent's read and its proposal
        ed.buffers[p].text, ed.buffers[p].version = "one\ntwo\nthree\n", 4
    editor.before_apply = keystroke
    for step in (call("r", "read", path="a.txt"), call("e", "edit", path="a.txt", old_string="two", new_string="TWO"),
                 text_stream("ok")):
        endpoint.push(step)
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension=True)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "shout two")).stop_reason == "end_turn"
    stale = [m for m in endpoint.requests[2].json()["messages"] if m["role"] == "tool"][-1]["content"]
    assert stale.startswith("Not written: a.txt changed in the editor since you read it.")
    assert stale.lower().count("read it again") == 1, stale


def test_resume_of_a_missing_session_without_an_endpoint_says_no_such_session(agent_state_dir, workspace, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SERVER_")}
    env.update(AGENT_SERVER_STATE_DIR=str(agent_state_dir), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    done = subprocess.run([sys.executable, "-m", "agent_server", "run", "-p", "hi", "--resume", "sess_nope",
                           "--cwd", str(workspace)], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "unknown session: sess_nope" in done.stderr
    assert "Authentication required" not in done.stderr
