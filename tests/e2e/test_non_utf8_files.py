"""End to end: a file that is not UTF-8 on disk, read through an editor that decodes it lossily (as
the VS Code extension did at 9b1526c: U+FFFD for each undecodable byte, then a WorkspaceEdit and a
save that wrote those U+FFFD back), is refused exactly as ``read`` refuses it without an editor, and
no edit is ever proposed on such text (docs/protocol.md "Files that are not UTF-8")."""

import json

from acp import RequestError
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig
from support.editor import Buffer, MemoryEditor

from agent_server.offline import text_stream, tool_call_stream
from agent_server.tools.text import NotTextError, decode_text

LATIN1 = b"caf\xe9 na\xefve\nsecond line\n"


class LossyEditor(MemoryEditor):
    """Answers reads of files it has not opened with the disk bytes decoded with U+FFFD, and opens
    a file for a proposal the same way — then applies and saves the whole text as UTF-8."""

    def read(self, params):
        path = params["path"]
        if path in self.buffers:
            return super().read(params)
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        return {"content": text, "_meta": {"agentServer": {"version": None, "dirty": False}}}

    def _answer(self, params):
        uri = params["edit"]["documentChanges"][-1]["textDocument"]["uri"]
        path = uri.removeprefix("file://")
        if path not in self.buffers:
            with open(path, "rb") as fh:
                self.buffers[path] = Buffer(fh.read().decode("utf-8", "replace"), version=1)
        return super()._answer(params)


def call(cid, name, **args):
    return tool_call_stream([(cid, name, json.dumps(args))])


async def run(factory, endpoint, workspace, editor, *steps):
    for step in (*steps, text_stream("done")):
        endpoint.push(step)
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension={"version": 1, "bufferVersions": True, "applyWorkspaceEdit": True,
                                                  "positionEncodings": ["utf-16"]})
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    return [[m["content"] for m in r.json()["messages"] if m["role"] == "tool"][-1] for r in endpoint.requests[1:]]


def refusal(raw: bytes) -> str:
    """What ``read`` says about these bytes without an editor (decode_text's own sentence)."""
    try:
        decode_text(raw)
    except NotTextError as exc:
        return str(exc)
    raise AssertionError("the disk path accepts these bytes")


async def test_latin1_file_read_through_a_lossy_editor_is_refused_like_the_disk_and_never_edited(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "latin1.txt"
    path.write_bytes(LATIN1)
    editor = LossyEditor()
    results = await run(acp_harness_factory, endpoint, workspace, editor, call("r", "read", path="latin1.txt"),
                        call("e", "edit", path="latin1.txt", old_string="second line", new_string="SECOND LINE"))
    assert results[0].startswith(f"Cannot read latin1.txt: {refusal(LATIN1)}. `read` shows text files only")
    assert "\ufffd" not in results[0] and "caf" not in results[0]
    assert results[1].startswith(f"Cannot edit latin1.txt: {refusal(LATIN1)}.")
    assert editor.proposals == []
    assert path.read_bytes() == LATIN1


async def test_open_latin1_buffer_holding_u_fffd_is_refused_and_no_proposal_rewrites_its_bytes(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "latin1.txt"
    path.write_bytes(LATIN1)
    editor = LossyEditor({str(path): Buffer(LATIN1.decode("utf-8", "replace"), version=4)})
    results = await run(acp_harness_factory, endpoint, workspace, editor, call("r", "read", path="latin1.txt"),
                        call("e", "edit", path="latin1.txt", old_string="second line", new_string="SECOND LINE"))
    assert results[0].startswith(f"Cannot read latin1.txt: {refusal(LATIN1)}.")
    assert "Cannot edit latin1.txt: the file is not UTF-8 text" in results[1]
    assert editor.proposals == [] and path.read_bytes() == LATIN1


async def test_one_stray_byte_the_disk_would_keep_is_refused_through_a_lossy_editor(
        acp_harness_factory, endpoint, workspace):
    raw = b"# caf\xe9\n" + b"x = 1\n" * 400  # within the disk path's tolerance: read from disk keeps the byte
    assert decode_text(raw).invalid_bytes == 1
    path = workspace / "stray.py"
    path.write_bytes(raw)
    editor = LossyEditor()
    results = await run(acp_harness_factory, endpoint, workspace, editor, call("r", "read", path="stray.py"),
                        call("e", "edit", path="stray.py", old_string="x = 1\n", new_string="x = 2\n", replace_all=True))
    assert results[0].startswith("Cannot read stray.py: the file is not UTF-8 text (1 invalid byte, first at offset 5).")
    assert results[1].startswith("Cannot edit stray.py: the file is not UTF-8 text")
    assert editor.proposals == [] and path.read_bytes() == raw


async def test_editor_that_refuses_a_non_utf8_document_gets_the_refusal_not_an_editor_error(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "shown.txt"
    path.write_text("caf\u00e9\n")  # UTF-8 on disk, but the editor holds the document as latin1

    class Refusing(MemoryEditor):
        def read(self, params):
            raise RequestError(-32603, f"{params['path']} is not UTF-8 text",
                               {"agentServer": {"notUtf8": True, "encoding": "iso88591"}})
    results = await run(acp_harness_factory, endpoint, workspace, Refusing(), call("r", "read", path="shown.txt"))
    assert results[0].startswith("Cannot read shown.txt: the file is not UTF-8 text (the editor holds it as iso88591).")


async def test_real_u_fffd_in_a_utf8_file_is_read_and_edited_through_the_editor(acp_harness_factory, endpoint, workspace):
    text = "bad byte shown as \ufffd here\nsecond line\n"
    path = workspace / "real.txt"
    path.write_text(text, encoding="utf-8")
    editor = LossyEditor({str(path): Buffer(text, version=2)})
    results = await run(acp_harness_factory, endpoint, workspace, editor, call("r", "read", path="real.txt"),
                        call("e", "edit", path="real.txt", old_string="second line", new_string="SECOND LINE"))
    assert "\ufffd here" in results[0]
    assert results[1].startswith("Edited real.txt")
    assert path.read_text(encoding="utf-8") == text.replace("second line", "SECOND LINE")
