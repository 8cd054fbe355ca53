"""An in-memory editor for tests of the agentServer extension (PROTOCOL.md "Extensions").

Role: holds buffers with versions and dirty flags, answers ``fs/read_text_file`` with
``_meta.agentServer``, and answers ``_agent_server/apply_workspace_edit`` like a real client:
validates the params against lsprotocol's ``WorkspaceEdit``, checks staleness (version *and*
hash), applies what the scripted "user" accepts — all, some hunks, an adjusted text, or nothing —
with its own UTF-16/UTF-8/UTF-32 applier, and saves per ``save``.

Must never: share code with the server's edit builder — it is the independent reference.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

from acp import RequestError


def _unit_len(ch: str, encoding: str) -> int:
    if encoding == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    if encoding == "utf-8":
        return len(ch.encode("utf-8"))
    return 1


def _offset(text: str, pos: dict[str, int], encoding: str) -> int:
    line, i = 0, 0
    while i < len(text) and line < pos["line"]:
        if text.startswith("\r\n", i):
            i += 2
        else:
            i += 1
        if text[i - 1] in "\r\n":
            line += 1
    count = 0
    while i < len(text) and count < pos["character"] and text[i] not in "\r\n":
        count += _unit_len(text[i], encoding)
        i += 1
    return i


def reference_apply(text: str, edits: list[dict[str, Any]], encoding: str) -> str:
    """Apply LSP TextEdits (non-overlapping) from the last to the first."""
    spans = [(_offset(text, e["range"]["start"], encoding), _offset(text, e["range"]["end"], encoding), e["newText"])
             for e in edits]
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


def rows_apply(text, edits, encoding):
    """An independent applier as Neovim's LSP client applies edits: on its buffer's rows (split at
    "\\n" only; a lone "\\r", U+2028, U+0085, a form feed are text of their row), byte columns from
    the encoding's units."""
    rows = text.split("\n")

    def offset(pos):
        line = min(pos["line"], len(rows) - 1)
        start = sum(len(r) + 1 for r in rows[:line])
        row, char, i = rows[line], 0, 0
        while i < len(row) and char < pos["character"]:
            char += len(row[i].encode("utf-16-le", "surrogatepass")) // 2 if encoding == "utf-16" else (
                len(row[i].encode("utf-8", "surrogatepass")) if encoding == "utf-8" else 1)
            i += 1
        return start + i

    out = text
    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        a, b = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        out = out[:a] + edit["newText"] + out[b:]
    return out


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save(path: str | Path, text: str) -> None:
    """Write ``text`` as a real client saves a document: the file's BOM (a property of the file,
    never in the text) kept."""
    path = Path(path)
    try:
        bom = path.read_bytes().startswith(b"\xef\xbb\xbf")
    except OSError:
        bom = False
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def uri_path(uri: str) -> str:
    return unquote(urlsplit(uri).path)


@dataclass
class Buffer:
    text: str
    version: int = 1
    dirty: bool = False


