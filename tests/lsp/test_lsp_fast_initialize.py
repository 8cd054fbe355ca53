"""``agent-server lsp`` answers ``initialize`` before pygls loads (issue 27, item 4), and the answer
is pygls' own: for each client below, the fast answer equals what pygls answers for the front end's
features, and a document opened afterwards is counted in the position encoding it names."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from support.fixtures import agent_server_command
from support.timeouts import HANG

from agent_server.config import load_config
from agent_server.host import SessionHost
from agent_server.offline import text_stream, tool_call_stream
from agent_server.server.lsp.initialize import MAX_BODY, answer_initialize, initialize_result, read_message
from agent_server.server.lsp.server import build_server
from agent_server.session import SessionStore

NEOVIM = json.loads((Path(__file__).with_name("clients") / "neovim-0.11.json").read_text())["capabilities"]
"""What Neovim 0.11.4 sends (its ``initialize`` params, captured from the binwheels build)."""

VSCODE_LIKE = {
    "general": {"markdown": {"parser": "marked", "version": "1.1.0"}, "positionEncodings": ["utf-8", "utf-16"],
                "regularExpressions": {"engine": "ECMAScript", "version": "ES2020"},
                "staleRequestSupport": {"cancel": True, "retryOnContentModified": []}},
    "notebookDocument": {"synchronization": {"dynamicRegistration": True, "executionSummarySupport": True}},
    "textDocument": {
        "synchronization": {"didSave": True, "dynamicRegistration": True, "willSave": True, "willSaveWaitUntil": True},
        "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["", "quickfix", "refactor"]}},
                       "dataSupport": True, "disabledSupport": True, "dynamicRegistration": True,
                       "honorsChangeAnnotations": False, "isPreferredSupport": True,
                       "resolveSupport": {"properties": ["edit"]}},
        "rename": {"prepareSupport": True, "prepareSupportDefaultBehavior": 1}},
    "window": {"showDocument": {"support": True}, "workDoneProgress": True,
               "showMessage": {"messageActionItem": {"additionalPropertiesSupport": True}}},
    "workspace": {"applyEdit": True, "executeCommand": {"dynamicRegistration": True}, "workspaceFolders": True,
                  "fileOperations": {"didCreate": True, "didDelete": True, "didRename": True, "dynamicRegistration": True,
                                     "willCreate": True, "willDelete": True, "willRename": True},
                  "workspaceEdit": {"changeAnnotationSupport": {"groupsOnLabel": True}, "documentChanges": True,
                                    "failureHandling": "textOnlyTransactional", "normalizesLineEndings": True,
                                    "resourceOperations": ["create", "rename", "delete"]}},
}
"""Shaped as vscode-languageclient 9 sends it (notebooks, will-save, file operations, annotations),
offering UTF-8 before UTF-16."""

CLIENTS = {
    "minimal": ({}, "utf-16"),  # states nothing: LSP's default encoding, no will-save flags
    "neovim-0.11": (NEOVIM, "utf-8"),
    "vscode-like": (VSCODE_LIKE, "utf-8"),
    "utf-32-after-an-unknown-one": ({"general": {"positionEncodings": ["utf-7", "utf-32", "utf-16"]},
                                     "textDocument": {"synchronization": {"willSave": False}}}, "utf-32"),
}


def initialize_params(capabilities, root: Path | None = None):
    params = {"processId": os.getpid(), "capabilities": copy.deepcopy(capabilities)}
    if root is not None:
        params.update(rootUri=root.as_uri(), workspaceFolders=[{"uri": root.as_uri(), "name": root.name}])
    return params


def pygls_answer(params, state: Path):
    """What pygls itself answers this ``initialize`` for the front end (its own message path, in
    this process), and the encoding its workspace then counts in."""
    server = build_server(lambda: SessionHost(load_config(env={}, path=os.devnull), SessionStore(state)))
    protocol = server.protocol
    sent = []

    class Capture:
        def write(self, data: bytes) -> None:
            sent.append(data)

        def close(self) -> None:
            pass

    protocol.set_writer(Capture())
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    protocol.handle_message(json.loads(body, object_hook=protocol.structure_message))
    (response,) = sent
    encoding = protocol.workspace.position_encoding
    return json.loads(response.partition(b"\r\n\r\n")[2]), getattr(encoding, "value", encoding)


def fast_answer(params):
    r, w = os.pipe()
    try:
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
        answered = answer_initialize(request, w)
        os.close(w)
        w = None
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"Content-Length: %d\r\n" % len(body))
    response = json.loads(body)
    assert answered == (1, response["result"], params)
    return response


@pytest.mark.parametrize("client", CLIENTS)
def test_the_fast_answer_is_the_one_pygls_gives(client, tmp_path):
    capabilities, encoding = CLIENTS[client]
    params = initialize_params(capabilities, tmp_path)
    own, workspace_encoding = pygls_answer(params, tmp_path / "state")
    assert fast_answer(params) == own
    assert own["result"]["capabilities"]["positionEncoding"] == workspace_encoding == encoding


@pytest.mark.parametrize("client", ["minimal", "neovim-0.11", "vscode-like"])
async def test_after_the_fast_answer_an_opened_document_counts_in_the_negotiated_encoding(
        client, lsp, endpoint, workspace, tmp_path):
    capabilities, encoding = CLIENTS[client]
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(text_stream("Read it."))
    editor = await lsp(raw_capabilities=capabilities)
    sent = editor.client.protocol._converter.unstructure(types.InitializeParams(
        capabilities=editor.client.capabilities, process_id=os.getpid(), root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)]))
    own, _ = pygls_answer(sent, tmp_path / "pygls-state")
    assert editor.client.protocol._converter.unstructure(editor.init) == own["result"]
    assert editor.encoding == encoding
    prefix = 'msg = "héllo 🎉"; '
    uri = editor.open(path, prefix + "x = 1\n")
    at = len(prefix.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(prefix.encode("utf-8"))
    editor.change(uri, [{"range": {"start": {"line": 0, "character": at}, "end": {"line": 0, "character": at + 1}},
                         "newText": "y"}])  # x → y, the position counted in the negotiated encoding
    result = await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[{"uri": uri, "prompt": "Read app.py."}])), 90)
    assert result["stopReason"] == "end_turn"
    read = [m for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert 'msg = "héllo 🎉"; y = 1' in read  # the server applied the change where the editor did


async def test_a_client_offering_no_position_encoding_gets_its_edits_counted_in_utf16(lsp, endpoint, workspace):
    """pygls' default encoding is an enum member whose ``str()`` is ``PositionEncodingKind.Utf16``:
    the edit was refused as "unknown position encoding" for every client that offers none."""
    path = workspace / "app.py"
    path.write_text("print(mgs)\n")
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(tool_call_stream([("e", "edit", json.dumps({"path": "app.py", "old_string": "print(mgs)",
                                                             "new_string": "print(msg)"}))]))
    endpoint.push(text_stream("Fixed."))
    editor = await lsp(encodings=())
    assert editor.init.capabilities.position_encoding == "utf-16"
    uri = editor.open(path, 'msg = "🎉"; print(mgs)\n')
    result = await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[{"uri": uri, "prompt": "Fix the typo."}])), 90)
    assert result["stopReason"] == "end_turn"
    assert editor.applied, [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"]
    ((_, _, edits),) = editor.edits_of(editor.applied[0])
    at = len('msg = "🎉"; print(m'.encode("utf-16-le")) // 2
    assert edits == [{"range": {"start": {"line": 0, "character": at}, "end": {"line": 0, "character": at + 2}},
                      "newText": "sg"}]
    assert editor.text(uri) == 'msg = "🎉"; print(msg)\n'


HOLD = r"""
import os, sys

