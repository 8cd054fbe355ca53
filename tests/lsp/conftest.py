"""LSP end-to-end set-up: the real ``agent-server lsp`` under a pytest-lsp client, the offline
endpoint, and an in-test editor that keeps its documents, syncs changes incrementally and answers
the server's requests (``workspace/applyEdit``, ``window/showMessageRequest``) as a test says.

At the end of every test, each model request the endpoint received must be rebuilt byte for byte
by ``agent-server replay`` from the session logs (as in ``tests/e2e``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Callable, Union

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from support.editor import reference_apply, rows_apply
from support.fixtures import agent_server_command
from support.replay import assert_replay_matches, chat_bodies
from support.timeouts import HANG

from agent_server.offline import OfflineEndpoint


@pytest.fixture
async def endpoint():
    async with OfflineEndpoint(reject_invalid_history=True) as ep:
        yield ep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def capabilities(*, encodings=("utf-16",), annotations=True, resolve=True, show_message=True,
                 show_document=True, progress=True) -> types.ClientCapabilities:
    """Client capabilities of a test editor; each flag switches one LSP client feature."""
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=list(encodings)),
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True, workspace_folders=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                change_annotation_support=types.ChangeAnnotationsSupportOptions(groups_on_label=False)
                if annotations else None),
            execute_command=types.ExecuteCommandClientCapabilities()),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(),
            code_action=types.CodeActionClientCapabilities(
                resolve_support=types.ClientCodeActionResolveOptions(properties=["command"]) if resolve else None,
                data_support=True)),
        window=types.WindowClientCapabilities(
            work_done_progress=progress,
            show_message=types.ShowMessageRequestClientCapabilities() if show_message else None,
            show_document=types.ShowDocumentClientCapabilities(support=True) if show_document else None),
    )


class Editor:
    """The test's editor: open documents with versions, and how it answers the server.

    ``on_apply(editor, params)`` decides ``workspace/applyEdit`` (default: apply every edit);
    ``answers``: what ``window/showMessageRequest`` gets, in order (a title, ``None`` for a
    dismissed message, ``"never"`` for no answer at all, ``"error"`` for an error answer — an
    editor that cannot show it, as Helix; the last one repeats).
    """

    def __init__(self, client: LanguageClient, encoding: str, rows: bool = False) -> None:
        self.client = client
        self.encoding = encoding
        self.rows = rows  # counts lines as Neovim's and eglot's buffers do: ended by "\n" only
        self.docs: dict[str, list[Any]] = {}  # uri -> [text, version]
        self.applied: list[types.ApplyWorkspaceEditParams] = []
        self.questions: list[types.ShowMessageRequestParams] = []
        self.answers: list[Any] = ["Allow once"]
        self.on_apply: Callable[..., Any] = Editor.apply_all

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        """``didOpen`` ``path`` with ``text`` (default: the file's) — unsaved when they differ."""
        uri = path.as_uri()
        text = path.read_text() if text is None else text
        self.docs[uri] = [text, version]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))
        return uri

    def change(self, uri: str, edits: list[dict[str, Any]]) -> None:
        """Apply LSP text edits (ranges against the current text) and sync them incrementally,
        last first so every range is still valid when sent."""
        text, version = self.docs[uri]
        order = sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
                       reverse=True)
        changes = []
        for edit in order:
            text = (rows_apply if self.rows else reference_apply)(text, [edit], self.encoding)
            r = edit["range"]
            changes.append(types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(**r["start"]), end=types.Position(**r["end"])),
                text=edit["newText"]))
        self.docs[uri] = [text, version + 1]
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
            content_changes=changes))

    def text(self, uri: str) -> str:
        return self.docs[uri][0]

    @staticmethod
    def edits_of(params: types.ApplyWorkspaceEditParams) -> list[tuple[str, int | None, list[dict[str, Any]]]]:
        """``(uri, version, [TextEdit dict])`` per ``TextDocumentEdit`` of an applyEdit."""
        out = []
        for change in params.edit.document_changes or []:
            if isinstance(change, types.TextDocumentEdit):
                edits = [{"range": {"start": {"line": e.range.start.line, "character": e.range.start.character},
                                    "end": {"line": e.range.end.line, "character": e.range.end.character}},
                          "newText": e.new_text} for e in change.edits]
                out.append((change.text_document.uri, change.text_document.version, edits))
        return out

    def apply_all(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        """What an editor does: apply the edits if the version is current, else refuse."""
        for uri, version, edits in self.edits_of(params):
            if uri in self.docs and version is not None and self.docs[uri][1] != version:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="the document version is stale")
        for uri, _version, edits in self.edits_of(params):
            self.change(uri, edits)
        return types.ApplyWorkspaceEditResult(applied=True)


