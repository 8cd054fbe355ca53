"""Newcomer finding 20, the server's side: a write the server does itself (plain ACP, the user asked
first) while a folder of its path was swapped for a link to outside the workspace during the question.
The real server and the official ACP SDK; the write is anchored beneath the root (no link followed)."""

from support.acp_client import ClientConfig
from support.sessions import call

from agent_server.offline import text_stream, tool_call_stream


async def test_an_accepted_proposal_was_written_through_a_symlink_swapped_in_while_it_waited_server(
        acp_harness_factory, endpoint, workspace, tmp_path):
    # a secret-named file: writing it asks in every mode, so the write waits for the user
    (workspace / "sub").mkdir()
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    asked = []

    def swap_then_allow(params):
        asked.append(params)
        (workspace / "sub").rmdir()
        (workspace / "sub").symlink_to(outside, target_is_directory=True)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    endpoint.push(tool_call_stream([call("w", "write", path="sub/x.pem", content="pwned\n")]))
    endpoint.push(text_stream("done"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url},
                                  config=ClientConfig(permission=swap_then_allow))
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "write sub/x.pem")).stop_reason == "end_turn"
    assert asked, "the write was not asked: nothing waited"
    assert not (outside / "x.pem").exists()
    told = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"][0]
    assert "pwned" not in told and ("link" in told or "outside" in told or "Refused" in told), told