class Hold:
    '''Holds the first import of any of $HOLD_MODULES until the test opens $HOLD_FIFO for writing.'''

    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in os.environ["HOLD_MODULES"].split(",")):
            sys.meta_path.remove(self)
            with open(os.environ["HOLD_FIFO"], "rb") as fifo:
                fifo.read(1)
        return None

if os.environ.get("HOLD_FIFO"):
    sys.meta_path.insert(0, Hold())
"""


def frame(message) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def read_frame(stdout: asyncio.StreamReader):
    length = None
    while (line := await stdout.readline()) != b"\r\n":
        if not line:
            raise EOFError("the server closed its output")
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(await stdout.readexactly(length))


async def start_holding(modules, agent_env, workspace, tmp_path, extra_env=None):
    """``agent-server lsp`` with the first import of ``modules`` held: ``(process, release)``."""
    (tmp_path / "hold").mkdir()
    (tmp_path / "hold" / "sitecustomize.py").write_text(HOLD)
    fifo = tmp_path / "hold.fifo"
    os.mkfifo(fifo)
    env = {**os.environ, **agent_env, **(extra_env or {}), "HOLD_FIFO": str(fifo), "HOLD_MODULES": ",".join(modules),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "hold"), os.environ.get("PYTHONPATH", "")])}
    proc = await asyncio.create_subprocess_exec(*agent_server_command(), "lsp", env=env, cwd=str(workspace),
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    released = []

    def release():
        """Let the held import go on; returns once the server has begun it (opened the FIFO)."""
        if not released:
            released.append(True)
            with open(fifo, "wb") as writer:
                writer.write(b"1")

    release.fifo = fifo
    return proc, release


async def stop(proc, release, next_id):
    """``shutdown`` + ``exit`` (status 0); killed if anything failed before."""
    try:
        if proc.returncode is None:
            release()
            proc.stdin.write(frame({"jsonrpc": "2.0", "id": next_id, "method": "shutdown"}))
            while (answer := await asyncio.wait_for(read_frame(proc.stdout), HANG)).get("id") != next_id \
                    or "method" in answer:
                pass
            proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
            assert await asyncio.wait_for(proc.wait(), HANG) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(os.open(release.fifo, os.O_RDONLY | os.O_NONBLOCK))  # a release() still waiting returns


def opening_messages(workspace, path):
    """What an editor (Neovim) writes at start, all at once here: initialize, initialized,
    didOpen, a code action request (id 2)."""
    return b"".join(frame(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params(NEOVIM, workspace)},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text()}}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {
            "textDocument": {"uri": path.as_uri()},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 8}},
            "context": {"diagnostics": []}}}])


async def test_lsp_initialize_is_answered_while_pygls_is_still_loading(agent_env, workspace, tmp_path):
    """The issue's failure: ``agent-server lsp`` answered ``initialize`` only once pygls and
    lsprotocol were imported (665 ms after spawn where the ACP server took 42), so editors said "no
    code actions available" for seconds. Here their import is held until the answer has arrived;
    the editor's next messages, written at once behind ``initialize``, are served after it."""
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    proc, release = await start_holding(["pygls", "lsprotocol"], agent_env, workspace, tmp_path)
    try:
        proc.stdin.write(opening_messages(workspace, path))
        await proc.stdin.drain()
        answer = await asyncio.wait_for(read_frame(proc.stdout), HANG)  # liveness only: held, it never comes
        assert answer["id"] == 1 and answer["result"]["capabilities"]["positionEncoding"] == "utf-8"
        release()  # now pygls may load
        actions = await asyncio.wait_for(read_frame(proc.stdout), HANG)
        assert actions["id"] == 2, actions  # pygls' own answer to initialize never reached the editor
        assert [a["title"] for a in actions["result"]] == ["Agent: fix this problem", "Agent: explain",
                                                          "Agent: add tests for this"]
    finally:
        await stop(proc, release, 3)


