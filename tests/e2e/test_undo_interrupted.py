"""End to end: an ``/undo`` or ``/redo`` cut off by ``kill -9`` of the server while a proposal waits,
then the session loaded by a new server — what the next ``/undo``, ``/redo`` and ``/checkpoints``
say of it, and what the model is told, is what the interrupted run did (newcomer 6, finding 7).
The official ACP Python SDK client, the real server, scripted model streams, an editor's buffers."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig
from support.editor import MemoryEditor
from support.timeouts import HANG

from agent_server.offline import text_stream
from tests.e2e.test_undo import BOM_CRLF, extension_editor_config, logged, proposal_file, text_of, two_edit_turns


async def crash_while_c_waits(factory, endpoint, workspace, which: str):
    """Turn 1 edits a.txt, turn 2 b.txt and c.txt; for ``redo`` turn 2 is undone first. Then
    ``/<which>``: b.txt's proposal is accepted, the server is killed while c.txt's waits, and a new
    server loads the session. Returns ``(harness, session id, editor, decisions)``."""
    decisions: list = []
    waiting = asyncio.Event()
    editor = MemoryEditor(decide=lambda params, hunks: decisions.pop(0) if decisions else list(range(len(hunks))))
    prefix = which.capitalize()

    async def apply(params):
        if proposal_file(params) == "c.txt" and params["label"].startswith(prefix) and not decisions:
            waiting.set()
            await asyncio.Event().wait()  # the user has not answered yet
        return editor.apply_workspace_edit(params)

    config = extension_editor_config(editor, "allow_once")
    config = ClientConfig(**{**config.__dict__, "ext_methods": {APPLY_WORKSPACE_EDIT: apply}})
    first = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config, validate=False)
    await first.initialize(config.capabilities())
    sid = (await first.new_session(str(workspace))).session_id
    await two_edit_turns(first, sid, endpoint, workspace, editor)
    if which == "redo":
        decisions[:] = [[0], [0]]
        assert (await first.prompt(sid, "/undo")).stop_reason == "end_turn"
        assert (workspace / "b.txt").read_bytes() == BOM_CRLF and (workspace / "c.txt").read_bytes() == BOM_CRLF
    run = first.start_prompt(sid, f"/{which}")
    await asyncio.wait_for(waiting.wait(), HANG)
    # b.txt restored (undo) or re-applied (redo) before the crash, c.txt not yet
    assert (workspace / "b.txt").read_bytes() == (BOM_CRLF if which == "undo" else BOM_CRLF.replace(b"two", b"TWO"))
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait_exit()
    with pytest.raises(Exception):
        await run

    second = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await second.initialize(config.capabilities())
    await second.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    return second, sid, editor, decisions


def model_notices(endpoint) -> list[str]:
    """The notices of checkpoint runs in the last request the model was sent."""
    users = [str(m["content"]) for m in endpoint.requests[-1].json()["messages"] if m["role"] == "user"]
    return [u for u in users if "turn 2" in u and ("undo" in u or "redo" in u or "undid" in u or "redid" in u)]


async def test_undo_again_after_an_interrupted_undo_said_the_last_one_changed_no_file(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer 6, finding 7: the server was killed while an /undo's second proposal waited (b.txt
    already restored). After the load, /undo again said "again (the last /undo of it changed no file)"
    — it had restored b.txt — and "Turn 2 is undone for the files restored: /redo re-applies only
    those", while /redo then re-applied both files (rightly: the interrupted run's restore counts).
    The answer says what the interrupted run did, and promises nothing /redo does not do; /checkpoints
    meanwhile, the answer of /redo before the undo is finished and the model's notice say it too."""
    h, sid, editor, decisions = await crash_while_c_waits(acp_harness_factory, endpoint, workspace, "undo")

    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert ("turn 2 [partly undone (the /undo was interrupted), next /undo]: b.txt (changed, undone), "
            "c.txt (changed)") in text_of(h, sid)
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert text_of(h, sid).endswith(
        "Nothing to redo: the last /undo (turn 2) was interrupted before it ended (b.txt restored): "
        "/undo takes back the rest of turn 2.")
    # the model is told the run was cut off, not that the user undid turn 2
    endpoint.push(text_stream("noted"))
    assert (await h.prompt(sid, "what changed?")).stop_reason == "end_turn"
    [told] = model_notices(endpoint)
    assert "The user's /undo of the file changes of turn 2 was interrupted (agent-server stopped before it " \
           "ended) after it had restored: b.txt: restored. The turn's other files were not taken back." in told
    assert "The user undid" not in told

    editor.proposals.clear()
    decisions[:] = [[0]]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Undo turn 2: c.txt"]
    answer = text_of(h, sid)
    assert answer.endswith("Undo of turn 2 again (the last /undo of it was interrupted after restoring b.txt): "
                           "b.txt: already as it was; c.txt: restored.")
    assert "changed no file" not in answer and "only those" not in answer
    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert "turn 2 [undone, next /redo]: b.txt (changed), c.txt (changed)" in text_of(h, sid)

    editor.proposals.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert sorted(p["label"] for p in editor.proposals) == ["Redo turn 2: b.txt", "Redo turn 2: c.txt"]
    assert text_of(h, sid).endswith("Redo of turn 2: b.txt: restored; c.txt: restored.")
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")
    assert len(logged(agent_state_dir, sid, "checkpoint/undo")) == 2


async def test_redo_again_after_an_interrupted_redo_said_the_file_it_had_reapplied_was_not_changed_by_the_undo(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The rest of finding 7's class: a /redo cut off the same way (b.txt re-applied, c.txt's proposal
    waiting). /redo again said "again (the last /redo of it changed no file)" and "b.txt: left as it is
    (the /undo did not change it)" — the undo had changed it, the interrupted redo had re-applied it.
    /checkpoints meanwhile and the model's notice say what the interrupted run did."""
    h, sid, editor, decisions = await crash_while_c_waits(acp_harness_factory, endpoint, workspace, "redo")
    shown = text_of(h, sid)
    assert "Redo of turn 2 was interrupted (agent-server stopped before it ended): b.txt: restored." in shown

    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert "turn 2 [partly undone, next /redo]: b.txt (changed, redone), c.txt (changed)" in text_of(h, sid)
    endpoint.push(text_stream("noted"))
    assert (await h.prompt(sid, "what changed?")).stop_reason == "end_turn"
    told = model_notices(endpoint)[-1]
    assert "The user's /redo of the file changes of turn 2 was interrupted (agent-server stopped before it " \
           "ended) after it had re-applied: b.txt: restored. The turn's other files were not re-applied." in told

    editor.proposals.clear()
    decisions[:] = [[0]]
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Redo turn 2: c.txt"]
    answer = text_of(h, sid)
    assert answer.endswith("Redo of turn 2 again (the last /redo of it was interrupted after re-applying b.txt): "
                           "b.txt: already redone (the interrupted /redo re-applied it); c.txt: restored.")
    assert "changed no file" not in answer and "did not change it" not in answer
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")
    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert "turn 2 [next /undo]: b.txt (changed), c.txt (changed)" in text_of(h, sid)

    # and /undo takes the whole turn back again
    editor.proposals.clear()
    decisions[:] = [[0], [0]]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF and (workspace / "c.txt").read_bytes() == BOM_CRLF
    assert Path(logged(agent_state_dir, sid, "checkpoint/undo")[-1].data["files"][0]["path"]).name == "b.txt"
