"""Workspace files in an LSP editor: reads from the synced documents, edits by ``workspace/applyEdit``.

Role: ``SyncedDocuments`` wakes whoever waits for a document sync (``didOpen``/``didChange``/
``didClose``; pygls keeps the text, incrementally synced). ``LspFiles`` is a session's
``WorkspaceFiles``: an open document is read from its synced text with its version (the unsaved
text, no round trip), any other file from disk. An edit to an open document is sent as one
``workspace/applyEdit`` with a versioned ``TextDocumentEdit`` (one ``TextEdit`` per hunk, in the
negotiated position encoding; with ``changeAnnotationSupport`` each hunk carries an annotation
with ``needsConfirmation: true``, except in ``accept-edits``: ``auto_apply``). The answer is only true/false, so what landed is read from the
document sync that follows and matched against the hunks sent: all of them (``written``), some
(``partial``, "1 of 2 hunks"), none (``rejected``), or text the user changed (``written`` with
what landed). A document changed since the agent read it is ``stale``. Files not open are written
on disk. Lines are counted as the client counts them (``client_line_breaks``), in edits and sync.

Must never: send an edit against a version other than the one the agent read, or report hunks as
applied that the editor's document does not hold.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

from agent_server.server.edits import LINE_BREAKS, apply_text_edits, file_uri, workspace_edit
from agent_server.tools.files import PROPOSAL_LABEL, DiskFiles, FileSnapshot, WriteOutcome
from agent_server.tools.user_wait import awaiting_user

log = logging.getLogger("agent_server.lsp")

SYNC_WAIT = 5.0
"""Seconds to wait, after the editor answered ``applied: true``, for the document sync that shows
what landed."""
CANCEL_WAIT = 2.0
"""Seconds to wait for the editor's answer after the turn was cancelled with an edit pending."""
MAX_SUBSET_HUNKS = 12
"""Up to this many hunks, a partial result is matched against every subset of them."""