def _fix_code_action_union(client: LanguageClient) -> None:
    """lsprotocol's client-side hook takes any result item with a ``command`` key for a
    ``Command`` — a ``CodeAction`` carrying its command too; tell them apart by the key's type."""
    converter = client.protocol._converter

    def hook(obj: Any, _: Any) -> Any:
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], hook)


@pytest.fixture
async def lsp(request, agent_env, agent_state_dir, endpoint, workspace):
    """``start(**capability flags, env=...)`` → an initialized ``Editor`` on the real server
    (``raw_capabilities``: a client's own capabilities, as JSON, instead of the flags';
    ``experimental``: its ``capabilities.experimental``; ``client_name``: its ``clientInfo.name``;
    ``rows``: the editor counts lines as Neovim and eglot do, ended by ``\n`` only)."""
    started: list[LanguageClient] = []

    async def start(*, env: dict[str, str] | None = None, folders: list[Path] | None = None,
                    raw_capabilities: dict[str, Any] | None = None, experimental: Any = None,
                    client_name: str | None = None, rows: bool = False, **flags) -> Editor:
        config = ClientServerConfig(
            server_command=[*agent_server_command(), "lsp"],
            server_env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})})
        client = await config.start()
        started.append(client)
        _fix_code_action_union(client)
        caps = capabilities(**flags) if raw_capabilities is None else \
            client.protocol._converter.structure(raw_capabilities, types.ClientCapabilities)
        if experimental is not None:  # the client's own ``capabilities.experimental``
            caps.experimental = experimental
        editor = Editor(client, (flags.get("encodings") or ("utf-16",))[0], rows)

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        async def apply_edit(params: types.ApplyWorkspaceEditParams):
            editor.applied.append(params)
            return editor.on_apply(editor, params)

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        async def show_message_request(params: types.ShowMessageRequestParams):
            editor.questions.append(params)
            answer = editor.answers.pop(0) if len(editor.answers) > 1 else editor.answers[0]
            if answer == "never":
                await asyncio.sleep(3600)
            if answer == "error":
                raise RuntimeError("window/showMessageRequest is not implemented")
            if callable(answer):
                answer = answer(editor, params)
            return None if answer is None else types.MessageActionItem(title=answer)

        roots = folders or [workspace]
        editor.init = await client.initialize_session(types.InitializeParams(
            capabilities=caps, root_uri=roots[0].as_uri(),
            client_info=types.ClientInfo(name=client_name) if client_name else None,
            workspace_folders=[types.WorkspaceFolder(uri=r.as_uri(), name=r.name) for r in roots]))
        if raw_capabilities is not None:  # the editor counts positions as the server said
            encoding = editor.init.capabilities.position_encoding or "utf-16"
            editor.encoding = str(getattr(encoding, "value", encoding))
        return editor

    yield start
    for client in started:
        try:
            await asyncio.wait_for(client.shutdown_session(), HANG)
        finally:
            await asyncio.wait_for(client.stop(), HANG)
    outcome = getattr(request.node, "rep_call", None)
    if chat_bodies(endpoint.requests) and not (outcome is not None and outcome.failed):
        assert_replay_matches(agent_state_dir, endpoint.requests)