async def test_code_actions_are_answered_while_the_host_is_still_loading(agent_env, endpoint, workspace, tmp_path):
    """The first code actions need pygls only: the session host's modules (the agent, its tools,
    pydantic, httpx) load in a thread once the editor is idle — before any command — and a command
    that comes first waits for them."""
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    endpoint.push(text_stream("It prints 1."))
    proc, release = await start_holding(["agent_server.host"], agent_env, workspace, tmp_path,
                                        {"AGENT_SERVER_BASE_URL": endpoint.base_url})
    try:
        proc.stdin.write(opening_messages(workspace, path))
        await proc.stdin.drain()
        assert (await asyncio.wait_for(read_frame(proc.stdout), HANG))["id"] == 1
        actions = await asyncio.wait_for(read_frame(proc.stdout), HANG)  # held, the host's import never ends
        assert [a["title"] for a in actions["result"]] == ["Agent: fix this problem", "Agent: explain",
                                                          "Agent: add tests for this"]
        await asyncio.wait_for(asyncio.to_thread(release), HANG)  # the idle server began importing the host itself
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": {
            "command": "agentServer.ask", "arguments": [{"uri": path.as_uri(), "prompt": "What does it print?"}]}}))
        await proc.stdin.drain()
        while "id" not in (answer := await asyncio.wait_for(read_frame(proc.stdout), 90)) or "method" in answer:
            if "id" in answer:  # the server's own requests (progress, showDocument): answered as an editor would
                result = {"success": True} if answer["method"] == "window/showDocument" else None
                proc.stdin.write(frame({"jsonrpc": "2.0", "id": answer["id"], "result": result}))
        assert answer["id"] == 3 and answer["result"]["stopReason"] == "end_turn", answer
    finally:
        await stop(proc, release, 4)