@dataclass
class MemoryEditor:
    """Open buffers keyed by absolute path; files not open are read from ``disk_root`` paths.

    ``decide(params, hunks) -> list[int] | str``: the user's answer to a proposal — the indexes of
    accepted hunks, ``"reject"``, ``"stale"`` (simulate a keystroke before the check),
    ``"never"`` (do not answer until cancelled), or a callable result dict.
    """

    buffers: dict[str, Buffer] = field(default_factory=dict)
    encoding: str = "utf-16"
    decide: Callable[[dict[str, Any], list[dict[str, Any]]], Any] = lambda params, hunks: list(range(len(hunks)))
    proposals: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    before_apply: Callable[["MemoryEditor", str], None] | None = None
    format_on_save: Callable[[str], str] | None = None
    """A save participant of ``fs/write_text_file``'s save of a clean buffer (VS Code's format-on-save):
    the text saved; a change is answered with the hash before it (``_meta.agentServer.beforeSave``)."""

    # -- fs/read_text_file ------------------------------------------------------------------

    def read(self, params: dict[str, Any]) -> dict[str, Any]:
        path = params["path"]
        if path in self.buffers:
            b = self.buffers[path]
            return {"content": b.text, "_meta": {"agentServer": {"version": b.version, "dirty": b.dirty}}}
        try:  # as a real client: the line breaks kept, the BOM (a property of the file) left out
            text = Path(path).read_bytes().decode("utf-8").removeprefix("\ufeff")
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        return {"content": text, "_meta": {"agentServer": {"version": None, "dirty": False}}}

    # -- fs/write_text_file ---------------------------------------------------------------------

    def write(self, params: dict[str, Any]) -> dict[str, Any]:
        """``fs/write_text_file``: an open buffer is changed (saved when it was clean), refused as
        stale when ``_meta.agentServer {version, sha256}`` names a document it no longer holds;
        a file not open is written on disk. ``before_apply`` runs first (a user's keystroke)."""
        path, content = params["path"], params["content"]
        self.writes.append(params)
        if self.before_apply is not None:
            self.before_apply(self, path)
        guard = ((params.get("_meta") or {}).get("agentServer") or {})
        if path in self.buffers:
            b = self.buffers[path]
            if guard and b.version != guard.get("version") and sha(b.text) != guard.get("sha256"):
                raise RequestError(-32603, f"{path} changed in the editor since the agent read it",
                                   {"agentServer": {"stale": True}})
            b.text, b.version = content, b.version + 1
            if not b.dirty:
                b.text = self.format_on_save(content) if self.format_on_save is not None else content
                save(path, b.text)
                if b.text != content:
                    return {"_meta": {"agentServer": {"beforeSave": sha(content)}}}
            return {}
        save(path, content)
        return {}

    # -- _agent_server/apply_workspace_edit ---------------------------------------------------

    def apply_workspace_edit(self, params: dict[str, Any]) -> dict[str, Any]:
        from lsprotocol import converters, types

        converters.get_converter().structure(params["edit"], types.WorkspaceEdit)  # valid LSP or raises
        self.proposals.append(params)
        answer = self._answer(params)
        self.answers.append(answer)
        return answer

    def _answer(self, params: dict[str, Any]) -> dict[str, Any]:
        changes = params["edit"]["documentChanges"]
        doc = changes[-1]
        uri = doc["textDocument"]["uri"]
        path = uri_path(uri)
        creating = any(c.get("kind") == "create" for c in changes)
        if self.before_apply is not None:
            self.before_apply(self, path)
        if creating:
            current = None
        elif path in self.buffers:
            current = self.buffers[path]
        else:
            current = Buffer(Path(path).read_bytes().decode("utf-8").removeprefix("\ufeff"),  # no BOM: as read()
                             version=None)  # type: ignore[arg-type]
        decision = self.decide(params, doc["edits"])
        if decision == "reject":
            return {"outcome": "rejected", "saved": False}
        if current is not None:
            want_version = doc["textDocument"]["version"]
            if current.version != want_version and sha(current.text) != params["baseHashes"][uri]:
                return {"outcome": "stale", "saved": False, "message": "the buffer changed"}
            if want_version is None and sha(current.text) != params["baseHashes"][uri]:
                return {"outcome": "stale", "saved": False}
        if isinstance(decision, dict):
            return decision
        accepted = [e for i, e in enumerate(doc["edits"]) if i in decision]
        base = "" if current is None else current.text
        new_text = reference_apply(base, accepted, self.encoding)
        saved = True
        if current is not None and path in self.buffers:
            buf = self.buffers[path]
            buf.text, buf.version = new_text, buf.version + 1
            if buf.dirty and params.get("save", "if-clean") == "if-clean":
                saved = False
            elif params.get("save") == "never":
                saved, buf.dirty = False, True
            else:
                save(path, new_text)
            version = buf.version
        else:
            Path(path).parent.mkdir(parents=True, exist_ok=True)  # CreateFile makes missing folders
            save(path, new_text)
            version = None
        outcome = "applied" if len(accepted) == len(doc["edits"]) else "partial"
        applied = {"documentChanges": [{"textDocument": {"uri": uri, "version": doc["textDocument"]["version"]},
                                        "edits": accepted}]}
        return {"outcome": outcome, "applied": applied, "saved": saved,
                "versions": {uri: {"version": version, "sha256": sha(new_text)}}}


async def editor_session(acp_harness_factory, endpoint, workspace, option_id: str, writes: bool = False):
    """The official ACP client with our extension over a ``MemoryEditor`` (its reads and workspace
    edits; ``writes``: its ``fs/write_text_file`` too, as VS Code), answering every permission
    question with ``option_id`` (each kept in ``asked``), and a session in ``workspace`` on
    ``endpoint``: ``(harness, session id, editor, asked)``."""
    from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig

    editor = MemoryEditor()
    asked: list[dict[str, Any]] = []
    config = ClientConfig(permission=lambda p: asked.append(p) or {"outcome": {"outcome": "selected", "optionId": option_id}},
                          read_text_file=editor.read, write_text_file=editor.write if writes else None,
                          ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension=True)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    return h, (await h.new_session(str(workspace))).session_id, editor, asked