class SyncedDocuments:
    """Notifies waiters of every document sync of one server; ``workspace``: pygls ``Workspace``
    getter (the documents themselves live there)."""

    def __init__(self, workspace: Callable[[], Any]) -> None:
        self._workspace = workspace
        self._changed = asyncio.Condition()

    def get(self, path: Path) -> Any | None:
        """The open ``TextDocument`` of ``path`` (absolute), or ``None`` when it is not open."""
        return self._workspace().text_documents.get(unquote(file_uri(path)))

    async def synced(self) -> None:
        """Call after each sync notification: wakes the waiters."""
        async with self._changed:
            self._changed.notify_all()

    async def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds after a sync (or already does); ``False`` on timeout."""
        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(predicate), timeout)
            return True
        except asyncio.TimeoutError:
            return False


#: How a client that says nothing counts lines, by its ``clientInfo.name`` (lower case): its buffer's
#: rows, ended by ``\n`` only — Neovim's LSP client (a lone ``\r`` stays inside its row,
#: ``'fileformat'`` unix or dos); Emacs's eglot (``forward-line`` and ``line-number-at-pos`` over the
#: buffer text it syncs, where only ``\n`` ends a line: eglot.el's ``eglot--lsp-position-to-point``
#: and ``eglot--pos-to-lsp-position``). Any other: as LSP says.
ROWS_BY_NAME = {"neovim": "lf", "eglot": "lf"}


def client_line_breaks(client_name: str | None, experimental: Any = None) -> str:
    """How a client counts lines (``agent_server.server.edits.LINE_BREAKS``): as it says in
    ``capabilities.experimental.agentServer.lineBreaks`` (docs/protocol.md); a client that says
    nothing, by its name (``ROWS_BY_NAME``), else as LSP says."""
    agent = experimental.get("agentServer") if isinstance(experimental, dict) else None
    said = agent.get("lineBreaks") if isinstance(agent, dict) else None
    if said in LINE_BREAKS:
        return str(said)
    return ROWS_BY_NAME.get((client_name or "").strip().lower(), "lsp")


def synced_text_document(line_breaks: Callable[[], str], encoding: Callable[[], str]) -> type:
    """pygls' ``TextDocument`` whose incremental changes and ``lines`` count lines as the client
    does (``line_breaks()``), with this module's edits (pygls splits with ``str.splitlines``:
    at U+2028, U+0085, a form feed … too, which no editor counts)."""
    from pygls.workspace import TextDocument

    class SyncedText(TextDocument):
        def _apply_incremental_change(self, change: Any) -> None:
            r = change.range
            edit = {"range": {"start": {"line": r.start.line, "character": r.start.character},
                              "end": {"line": r.end.line, "character": r.end.character}}, "newText": change.text}
            self._source = apply_text_edits(self.source, [edit], encoding(), line_breaks())

        @property
        def lines(self) -> tuple[str, ...]:
            text = self.source
            pattern = _LSP_LINE if line_breaks() == "lsp" else _LF_LINE
            return tuple(m.group() for m in pattern.finditer(text) if m.group())

    return SyncedText


_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_LF_LINE = re.compile(r"[^\n]*\n|[^\n]+$")


def landed_hunks(old: str, edits: list[dict[str, Any]], landed: str, encoding: str,
                 line_breaks: str = "lsp") -> int | None:
    """How many of ``edits`` (ranges against ``old``) ``landed`` holds, when it is ``old`` with a
    subset of them applied; ``None`` when it is something else (the user changed the text)."""
    total = len(edits)
    sizes = range(total, -1, -1)
    for size in sizes:
        if total > MAX_SUBSET_HUNKS and size not in (0, total):
            continue
        for subset in itertools.combinations(edits, size):
            if apply_text_edits(old, list(subset), encoding, line_breaks) == landed:
                return size
    return None


Send = Callable[[dict[str, Any], str], Awaitable[Any]]
"""Sends ``workspace/applyEdit`` (``WorkspaceEdit`` dict, label) and returns the ``applied`` answer
as ``(applied: bool, failure_reason: str | None)``."""


class LspFiles:
    """``WorkspaceFiles`` of one session in an LSP editor.

    ``documents``: the synced documents; ``send``: sends an applyEdit (see ``Send``);
    ``encoding``: the negotiated position encoding; ``annotations``: whether the client supports
    change annotations (each hunk then asks for confirmation); ``approval_timeout``: returns the
    seconds an edit may wait for the user (``[policy] approval_timeout``) — the calling tool's own
    timeout stands still meanwhile (``awaiting_user``); no answer by then is ``timeout``.
    """

    def __init__(self, documents: SyncedDocuments, send: Send, *, encoding: Callable[[], str],
                 annotations: Callable[[], bool], disk: DiskFiles | None = None,
                 approval_timeout: Callable[[], float] = lambda: 600.0,
                 line_breaks: Callable[[], str] = lambda: "lsp") -> None:
        self.line_breaks = line_breaks
        self.approval_timeout = approval_timeout
        self.documents = documents
        self.send = send
        self._encoding = encoding
        self._annotations = annotations
        self.disk = disk or DiskFiles()
        self.auto_apply: Callable[[], bool] = lambda: False
        """Whether edits go without confirmation (``accept-edits``; set by the host)."""

    def reviewed(self) -> "LspFiles":
        """This seam with every hunk confirmed where the client can, whatever the mode (``/undo``)."""
        import copy

        seam = copy.copy(self)
        seam.auto_apply = lambda: False
        return seam

    def unreviewed(self) -> "LspFiles":
        """This seam applying without a confirmation per hunk (``/undo`` after "Take the checkpoint")."""
        import copy

        seam = copy.copy(self)
        seam.auto_apply = lambda: True
        return seam

    async def read(self, path: Path) -> FileSnapshot:
        """The open document's synced text and version, else the file on disk."""
        doc = self.documents.get(Path(path))
        if doc is None:
            return await self.disk.read(path)
        return FileSnapshot.of(Path(path), doc.source.encode("utf-8"), doc.version, editor_text=True)

    async def write(self, path: Path, raw: bytes, *, base: FileSnapshot | None) -> WriteOutcome:
        """Edit the open document through the editor, or write the file on disk; see the module."""
        path = Path(path)
        doc = self.documents.get(path)
        try:
            new = raw.decode("utf-8")
        except UnicodeDecodeError:
            doc = None
        if doc is None or base is None:
            return await self.disk.write(path, raw, base=base)
        old = base.raw.decode("utf-8", "replace")
        version = doc.version
        if doc.source != old or (base.version is not None and base.version != version):
            return WriteOutcome("stale", f"{path.name} changed in the editor since you read it "
                                         f"(now version {version})")
        encoding = self._encoding()
        edit = workspace_edit(path, old, new, version=version, encoding=encoding, line_breaks=self.line_breaks())
        hunks = edit["documentChanges"][-1]["edits"]
        total = len(hunks)
        if total == 0:
            return WriteOutcome("written", snapshot=base, saved=self._saved(path, old))
        sent = [dict(h) for h in hunks]
        if self._annotations() and not self.auto_apply():
            annotations = {}
            for k, hunk in enumerate(hunks, 1):
                hunk["annotationId"] = f"agent-server.hunk-{k}"
                annotations[hunk["annotationId"]] = {"label": f"Agent: change {k} of {total}",
                                                     "needsConfirmation": True,
                                                     "description": f"{path.name}, line {hunk['range']['start']['line'] + 1}"}
            edit["changeAnnotations"] = annotations
        try:
            applied, reason = await self._send(edit, PROPOSAL_LABEL.get() or f"Agent: edit {path.name}")
        except ConnectionError as exc:
            return WriteOutcome("failed", f"the editor could not be asked to apply the edit ({exc})")
        except asyncio.TimeoutError:
            return WriteOutcome("timeout", f"no answer within {self.approval_timeout():g} s, the approval "
                                           f"timeout; the editor may still apply it, so read {path.name} "
                                           "again before changing it")
        if not applied:
            now = self.documents.get(path)
            if now is None or now.version != version:
                return WriteOutcome("stale", f"the editor refused the edit because {path.name} changed "
                                             f"(version {version} is stale)")
            return WriteOutcome("rejected", f"the editor did not apply it{': ' + reason if reason else ''}")

        def moved() -> bool:
            current = self.documents.get(path)
            return current is None or current.version != version

        synced = await self.documents.wait(moved, SYNC_WAIT)
        current = self.documents.get(path)
        if not synced or current is None:
            log.warning("applyEdit on %s answered true but no document sync followed", path)
            return WriteOutcome("written", "the editor said it applied the edit, but sent no document change; "
                                           "read the file to see what it holds", saved=False)
        landed = current.source
        snapshot = FileSnapshot.of(path, landed.encode("utf-8"), current.version, editor_text=True)
        count = landed_hunks(old, sent, landed, encoding, self.line_breaks())
        log.info("applyEdit on %s: %s of %s hunks landed (version %s → %s)", path,
                 "?" if count is None else count, total, version, current.version)
        saved = self._saved(path, landed)
        if count == total or count is None:
            return WriteOutcome("written", snapshot=snapshot, saved=saved, hunks_applied=count, hunks_total=total)
        if count == 0:
            return WriteOutcome("rejected", f"the editor applied none of the {total} hunks")
        return WriteOutcome("partial", f"applied {count} of {total} hunks", snapshot, saved=saved,
                            hunks_applied=count, hunks_total=total)

    async def _send(self, edit: dict[str, Any], label: str) -> tuple[bool, str | None]:
        """Send the edit and wait for the user (the tool's clock paused), up to the approval
        timeout (then ``asyncio.TimeoutError``); if the turn is cancelled meanwhile, wait
        ``CANCEL_WAIT`` s for the real answer (the user may already have applied it) before giving up."""
        task = asyncio.ensure_future(self.send(edit, label))
        try:
            with awaiting_user():
                return await asyncio.wait_for(asyncio.shield(task), self.approval_timeout())
        except asyncio.TimeoutError:
            task.cancel()
            raise
        except asyncio.CancelledError:
            try:
                answer = await asyncio.wait_for(asyncio.shield(task), CANCEL_WAIT)
            except (asyncio.TimeoutError, Exception):
                task.cancel()
                raise asyncio.CancelledError from None
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            return answer

    def _saved(self, path: Path, text: str) -> bool:
        """Whether the disk holds ``text`` (else the change is only in the editor's buffer); the
        file's BOM is not the document's text (docs/protocol.md "The text of a document")."""
        try:
            return path.read_bytes().removeprefix(b"\xef\xbb\xbf") == text.encode("utf-8")
        except OSError:
            return False