def test_only_a_plain_initialize_is_answered_early():
    plain = initialize_params({})
    for message in [json.dumps(m).encode() for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "initialize", "params": plain},  # a notification
        {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": plain},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": [plain]},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None}},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": initialize_params({"general": {"positionEncodings": "utf-8"}})},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": initialize_params({"textDocument": {"synchronization": {"willSave": "yes"}}})},
    ]] + [b"{not json", b"[1]"]:
        r, w = os.pipe()
        try:
            assert answer_initialize(message, w) is None, message
            os.close(w)
            w = None
            assert os.read(r, 100) == b""  # nothing written: pygls answers it
        finally:
            os.close(r)
            if w is not None:
                os.close(w)


def read_from(data: bytes, close: bool = True):
    r, w = os.pipe()
    try:
        os.write(w, data)
        if close:
            os.close(w)
            w = None
        return read_message(r)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_the_first_message_is_read_whole_and_every_byte_read_is_kept_for_pygls():
    first, second = frame({"id": 1, "method": "initialize"}), frame({"method": "initialized"})
    body, data = read_from(first + second)
    assert body == first.partition(b"\r\n\r\n")[2] and data == first + second
    typed = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + first  # another header first
    assert read_from(typed) == (first.partition(b"\r\n\r\n")[2], typed)
    for unread in [b"", b"Content-Length: 10\r\n", b"Content-Length: 10\r\n\r\n{\"a\":", b"Length: 2\r\n\r\n{}",
                   b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
                   b"Content-Length: %d\r\n\r\n{" % (MAX_BODY + 1)]:
        assert read_from(unread) == (None, unread)  # pygls reads them as they came
    assert initialize_result({"capabilities": {}})["capabilities"]["positionEncoding"] == "utf-16"


async def test_an_answered_initialize_that_pygls_cannot_read_still_sets_up_the_workspace(agent_env, workspace, tmp_path):
    """A field of another type than LSP's outside what the fast answer reads (``processId: "abc"``):
    pygls only logs that it cannot read the message, so the editor, which has its answer, would get
    a server without a workspace. It is set up from the root, the folders and the answered encoding."""
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    params = {**initialize_params({"general": {"positionEncodings": ["utf-8"]}}, workspace), "processId": "abc"}
    proc = await asyncio.create_subprocess_exec(*agent_server_command(), "lsp", env={**os.environ, **agent_env},
                                                cwd=str(tmp_path), stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        proc.stdin.write(b"".join(frame(m) for m in [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": path.as_uri(), "languageId": "python", "version": 1, "text": "é = 1\nprint(1)\n"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {
                "textDocument": {"uri": path.as_uri()},
                "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 8}},
                "context": {"diagnostics": []}}},
            {"jsonrpc": "2.0", "id": 3, "method": "shutdown"}]))
        await proc.stdin.drain()
        answer = await asyncio.wait_for(read_frame(proc.stdout), HANG)
        assert answer["id"] == 1 and answer["result"]["capabilities"]["positionEncoding"] == "utf-8"
        while "id" not in (actions := await asyncio.wait_for(read_frame(proc.stdout), HANG)):
            pass  # pygls' own "Error in server: Invalid Params" message (window/showMessage)
        assert actions["id"] == 2, actions
        (explain,) = [a for a in actions["result"] if a["title"] == "Agent: explain"]
        # no resolve support was read: the command comes with the action
        assert explain["command"]["arguments"][0]["prompt"].startswith("Explain the code in app.py line 2")
        assert (await asyncio.wait_for(read_frame(proc.stdout), HANG))["id"] == 3
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert await asyncio.wait_for(proc.wait(), HANG) == 0
        assert b"pygls could not read the editor's initialize params" in await proc.stderr.read()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


PROBE = r"""
import json, os, sys
import agent_server.cli.main, agent_server.server.lsp.main
from agent_server.server.lsp.initialize import answer_initialize
r, w = os.pipe()
request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
assert answer_initialize(json.dumps(request).encode(), w)
print(json.dumps([m for m in ("asyncio", "logging", "threading", "pydantic", "httpx", "attrs", "cattrs", "lsprotocol",
                              "pygls", "agent_server.host", "agent_server.config.load") if m in sys.modules]))
"""


def test_the_fast_answer_loads_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
