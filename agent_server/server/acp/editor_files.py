"""The workspace-file seam through the editor (PROTOCOL.md "Extensions" and the plain-ACP path).

Role: ``EditorFiles`` implements ``WorkspaceFiles`` for one session from what the client
advertised: reads go through ``fs/read_text_file`` (the user's unsaved buffer; with the
``bufferVersions`` extension, its version and dirty flag), and writes become
(a) ``_agent_server/apply_workspace_edit`` proposals the editor previews and applies itself,
guarded by the buffer version / base hash, or (b) on plain ACP: permission (with the diff), a
re-read compared with the base, then ``fs/write_text_file``; (c) anything not advertised falls
back to the disk. In ``accept-edits`` (``auto_apply``) an extension client's edit is applied without
review: re-read, compared with the base, then ``fs/write_text_file`` into its open buffer (a dirty one
stays unsaved), or the guarded disk write for a file no buffer holds; ``reviewed()`` is the seam that
always proposes (``/undo``'s restores).

Must never: call a client method the client did not advertise, or write behind the user's back —
a proposal the editor answers ``stale``/``rejected``/``cancelled`` changes nothing, and a plain-ACP
write happens only after the re-read matched the base — nor hand on, or build an edit on, text the
editor decoded from bytes that are not UTF-8 (its U+FFFD stand for bytes the editor would write back
as U+FFFD): such a file gets the refusal the disk path gives (docs/protocol.md "Files that are not
UTF-8").
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from agent_server.server.acp.initialize import negotiate_encoding
from agent_server.server.rpc.jsonrpc import RESOURCE_NOT_FOUND, Connection, ConnectionClosed, JsonRpcError, MessageTooLarge
from agent_server.server.edits import apply_text_edits, file_uri, workspace_edit
from agent_server.tools import safe_fs
from agent_server.tools.diff_view import diff_content
from agent_server.tools.files import (
    CURRENT_TOOL_CALL,
    PROPOSAL_LABEL,
    DiskFiles,
    FileSnapshot,
    NotTextFileError,
    WriteOutcome,
)
from agent_server.tools.text import NotTextError, decode_text, not_utf8
from agent_server.tools.user_wait import awaiting_user

log = logging.getLogger("agent_server.editor")

APPLY_WORKSPACE_EDIT = "_agent_server/apply_workspace_edit"
PROPOSAL_CANCEL_WAIT = 2.0
"""Seconds to wait for the editor's real answer after cancelling a pending proposal (the user may
already have applied it): PROTOCOL.md."""

Emit = Callable[[dict[str, Any]], Awaitable[None]]
ApproveEdit = Callable[[Path, "str | None", str], Awaitable["str | None"]]
"""Asks the user about a plain-ACP edit: returns ``None`` when allowed, else the reason it is not."""


@dataclass(frozen=True)
class EditorCapabilities:
    """What the client said it can do (``initialize.params.clientCapabilities``).

    ``read_text``/``write_text``: ``fs.readTextFile``/``fs.writeTextFile``; ``buffer_versions``,
    ``apply_workspace_edit``: the ``_meta.agentServer`` extension; ``encoding``: the negotiated
    position encoding (``utf-16`` unless the client listed another we support first);
    ``terminal_output``: the ``_meta`` key of the terminal convention the client announced
    (``_meta.terminal_output: true`` → ``"terminal_output"``, else ``_meta.terminal_output_delta:
    true`` → ``"terminal_output_delta"``), ``None`` when it announced neither.
    """

    read_text: bool = False
    write_text: bool = False
    buffer_versions: bool = False
    apply_workspace_edit: bool = False
    encoding: str = "utf-16"
    terminal_output: str | None = None

    @classmethod
    def from_client(cls, caps: dict[str, Any]) -> "EditorCapabilities":
        """Read ``clientCapabilities`` (a dict as sent by the client)."""
        fs = caps.get("fs") or {}
        meta = caps.get("_meta") if isinstance(caps.get("_meta"), dict) else {}
        ext = (meta.get("agentServer") or {}) if meta else {}
        if not isinstance(ext, dict) or ext.get("version") != 1:
            ext = {}
        return cls(
            read_text=fs.get("readTextFile") is True,
            write_text=fs.get("writeTextFile") is True,
            buffer_versions=ext.get("bufferVersions") is True,
            apply_workspace_edit=ext.get("applyWorkspaceEdit") is True,
            encoding=negotiate_encoding(ext.get("positionEncodings")),
            terminal_output=next((k for k in ("terminal_output", "terminal_output_delta") if meta.get(k) is True), None),
        )


_BOM = b"\xef\xbb\xbf"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EditorFiles:
    """``WorkspaceFiles`` for one session, through the editor where it allows.

    ``connection``: the ACP connection; ``emit``: sends session updates (the diff is shown on the
    tool call before the proposal); ``save``: ``"if-clean"`` or ``"never"`` (PROTOCOL.md);
    ``approve_edit``: asks the user about plain-ACP writes (``None``: writes are not asked);
    ``approval_timeout``: returns the seconds a proposal may wait for the user (``[policy]
    approval_timeout``, as a permission question; read per proposal). While a proposal or a
    question waits on the user, the calling tool's own timeout stands still (``awaiting_user``).
    ``auto_apply``: returns whether an edit is applied without review (the session is in
    ``accept-edits``; set by the host), for a client that takes proposals and writes its buffers.
    """

    def __init__(self, connection: Connection, session_id: str, caps: EditorCapabilities, *,
                 emit: Emit, save: str = "if-clean", approve_edit: ApproveEdit | None = None,
                 disk: DiskFiles | None = None, approval_timeout: Callable[[], float] = lambda: 600.0) -> None:
        self.approval_timeout = approval_timeout
        self.connection = connection
        self.session_id = session_id
        self.caps = caps
        self.emit = emit
        self.save = save
        self.approve_edit = approve_edit
        self.disk = disk or DiskFiles()
        self.auto_apply: Callable[[], bool] = lambda: False
        self._read_from_file: dict[Path, bool] = {}
        """Whether a regular file was on disk at each path when it was last read through the editor:
        an editor keeps the buffer of a file deleted since, and writing into it would create it again."""

    def reviewed(self) -> "EditorFiles":
        """This seam with every edit proposed for review, whatever the mode (``/undo``'s restores:
        a restore over the user's text is asked through its proposal)."""
        import copy

        seam = copy.copy(self)
        seam.auto_apply = lambda: False
        return seam

    def unreviewed(self) -> "EditorFiles":
        """This seam writing without review or question (``/undo``'s restore of a file the user has
        just answered "Take the checkpoint" about): into the open buffer, else guarded on disk —
        still after a re-read that must match the base."""
        import copy

        seam = copy.copy(self)
        seam.auto_apply = lambda: True
        seam.approve_edit = None
        return seam

    # -- reads ------------------------------------------------------------------------------

    async def read(self, path: Path) -> FileSnapshot:
        """The buffer's text (``fs/read_text_file``) when the client reads files, else the disk.
        Directories and binary files are read from disk (the tools refuse them there)."""
        path = Path(path)
        if not self.caps.read_text or os.path.isdir(path) or _looks_binary(path):
            return await self.disk.read(path)
        try:
            result = await self.connection.request("fs/read_text_file", {"sessionId": self.session_id, "path": str(path)})
        except JsonRpcError as exc:
            if exc.code == RESOURCE_NOT_FOUND or not path.exists():
                raise FileNotFoundError(2, "No such file (the editor says)", str(path)) from None
            refusal = await self._encoding_refusal(path, _editor_says_not_utf8(exc))
            if refusal is not None:
                raise refusal from None
            raise OSError(f"the editor could not read {path}: {exc.message}") from None
        except ConnectionClosed:
            raise OSError(f"the editor is gone; cannot read {path}") from None
        if not isinstance(result, dict) or not isinstance(result.get("content"), str):
            raise OSError(f"the editor answered fs/read_text_file for {path} without text content")
        # the editor resolved the path itself: it must still lead where policy's decision saw it lead
        # (a link swapped in while the editor read raises PathChangedError; the editor's own open
        # cannot be held to it, so a swap there and back in that window is a known limit)
        await asyncio.to_thread(self.disk.access.check, path)
        # a lossy decode leaves U+FFFD for each byte it could not take: only then is the disk asked
        refusal = await self._encoding_refusal(path) if "\ufffd" in result["content"] else None
        if refusal is not None:
            raise refusal
        meta = ((result.get("_meta") or {}).get("agentServer") or {}) if isinstance(result.get("_meta"), dict) else {}
        version = meta.get("version") if self.caps.buffer_versions and isinstance(meta.get("version"), int) else None
        disk_changed = meta.get("diskChanged") is True and meta.get("dirty") is True
        self._read_from_file[path] = _regular_file(path)
        return FileSnapshot.of(path, result["content"].encode("utf-8"), version, disk_changed=disk_changed,
                               editor_text=True)

    async def _encoding_refusal(self, path: Path, editor_says: str | None = None) -> NotTextFileError | None:
        """Why the editor's text of ``path`` cannot be used, or ``None``. The buffer is the truth
        for the text; whether the file is UTF-8 is the editor's to say (it refuses the read, see
        ``_editor_says_not_utf8``) and, when it answered text holding U+FFFD (the only trace a
        lossy decode leaves; other text costs no second read of the disk), the disk's: bytes on
        disk that are not UTF-8 (not even one stray byte, which ``read`` from disk would tolerate and keep)
        mean the editor decoded them lossily, so the read is refused with ``decode_text``'s own
        words for those bytes. A file the disk cannot give (missing, too large, unreadable) is
        decided by the editor alone."""
        try:
            snapshot = await self.disk.read(path)
        except OSError:
            snapshot = None
        if snapshot is not None:
            reason = await asyncio.to_thread(_utf8_refusal, snapshot.raw)
            if reason is not None:
                return NotTextFileError(path, reason)
        if editor_says is not None:
            return NotTextFileError(path, not_utf8(editor_says))
        return None

    # -- writes -----------------------------------------------------------------------------

    async def write(self, path: Path, raw: bytes, *, base: FileSnapshot | None) -> WriteOutcome:
        """Propose (extension), ask-check-write (plain ACP), or write to disk; see the module."""
        path = Path(path)
        try:
            new = raw.decode("utf-8")
            old = base.raw.decode("utf-8") if base is not None else None
        except UnicodeDecodeError:  # not text an editor buffer can hold: the disk path guards it
            return await self.disk.write(path, raw, base=base)
        if not self.caps.read_text:  # the base came from the disk: its BOM is not the editor's text
            if old is not None and old.startswith("\ufeff") and new.startswith("\ufeff"):
                old, new = old[1:], new[1:]
        elif new.startswith("\ufeff") and not (old or "\ufeff").startswith("\ufeff"):
            new = new[1:]  # the model's own BOM: the editor keeps the file's BOM outside its text
        if old is not None and "\ufffd" in old and (self.caps.apply_workspace_edit or self.caps.write_text):
            refusal = await self._encoding_refusal(path)  # again, right before the editor writes
            if refusal is not None:
                return WriteOutcome("failed", f"{refusal.reason}; nothing was proposed or written")
        if self.caps.apply_workspace_edit and self.caps.write_text and self.auto_apply():
            return await self._apply_unreviewed(path, old, new, raw, base)
        if self.caps.apply_workspace_edit:
            return await self._propose(path, old, new, base)
        if self.caps.write_text or self.approve_edit is not None:
            return await self._plain_write(path, old, new, raw, base)
        return await self._disk_write(path, raw, base)

    async def _disk_write(self, path: Path, raw: bytes, base: FileSnapshot | None) -> WriteOutcome:
        """The guarded disk write for a change computed on the editor's text: the editor's text
        never holds the file's BOM (docs/protocol.md "The text of a document"), so a file that has
        one keeps it, and the base is compared with the disk's bytes without it."""
        if self.caps.read_text and base is not None and not base.raw.startswith(_BOM):
            try:
                on_disk = await self.disk.read(path)
            except OSError:
                on_disk = None
            if on_disk is not None and on_disk.raw.startswith(_BOM):
                raw = raw if raw.startswith(_BOM) else _BOM + raw
                base = FileSnapshot.of(path, _BOM + base.raw, base.version)
        return await self.disk.write(path, raw, base=base)

    async def _show_diff(self, path: Path, old: str | None, new: str) -> None:
        tool_call_id = CURRENT_TOOL_CALL.get()
        if tool_call_id:
            await self.emit({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id,
                             "content": [diff_content(path, old, new)]})

    def _gone_from_disk(self, path: Path, base: FileSnapshot | None) -> WriteOutcome | None:
        """``stale`` when ``path`` was a regular file when the agent read it through the editor and
        is not one now (deleted, replaced by a directory, unreadable): the editor may still hold its
        buffer, and a write into it — saved — would create the file again behind the user's back."""
        if base is None or not self._read_from_file.get(path) or _regular_file(path):
            return None
        what = ("was replaced by a directory" if path.is_dir() else "was deleted" if not os.path.lexists(path)
                else "can no longer be read")
        return WriteOutcome("stale", f"{path.name} {what} on disk since you read it; nothing was written "
                                     "(it was not created again)")

    async def _propose(self, path: Path, old: str | None, new: str, base: FileSnapshot | None) -> WriteOutcome:
        gone = self._gone_from_disk(path, base)
        if gone is not None:
            return gone
        uri = file_uri(path)
        edit = workspace_edit(path, old, new, version=base.version if base else None, encoding=self.caps.encoding)
        text_edit = edit["documentChanges"][-1]
        total = len(text_edit["edits"])
        await self._show_diff(path, old, new)
        params = {"sessionId": self.session_id, "toolCallId": CURRENT_TOOL_CALL.get() or "",
                  "label": PROPOSAL_LABEL.get() or f"{'Create' if old is None else 'Edit'} {path.name}", "edit": edit,
                  "baseHashes": {uri: _sha(old or "")}, "save": self.save}
        result = await self._request_proposal(params)
        if isinstance(result, WriteOutcome):
            return result
        outcome = result.get("outcome") if isinstance(result, dict) else None
        message = str(result.get("message") or "") if isinstance(result, dict) else ""
        if outcome in ("applied", "partial"):
            try:
                if outcome == "applied" and result.get("applied") is None:
                    landed, applied = new, total  # "applied" without the edit: everything we sent landed
                else:
                    landed, applied = _landed_text(result.get("applied"), uri, old or "", self.caps.encoding)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                return WriteOutcome("failed", f"the editor said {outcome!r} but its 'applied' edit is not a "
                                              f"valid WorkspaceEdit for this file ({exc}); read the file to see "
                                              "what it holds now")
            versions = result.get("versions") if isinstance(result.get("versions"), dict) else {}
            info = versions.get(uri) if isinstance(versions.get(uri), dict) else {}
            version = info.get("version") if isinstance(info.get("version"), int) else None
            saved = result.get("saved") is True
            save_failed = not saved and uri in _merged_uris(result, "saveFailed")
            if uri in _merged_uris(result):  # the document also holds the user's edits of other lines
                # ``landed`` is the agent's view (its base + the applied hunks), never the document's
                # text: no version, so the next change is checked against what the editor holds now
                status = "written" if outcome == "applied" else "partial"
                return WriteOutcome(status, message, FileSnapshot.of(path, landed.encode("utf-8"), None, editor_text=True),
                                    saved=saved, save_failed=save_failed,
                                    hunks_applied=applied, hunks_total=total, merged=True)
            snapshot = FileSnapshot.of(path, landed.encode("utf-8"), version, editor_text=True)
            after_save = await self._saved_otherwise(path, info.get("sha256"), landed)
            if after_save is not None:  # a formatter on save (BufWritePre, format-on-save) changed it
                status = "written" if outcome == "applied" else "partial"
                return WriteOutcome(status, message, after_save, saved=saved, save_failed=save_failed,
                                    hunks_applied=applied, hunks_total=total, landed_by="editor",
                                    as_sent=outcome == "applied" and landed == new
                                    and _before_save(result).get(uri) == _sha(landed))
            if outcome == "applied" and landed == new:
                return WriteOutcome("written", message, snapshot, saved=saved, save_failed=save_failed,
                                    hunks_applied=total, hunks_total=total)
            status = "written" if outcome == "applied" else "partial"
            return WriteOutcome(status, message, snapshot, saved=saved, save_failed=save_failed,
                                hunks_applied=applied, hunks_total=total)
        if outcome == "stale":
            if "leads outside the workspace" in message or "the path now leads to" in message:
                # the client's check right before its write (finding 20): outside, or to another file
                return WriteOutcome("stale", message)
            if "on disk" in message:  # the editor says the disk moved (changed, deleted), not the buffer
                return WriteOutcome("stale", f"{path.name} changed since you read it: {message}")
            return WriteOutcome("stale", f"{path.name} changed in the editor since you read it")
        if outcome in ("rejected", "cancelled"):
            return WriteOutcome(outcome, message)
        if outcome == "failed":
            return WriteOutcome("failed", message or "the editor could not apply the change")
        return WriteOutcome("failed", f"the editor gave an unknown answer to the proposal: {str(result)[:200]}")

    async def _saved_otherwise(self, path: Path, sha256: Any, landed: str) -> FileSnapshot | None:
        """The document read again when the editor's ``versions[uri].sha256`` (the hash of its text
        after applying and saving) is not the hash of the text the applied edits give — a formatter
        run by the save changed it — and the document read again holds other text, else ``None``."""
        if not isinstance(sha256, str) or sha256 == _sha(landed) or not self.caps.read_text:
            return None
        try:
            now = await self.read(path)
        except OSError as exc:
            log.debug("re-read of %s after a save that changed it failed: %s", path, exc)
            return None
        return None if now.sha256 == _sha(landed) else now  # the same text after all: nothing to tell

    async def _request_proposal(self, params: dict[str, Any]) -> dict[str, Any] | WriteOutcome:
        """Send the proposal and wait for the user — up to ``approval_timeout()`` s, the tool's
        clock paused meanwhile. If the turn is cancelled meanwhile, or no answer came in time:
        send ``$/cancel_request`` and wait up to ``PROPOSAL_CANCEL_WAIT`` s for the editor's real
        answer (the user may already have applied it); that answer — or ``cancelled`` / ``timeout``
        — is the outcome."""
        try:
            request_id, future = await self.connection.begin_request(APPLY_WORKSPACE_EDIT, params)
        except ConnectionClosed:
            return WriteOutcome("failed", "the editor went away before the proposal could be sent")
        except MessageTooLarge as exc:
            return WriteOutcome("failed", f"the change is too large to propose to the editor ({exc.size:,} bytes "
                                          f"of edits, over the {exc.limit:,} bytes a message may carry); nothing "
                                          "was proposed or written: make it in smaller edits")
        try:
            try:
                with awaiting_user():  # the user's time, and the editor's last word after a withdrawal
                    return await self._await_user(request_id, future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                self.connection.cancel_outgoing(request_id)
                try:
                    answer = await asyncio.wait_for(asyncio.shield(future), PROPOSAL_CANCEL_WAIT)
                except (asyncio.TimeoutError, JsonRpcError, ConnectionClosed):
                    answer = None
                if task is not None:
                    task.uncancel()  # report what really happened; the pipeline marks it interrupted
                return answer if isinstance(answer, dict) else WriteOutcome("cancelled")
        except JsonRpcError as exc:
            return WriteOutcome("failed", f"the editor refused the proposal: {exc.message}")
        except ConnectionClosed:
            return WriteOutcome("failed", "the editor went away before answering the proposal")
        finally:
            self.connection.forget(request_id)

    async def _await_user(self, request_id: int, future: "asyncio.Future[Any]") -> dict[str, Any] | WriteOutcome:
        """The editor's answer within ``approval_timeout()`` s; else withdraw the proposal
        (``$/cancel_request``) and take the answer that still comes within ``PROPOSAL_CANCEL_WAIT``
        s, or ``timeout``. Raises what the request raises (``JsonRpcError``, ``ConnectionClosed``)."""
        timeout = self.approval_timeout()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            self.connection.cancel_outgoing(request_id)
        try:
            answer = await asyncio.wait_for(asyncio.shield(future), PROPOSAL_CANCEL_WAIT)
        except (asyncio.TimeoutError, JsonRpcError, ConnectionClosed):
            answer = None
        if isinstance(answer, dict):
            return answer
        return WriteOutcome("timeout", f"no answer within {timeout:g} s, the approval timeout; the proposal "
                                       "was withdrawn")

    async def _seen_again(self, path: Path, base: FileSnapshot | None) -> tuple[Any, WriteOutcome | None]:
        """The document read again just before writing, or the outcome that stops the write: ``failed``
        when it cannot be read, ``stale`` when it is no longer ``base`` or left the disk."""
        gone = self._gone_from_disk(path, base)
        if gone is not None:
            return None, gone
        try:
            current = await self.read(path)
        except FileNotFoundError:
            current = None
        except OSError as exc:
            return None, WriteOutcome("failed", f"cannot re-read {path} before writing: {exc}")
        if (current is None) != (base is None) or (current and base and current.sha256 != base.sha256):
            return current, WriteOutcome("stale", f"{path.name} changed since it was read (seen again just before writing)")
        return current, None

    async def _plain_write(self, path: Path, old: str | None, new: str, raw: bytes,
                           base: FileSnapshot | None) -> WriteOutcome:
        await self._show_diff(path, old, new)
        if self.approve_edit is not None:
            with awaiting_user():
                refusal = await self.approve_edit(path, old, new)
            if refusal is not None:
                return WriteOutcome("rejected", refusal)
        current, refused = await self._seen_again(path, base)
        if refused is not None:
            return refused
        if not self.caps.write_text:
            return await self._disk_write(path, raw, current if base is None else base)
        try:
            await self.connection.request("fs/write_text_file", {"sessionId": self.session_id, "path": str(path), "content": new})
        except MessageTooLarge:  # the whole text cannot go in one message: the guarded disk write
            log.info("%s: %d bytes are too large for fs/write_text_file; written on disk, guarded", path, len(raw))
            return await self._disk_write(path, raw, current if base is None else base)
        except JsonRpcError as exc:
            return WriteOutcome("failed", f"the editor could not write {path.name}: {exc.message}")
        except ConnectionClosed:
            return WriteOutcome("failed", "the editor went away before writing")
        if not self.caps.read_text:  # the disk may not hold the editor's (unsaved) buffer: nothing to compare
            return WriteOutcome("written", snapshot=FileSnapshot.of(path, new.encode("utf-8"), editor_text=True))
        return await self._read_back(path, new)

    async def _apply_unreviewed(self, path: Path, old: str | None, new: str, raw: bytes,
                                base: FileSnapshot | None) -> WriteOutcome:
        """``accept-edits``: the change applied without review, never over text the agent did not
        read. The diff is shown on the tool call; the document is read again and compared with
        ``base`` (``stale`` when it moved on); a file no editor buffer holds (``version: null``) gets
        the guarded disk write (its BOM and line breaks kept byte for byte); an open buffer gets
        ``fs/write_text_file`` with ``_meta.agentServer {version, sha256}`` of the text just read (our
        clients refuse it as stale when the buffer moved on since: the proposal's stale rule), a dirty
        one is left unsaved; then it is read back. A change too large for one message is proposed."""
        await self._show_diff(path, old, new)
        current, refused = await self._seen_again(path, base)
        if refused is not None:
            return refused
        if current is None or (self.caps.buffer_versions and current.version is None):
            return await self._disk_write(path, raw, base)  # no buffer holds it
        guard = {"agentServer": {"version": current.version, "sha256": current.sha256}}
        try:
            answer = await self.connection.request("fs/write_text_file", {"sessionId": self.session_id, "path": str(path),
                                                                          "content": new, "_meta": guard})
        except MessageTooLarge:  # the whole text cannot go in one message; the proposal carries hunks
            return await self._propose(path, old, new, base)
        except JsonRpcError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            if isinstance(data.get("agentServer"), dict) and data["agentServer"].get("stale") is True:
                if "on disk" in str(exc.message):  # the editor says the disk moved (changed, deleted)
                    return WriteOutcome("stale", f"{path.name} changed since it was read: {exc.message}")
                return WriteOutcome("stale", f"{path.name} changed in the editor since it was read")
            return WriteOutcome("failed", f"the editor could not write {path.name}: {exc.message}")
        except ConnectionClosed:
            return WriteOutcome("failed", "the editor went away before writing")
        outcome = await self._read_back(path, new)
        if outcome.snapshot is not None:
            outcome.saved = await self._on_disk(path, outcome.snapshot.raw)
        # the editor held exactly the text sent before its save changed it (docs/protocol.md: beforeSave)
        meta = answer.get("_meta") if isinstance(answer, dict) else None
        agent = meta.get("agentServer") if isinstance(meta, dict) else None
        outcome.as_sent = (outcome.landed_by == "editor" and isinstance(agent, dict)
                           and agent.get("beforeSave") == _sha(new))
        return outcome

    async def _on_disk(self, path: Path, raw: bytes) -> bool:
        """Whether the file on disk holds ``raw`` (the editor's text; the file's BOM aside)."""
        try:
            disk = await self.disk.read(path)
        except OSError:
            return False
        return disk.raw.removeprefix(_BOM) == raw.removeprefix(_BOM)

    async def _read_back(self, path: Path, sent: str) -> WriteOutcome:
        """After ``fs/write_text_file``: read the editor's buffer again (``fs/read_text_file``)
        and report what really landed — an editor may change the text while writing it (e.g.
        CodeCompanion adds a blank line at the end of an open buffer)."""
        try:
            landed = await self.read(path)
        except OSError as exc:
            log.debug("read-back of %s after fs/write_text_file failed: %s", path, exc)
            return WriteOutcome("written", snapshot=FileSnapshot.of(path, sent.encode("utf-8"), editor_text=True))
        text = landed.raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
        if text == sent:
            return WriteOutcome("written", snapshot=landed)
        return WriteOutcome("written", snapshot=landed, landed_by="editor")


def _editor_says_not_utf8(exc: JsonRpcError) -> str | None:
    """What the editor said when it refused ``fs/read_text_file`` because the document is not
    UTF-8 (``data.agentServer.notUtf8: true``, optionally ``encoding``), else ``None``."""
    data = exc.data if isinstance(exc.data, dict) else {}
    ext = data.get("agentServer") if isinstance(data.get("agentServer"), dict) else {}
    if ext.get("notUtf8") is not True:
        return None
    encoding = ext.get("encoding")
    return f"the editor holds it as {encoding}" if isinstance(encoding, str) and encoding else "so the editor says"


def _utf8_refusal(raw: bytes) -> NotTextError | None:
    """``decode_text``'s refusal of ``raw`` when it is not UTF-8 throughout (no byte tolerated)."""
    try:
        raw.decode("utf-8")
        return None
    except UnicodeDecodeError:
        pass
    try:
        decode_text(raw, tolerate_invalid=False)
    except NotTextError as exc:
        return exc
    return None


def _landed_text(applied: Any, uri: str, old: str, encoding: str) -> tuple[str, int]:
    """The text after the editor's ``applied`` WorkspaceEdit, and how many edits it holds."""
    if not isinstance(applied, dict):
        raise ValueError("no 'applied' WorkspaceEdit")
    edits: list[dict[str, Any]] = []
    for change in applied.get("documentChanges") or []:
        if isinstance(change, dict) and "edits" in change and change["textDocument"]["uri"] == uri:
            edits.extend(change["edits"])
    return apply_text_edits(old, edits, encoding), len(edits)


def _merged_uris(result: dict[str, Any], key: str = "merged") -> list[str]:
    """The documents the editor merged the agent's hunks into with the user's edits of other lines
    (``_meta.agentServer.merged``, docs/protocol.md "Edit proposals"); with ``key="saveFailed"``,
    the documents it tried to save (no unsaved text of the user's) and whose save did not complete."""
    meta = result.get("_meta")
    agent = meta.get("agentServer") if isinstance(meta, dict) else None
    merged = agent.get(key) if isinstance(agent, dict) else None
    return [u for u in merged if isinstance(u, str)] if isinstance(merged, list) else []


def _before_save(result: dict[str, Any]) -> dict[str, str]:
    """``_meta.agentServer.beforeSave``: per document the editor saved, the hash of its text after the
    edit was applied and before the save (docs/protocol.md): what its save participants changed is
    theirs alone when that hash is the applied text's."""
    meta = result.get("_meta")
    agent = meta.get("agentServer") if isinstance(meta, dict) else None
    hashes = agent.get("beforeSave") if isinstance(agent, dict) else None
    return {u: h for u, h in hashes.items() if isinstance(u, str) and isinstance(h, str)} if isinstance(hashes, dict) else {}


def _regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file this process can read (links followed)."""
    try:
        return path.is_file() and os.access(path, os.R_OK)
    except OSError:
        return False


def _looks_binary(path: Path) -> bool:
    """Whether a regular file has a NUL byte in its first 8 KB (opened without blocking and without
    following a link after one resolution — never a FIFO or the server's stdin)."""
    try:
        fd = safe_fs.open_regular(safe_fs.resolve_once(path))
    except OSError:
        return False
    try:
        return b"\x00" in os.read(fd, 8192)
    except OSError:
        return False
    finally:
        os.close(fd)
