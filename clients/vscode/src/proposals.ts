/**
 * `_agent_server/apply_workspace_edit`: a proposal's life (CLIENTS.md) — received, stale-checked,
 * shown, decided (all of it or hunk by hunk), re-checked, applied by VS Code, read back, saved per
 * `save`, and answered with what really landed.
 *
 * A document that is not UTF-8 (`notUtf8`: another encoding, or bytes on disk a fatal decoder
 * refuses) is answered `failed`, nothing applied: applying a `WorkspaceEdit` and saving would write
 * every byte of the file re-encoded, U+FFFD for the bytes VS Code could not decode.
 *
 * A file whose line breaks VS Code's text model would change (a mix of CRLF and LF, lone CRs; or a
 * proposed text with other line breaks than the model's) and that no editor holds unsaved text of is
 * proposed on its bytes on disk and written (created) there in place (`FileChange.disk`): never
 * through a document, which turns every line break into its own.
 *
 * The user's edits of other lines than the hunks' made while it waits are merged (`merge`); any other
 * change makes it stale. Only a change made before Accept merges: one that comes while the accepted
 * hunks are applied and saved (a save participant, format on save) is the editor's, told as such.
 *
 * Must not: draw anything (the `ProposalView` shows it), apply on top of fresh keystrokes, answer
 * `applied` without reading the document back, save a document that is not UTF-8.
 */

import { ASK_AGAIN_NOTE } from "../webview/state";
import * as vscode from "vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "./client";
import type { PositionEncoding } from "./positions";
import { existsSync, mkdirSync } from "node:fs";
import * as nodePath from "node:path";
import { defaultLineBreak, editorUri, leadsOutside, lineBreakOf, movedSince, notUtf8, openDocument, readDiskNow, realPath, writeDiskNow } from "./buffers";
import {
  type Hunk,
  type WireTextEdit,
  applyToText,
  isStale,
  lineEdits,
  makeHunks,
  mergeUserEdits,
  modelChangesLineBreaks,
  modelHolds,
  modelLineBreak,
  outcomeOf,
  proposedText,
  SAVE_FAILED_NOTE,
  saveChangedNote,
  sha256,
  shiftPending,
  toWireEdits,
} from "./proposalModel";

/** One text document of a proposal. */
export interface FileChange {
  /** The file as the editor names it (its open document's URI: one document per file). */
  uri: vscode.Uri;
  /** The URI the server sent (the answer's `applied` and `versions` are keyed by it). */
  wireUri: string;
  /** The version the agent read (`null`: it read the disk). */
  version: number | null;
  baseHash: string | undefined;
  /** Created by the proposal (a `CreateFile` before its edits). */
  create: boolean;
  /** The document (undefined for a file still to be created). */
  doc: vscode.TextDocument | undefined;
  /** Had unsaved changes when the proposal arrived (decides saving under `if-clean`). */
  wasDirty: boolean;
  /** The text the document must hold now (what we checked plus what we applied). */
  expected: string;
  /** The text the agent's edits were computed on (the document's text when the proposal arrived). */
  base: string;
  hunks: Hunk[];
  /** The user changed the proposed text: the pending hunks were recomputed from it, and `applied`
   * is rebuilt from `base` and what landed. */
  edited: boolean;
  /** The user's edits of other lines were merged with the pending hunks (`mergeUserEdits`): the
   * document holds text the agent has not seen, and the answer says so. */
  merged?: boolean;
  /** Someone typed into the document right after an accepted change landed: it is not saved for them. */
  typedAfter?: boolean;
  /** Our own edit is being applied to the document (its change events are not the user's). */
  applying?: boolean;
  /** What the disk held at the file's path when the proposal arrived (`diskState`). */
  onDisk?: DiskState;
  /** Proposed on, and applied to (created as), the file's bytes on disk: VS Code's text model would
   * change the line breaks of its text or of the proposed text (`modelHolds`); `bom`: the file starts
   * with one (kept). No document is used. */
  disk?: { bom: boolean };
  /** Its text or proposed text holds an "unusual line terminator" (U+2028, U+2029): the diff shows
   * both sides read-only (`unusualLineTerminators`), so VS Code never offers to remove them there. */
  unusual?: boolean;
  /** Its path led outside the workspace already when the proposal arrived (the server's policy let
   * it through); else a path that leads outside when it is written is refused (`leadsOutside`). */
  outsideAtArrival?: boolean;
  /** Its real path when the proposal arrived: it must lead there when written (`movedSince`). */
  realAtArrival?: string;
}

/** What the disk holds at a path: a file that can be read, nothing, a directory, or a file that cannot be read. */
export type DiskState = "file" | "missing" | "directory" | "unreadable";

/** The disk at `uri` (a `file:` URI; anything else is taken as a file: no disk to ask). */
export async function diskState(uri: vscode.Uri): Promise<DiskState> {
  if (uri.scheme !== "file") return "file";
  const code = (err: unknown) => (err instanceof vscode.FileSystemError ? err.code : "");
  try {
    const stat = await vscode.workspace.fs.stat(uri);
    if (stat.type & vscode.FileType.Directory) return "directory";
  } catch (err) {
    return code(err) === "FileNotFound" ? "missing" : "unreadable";
  }
  try {
    await vscode.workspace.fs.readFile(uri);
    return "file";
  } catch (err) {
    return code(err) === "FileNotFound" ? "missing" : code(err) === "FileIsADirectory" ? "directory" : "unreadable";
  }
}

/**
 * Why a proposal's file is stale on disk, or undefined: it was a file when the proposal arrived and
 * is no longer one now — deleted, replaced by a directory, or made unreadable. Applying would write
 * the agent's text into the document and saving would create the file again behind the user's back.
 */
export function goneFromDisk(file: FileChange, now: DiskState): string | undefined {
  if (file.create || file.onDisk !== "file" || now === "file") return undefined;
  const name = vscode.workspace.asRelativePath(file.uri);
  if (now === "missing") return `${name} was deleted on disk since the agent read it`;
  if (now === "directory") return `${name} was replaced by a directory on disk since the agent read it`;
  return `${name} can no longer be read on disk since the agent read it`;
}

/**
 * Where a document's text moved away from the proposal's: reloaded from disk (a document that had no
 * unsaved changes when the proposal arrived and has none now: VS Code reloaded it because its file
 * changed), else in the editor (typed, pasted, undone).
 */
export function changedWhere(file: Pick<FileChange, "wasDirty">, doc: { isDirty: boolean }): "on disk" | "in the editor" {
  return !file.wasDirty && !doc.isDirty ? "on disk" : "in the editor";
}

/**
 * What an `applyEdit` that answered `true` did to `doc`, from the text checked at `checked.version`
 * and the change events seen since the call: `exact` (the document holds `expected`), `then-typed`
 * (the first change is exactly ours, later ones — keystrokes — replay to the document's text),
 * `none` (the events, all someone else's, replay to the document's text: our change never landed —
 * VS Code answers `true` for an edit it dropped as a no-op after the document moved on), or `other`.
 */
export function whatLanded(
  checked: { version: number; text: string },
  expected: string,
  doc: { version: number; getText(): string },
  events: readonly (readonly { rangeOffset: number; rangeLength: number; text: string }[])[],
): "exact" | "then-typed" | "none" | "other" {
  const now = doc.getText();
  if (now === expected && (doc.version === checked.version + 1 || events.length <= 1)) return "exact";
  const replay = (text: string, changes: readonly { rangeOffset: number; rangeLength: number; text: string }[]) =>
    changes.reduce((t, c) => t.slice(0, c.rangeOffset) + c.text + t.slice(c.rangeOffset + c.rangeLength), text);
  if (events.length > 1 && replay(checked.text, events[0]!) === expected && events.slice(1).reduce(replay, expected) === now) return "then-typed";
  if (expected !== checked.text && events.reduce(replay, checked.text) === now) return "none";
  return "other";
}

/**
 * Whether `text` holds a character VS Code's editor calls an unusual line terminator (U+2028 LINE
 * SEPARATOR, U+2029 PARAGRAPH SEPARATOR). An editable editor of such a text asks, once per document,
 * whether to remove them: a diff whose two sides are the file's document and an editable proposed
 * copy asked twice, over the panel, for one file, and "Remove" would change the text under review.
 */
export function unusualLineTerminators(text: string): boolean {
  return /[\u2028\u2029]/.test(text);
}

export interface FileOp {
  kind: "rename" | "delete";
  uri: vscode.Uri;
  newUri?: vscode.Uri;
  /** As `FileChange.outsideAtArrival`, for `uri` or `newUri`. */
  outsideAtArrival?: boolean;
  /** As `FileChange.realAtArrival`, for `uri` and `newUri`. */
  realAtArrival?: string;
  newRealAtArrival?: string;
  options?: { overwrite?: boolean; ignoreIfExists?: boolean; ignoreIfNotExists?: boolean; recursive?: boolean };
}

/** How proposals are shown; implemented by the diff view and the panel. */
export interface ProposalView {
  show(p: Proposal): Promise<void>;
  refresh(p: Proposal): void;
  finish(p: Proposal, result: ApplyWorkspaceEditResult): Promise<void>;
}

/** A proposal being reviewed. */
export class Proposal {
  done = false;
  private answer!: (r: ApplyWorkspaceEditResult) => void;
  readonly result = new Promise<ApplyWorkspaceEditResult>((r) => (this.answer = r));
  createdApplied = new Set<string>();
  opsApplied = false;
  /** Set while a document of the proposal holds other text than the one the agent's change was
   * computed on (the user typed during the review): the card and the diff say so, accepting is refused. */
  stale: string | undefined;
  /** The documents whose save (format-on-save, another save participant) changed the accepted text:
   * the text as accepted, for the card's "Show What the Save Changed" (proposal ↔ as saved). */
  savedOther: { uri: vscode.Uri; accepted: string }[] = [];
  /** Accepted hunks are being applied, saved and answered (from the Accept until the answer): a
   * change of a document now is not the user's typing under review, and is never merged. */
  deciding = false;

  constructor(
    readonly id: string,
    readonly params: ApplyWorkspaceEditParams,
    readonly files: FileChange[],
    readonly ops: FileOp[],
    readonly encoding: PositionEncoding = "utf-16",
  ) {}

  get label(): string {
    return this.params.label || `Edit ${this.files.map((f) => f.uri.path.split("/").pop()).join(", ")}`;
  }

  /** The right side of a file's diff: its current text with every pending hunk applied. */
  proposed(file: FileChange): string {
    return proposedText(file.expected, file.hunks);
  }

  get anyApplied(): boolean {
    return this.files.some((f) => f.hunks.some((h) => h.state === "accepted")) || this.opsApplied;
  }

  settle(result: ApplyWorkspaceEditResult): void {
    if (this.done) return;
    this.done = true;
    this.answer(result);
  }
}

type WireChange =
  | { kind: "create"; uri: string; options?: FileOp["options"] }
  | { kind: "rename"; oldUri: string; newUri: string; options?: FileOp["options"] }
  | { kind: "delete"; uri: string; options?: FileOp["options"] }
  | { textDocument: { uri: string; version: number | null }; edits: WireTextEdit[] };

/** Receives proposals, keeps them until answered, applies what the user accepted. */
export class ProposalManager {
  private readonly live = new Map<string, Proposal>();
  private next = 1;

  constructor(private readonly view: ProposalView, private readonly log: (line: string) => void) {}

  get(id: string): Proposal | undefined {
    return this.live.get(id);
  }

  /** Handles one request; resolves with the protocol's answer. Never throws. */
  async handle(params: ApplyWorkspaceEditParams, signal: AbortSignal, encoding: PositionEncoding): Promise<ApplyWorkspaceEditResult> {
    let proposal: Proposal;
    try {
      const built = await this.build(params, encoding);
      if ("outcome" in built) return built;
      proposal = built;
    } catch (err) {
      return { outcome: "failed", message: `could not read the proposal: ${String(err instanceof Error ? err.message : err)}` };
    }
    const stale = proposal.files.find((f) => f.disk ? isStale({ version: null, text: f.base }, f.version, f.baseHash) : f.doc && isStale({ version: f.doc.version, text: f.doc.getText() }, f.version, f.baseHash));
    this.live.set(proposal.id, proposal);
    // a clean document whose file left the disk after the agent read it (the read would have failed before)
    const gone = stale ? undefined : proposal.files.find((f) => f.doc && !f.doc.isDirty && f.onDisk !== undefined && f.onDisk !== "file");
    if (gone) {
      const result: ApplyWorkspaceEditResult = { outcome: "stale", message: `${goneFromDisk({ ...gone, onDisk: "file" }, gone.onDisk!)}; nothing was applied (it was not created again)` };
      proposal.settle(result);
      await this.view.finish(proposal, result);
      this.live.delete(proposal.id);
      return result;
    }
    if (stale) {
      const where = !stale.disk && stale.doc!.isDirty ? "in the editor" : "on disk";
      const result: ApplyWorkspaceEditResult = { outcome: "stale", message: `${stale.uri.fsPath} changed ${where} since the agent read it` };
      proposal.settle(result);
      await this.view.finish(proposal, result);
      this.live.delete(proposal.id);
      return result;
    }
    const onAbort = () => void this.finish(proposal, "cancelled");
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      await this.view.show(proposal);
    } catch (err) {
      this.log(`could not show the proposal: ${String(err)}`);
    }
    const result = await proposal.result;
    signal.removeEventListener("abort", onAbort);
    this.live.delete(proposal.id);
    return result;
  }

  private async build(params: ApplyWorkspaceEditParams, encoding: PositionEncoding): Promise<Proposal | ApplyWorkspaceEditResult> {
    const changes = (params.edit?.documentChanges ?? []) as WireChange[];
    const files: FileChange[] = [];
    const ops: FileOp[] = [];
    const created = new Set<string>();
    for (const change of changes) {
      if ("kind" in change) {
        if (change.kind === "create") created.add(vscode.Uri.parse(change.uri).toString());
        else if (change.kind === "rename") ops.push({ kind: "rename", uri: editorUri(vscode.Uri.parse(change.oldUri)), newUri: editorUri(vscode.Uri.parse(change.newUri)), options: change.options });
        else if (change.kind === "delete") ops.push({ kind: "delete", uri: editorUri(vscode.Uri.parse(change.uri)), options: change.options });
        continue;
      }
      const wireUri = vscode.Uri.parse(change.textDocument.uri);
      const create = created.has(wireUri.toString());
      const uri = editorUri(wireUri); // never a second document of a file open under another path
      let doc: vscode.TextDocument | undefined;
      const edits = change.edits ?? [];
      const open = create ? undefined : openDocument(uri);
      // A text model holds one kind of line break and turns every other one into it (on load, and in
      // an edit's inserted text): a file whose text or proposed text it could not hold byte for byte is
      // proposed on, and written as, its bytes on disk — unless an editor holds unsaved text of it.
      let disk: { text: string; bom: boolean } | undefined;
      if (uri.scheme === "file" && create) {
        if (!modelHolds(proposedText("", makeHunks("", edits, encoding)), defaultLineBreak())) disk = { text: "", bom: false };
      } else if (uri.scheme === "file" && !open?.isDirty) {
        const now = readDiskNow(uri);
        if ("text" in now) {
          const eol = open ? lineBreakOf(open) : modelLineBreak(now.text) || defaultLineBreak();
          if (modelChangesLineBreaks(now.text) || !modelHolds(proposedText(now.text, makeHunks(now.text, edits, encoding)), eol)) disk = now;
        }
      } else if (open?.isDirty && !modelHolds(proposedText(open.getText(), makeHunks(open.getText(), edits, encoding)), lineBreakOf(open))) {
        return { outcome: "failed", message: `${uri.fsPath}: the change brings line breaks VS Code's editor would turn into its own (${lineBreakOf(open) === "\n" ? "LF" : "CRLF"}), and the editor holds unsaved text of it: save or revert that text and ask again; nothing was applied` };
      }
      if (disk && (params.save ?? "if-clean") !== "if-clean") {
        return { outcome: "failed", message: `${uri.fsPath}: its line breaks (a mix of CRLF and LF, or lone CRs) would be rewritten by VS Code's editor, so it can only be changed on disk, and this proposal asks not to save (save: ${params.save}); nothing was applied` };
      }
      if (disk && !create) {
        // the disk's bytes are the document: no text model of it is opened
      } else if (!create) {
        try {
          doc = openDocument(uri) ?? (await vscode.workspace.openTextDocument(uri));
        } catch (err) {
          return { outcome: "failed", message: `cannot open ${uri.fsPath}: ${String(err instanceof Error ? err.message : err)}` };
        }
      } else {
        try {
          await vscode.workspace.fs.stat(uri);
          return { outcome: "failed", message: `${uri.fsPath} already exists` };
        } catch {
          // does not exist: good
        }
      }
      const onDisk = create ? undefined : await diskState(uri);
      const bad = create ? undefined : await notUtf8(uri, doc);
      if (bad) return { outcome: "failed", message: `${uri.fsPath} is not UTF-8 text (${bad.reason}); nothing was applied` };
      const text = disk ? disk.text : doc?.getText() ?? "";
      const hunks = makeHunks(text, change.edits ?? [], encoding);
      files.push({
        uri,
        wireUri: change.textDocument.uri,
        version: create ? null : change.textDocument.version ?? null,
        baseHash: params.baseHashes?.[change.textDocument.uri],
        create,
        doc,
        wasDirty: doc?.isDirty ?? false,
        expected: text,
        base: text,
        hunks,
        edited: false,
        onDisk,
        ...(unusualLineTerminators(text) || unusualLineTerminators(proposedText(text, hunks)) ? { unusual: true } : {}),
        outsideAtArrival: leadsOutside(uri) !== undefined,
        ...(uri.scheme === "file" ? { realAtArrival: realPath(uri.fsPath) } : {}),
        ...(disk ? { disk: { bom: disk.bom } } : {}),
      });
    }
    for (const op of ops) {
      op.outsideAtArrival = [op.uri, op.newUri].some((u) => u && leadsOutside(u) !== undefined);
      if (op.uri.scheme === "file") op.realAtArrival = realPath(op.uri.fsPath);
      if (op.newUri?.scheme === "file") op.newRealAtArrival = realPath(op.newUri.fsPath);
    }
    if (files.length === 0 && ops.length === 0) return { outcome: "applied", applied: { documentChanges: [] }, saved: true, versions: {} };
    return new Proposal(`p${this.next++}`, params, files, ops, encoding);
  }

  /**
   * The user edited the proposed text of a file (the diff's right side) to `text`: its pending hunks
   * are recomputed as the line diff from what the document holds now to `text` (decided hunks stay as
   * they were), so accepting applies the user's text. Nothing when `text` is what is proposed already.
   */
  edit(id: string, fileIndex: number, text: string): void {
    const p = this.live.get(id);
    const file = p?.files[fileIndex];
    if (!p || p.done || !file || text === p.proposed(file)) return;
    const decided = file.hunks.filter((h) => h.state !== "pending");
    const fresh = lineEdits(file.expected, text).map((e, i) => ({
      index: decided.length + i,
      wire: e, // not sent back: `applied` of an edited file is rebuilt from `base` (see finish)
      range: e.range,
      newText: e.newText,
      state: "pending" as const,
    }));
    file.hunks = [...decided, ...fresh];
    file.edited = true;
    this.view.refresh(p);
  }

  /** Accepts (applies) or rejects one pending hunk; finishes when none is left. */
  async decideHunk(id: string, fileIndex: number, hunkIndex: number, accept: boolean): Promise<void> {
    const p = this.live.get(id);
    const file = p?.files[fileIndex];
    const hunk = file?.hunks.find((h) => h.index === hunkIndex);
    if (!p || p.done || !file || !hunk || hunk.state !== "pending") return;
    if (accept) {
      if (p.deciding) return; // another Accept is landing
      p.deciding = true;
      try {
        const problem = await this.applyHunks(p, file, [hunk]);
        if (problem) return await this.finish(p, problem.outcome, problem.message);
        if (p.files.every((f) => f.hunks.every((h) => h.state !== "pending")) && p.ops.length === 0) {
          return await this.finish(p, outcomeOf(p.files.flatMap((f) => f.hunks)));
        }
      } finally {
        p.deciding = false;
      }
      // keystrokes that followed the hunk while it landed: merged now, or the proposal is stale
      const doc = file.doc ?? openDocument(file.uri);
      if (doc && !doc.isClosed && !file.disk && doc.getText() !== file.expected) return this.documentChanged(doc);
    } else {
      hunk.state = "rejected";
      if (p.files.every((f) => f.hunks.every((h) => h.state !== "pending")) && p.ops.length === 0) {
        return this.finish(p, outcomeOf(p.files.flatMap((f) => f.hunks)));
      }
    }
    this.view.refresh(p);
  }

  /** Accept or reject everything still pending. */
  async decideAll(id: string, accept: boolean): Promise<void> {
    const p = this.live.get(id);
    if (!p || p.done || p.deciding) return;
    if (!accept) return this.finish(p, p.anyApplied ? "partial" : "rejected");
    p.deciding = true; // until the answer: see `merge`
    try {
      await this.acceptAll(p);
    } finally {
      p.deciding = false;
    }
  }

  private async acceptAll(p: Proposal): Promise<void> {
    for (const file of p.files) {
      const pending = file.hunks.filter((h) => h.state === "pending");
      if (pending.length === 0 && !(file.create && !p.createdApplied.has(file.uri.toString()))) continue;
      const problem = await this.applyHunks(p, file, pending);
      if (problem) return this.finish(p, problem.outcome, problem.message);
    }
    if (p.ops.length > 0) {
      const moved = p.ops.map((op) => (op.outsideAtArrival ? undefined : leadsOutside(op.uri) ?? (op.newUri && leadsOutside(op.newUri)))
        ?? movedSince(op.uri, op.realAtArrival) ?? (op.newUri && movedSince(op.newUri, op.newRealAtArrival))).find(Boolean);
      if (moved) return this.finish(p, p.anyApplied ? "partial" : "stale", `${moved}; the file operations were not applied`);
      const edit = new vscode.WorkspaceEdit();
      for (const op of p.ops) {
        if (op.kind === "rename" && op.newUri) edit.renameFile(op.uri, op.newUri, op.options);
        else if (op.kind === "delete") edit.deleteFile(op.uri, op.options);
      }
      if (!(await vscode.workspace.applyEdit(edit))) return this.finish(p, p.anyApplied ? "partial" : "failed", "VS Code refused the file operations");
      p.opsApplied = true;
    }
    const all = p.files.flatMap((f) => f.hunks);
    if (!p.anyApplied && p.files.some((f) => f.edited)) return this.finish(p, "rejected", "the user took every change out of the proposed text");
    return this.finish(p, all.length === 0 || all.every((h) => h.state === "accepted") ? "applied" : "partial");
  }

  /**
   * The user's edits of `doc` since `file.expected` merged with the pending hunks (docs/protocol.md
   * "Merged with the user's edits of other lines"): the hunks move onto the document's text, which
   * becomes `expected`. False (nothing changed) when an edit touches or neighbours a hunk, no hunk is
   * pending, the user edited the proposed text (its hunks are theirs: what they typed there lands as
   * it is, merged edits before it too), or the proposal is being decided (`deciding`: only edits
   * made before Accept are the user's typing under review).
   */
  private merge(p: Proposal, file: FileChange, doc: vscode.TextDocument): boolean {
    const now = doc.getText();
    if (now === file.expected) return true;
    const pending = file.hunks.filter((h) => h.state === "pending");
    if (p.deciding || p.done || file.edited || file.create || file.disk || pending.length === 0) return false;
    const moved = mergeUserEdits(file.expected, now, pending);
    if (!moved) return false;
    for (const [h, range] of moved) h.range = range;
    file.expected = now;
    file.merged = true;
    if (doc.isDirty) file.wasDirty = true; // the user's unsaved typing is never saved for them
    return true;
  }

  /** Why `file` (open as `doc`) cannot take the proposal now, or undefined (its text is the expected
   * one, or the user's edits of other lines merged: `merge`). */
  private staleReason(p: Proposal, file: FileChange, doc: vscode.TextDocument): string | undefined {
    return this.merge(p, file, doc) ? undefined : `${vscode.workspace.asRelativePath(file.uri)} changed ${changedWhere(file, doc)} since the agent read it`;
  }

  /**
   * A document changed: each pending proposal on it whose text is no longer what its change was
   * computed on is marked stale at once (CLIENTS.md "Stale said at once"), and un-marked if the text
   * comes back. Nothing is answered: the user asks the agent again or rejects.
   */
  documentChanged(doc: vscode.TextDocument): void {
    const key = doc.uri.toString();
    for (const p of this.live.values()) {
      if (p.done) continue;
      const file = p.files.find((f) => !f.create && f.uri.toString() === key);
      if (!file || file.applying) continue;
      if (file.disk) {
        void this.diskChanged(file.uri, true); // its document is not what it is proposed on: the disk and unsaved text decide
        continue;
      }
      const was = file.expected;
      const stale = this.staleReason(p, file, doc);
      if (stale === p.stale && file.expected === was) continue;
      p.stale = stale;
      this.view.refresh(p);
    }
  }

  /**
   * The disk changed at `uri` (a file deleted, created, replaced): a pending proposal on that file is
   * marked stale at once when the file is gone from disk (`goneFromDisk`), and un-marked when it is
   * back with the text the change was computed on.
   */
  async diskChanged(uri: vscode.Uri, changed = false): Promise<void> {
    for (const p of [...this.live.values()]) {
      const file = p.files.find((f) => !f.create && f.uri.fsPath === uri.fsPath);
      if (p.done || !file || file.applying || (changed && !file.disk)) continue;
      if (file.disk) {
        const stale = this.diskStale(file);
        if (stale === p.stale) continue;
        p.stale = stale;
        this.view.refresh(p);
        continue;
      }
      const gone = goneFromDisk(file, await diskState(file.uri));
      const doc = file.doc && !file.doc.isClosed ? file.doc : undefined;
      if (p.done) continue;
      const was = file.expected;
      const stale = gone ?? (doc && this.staleReason(p, file, doc));
      if (stale === p.stale && file.expected === was) continue;
      p.stale = stale;
      this.view.refresh(p);
    }
  }

  /**
   * Why a file proposed on its bytes on disk (`FileChange.disk`) can no longer take the change, or
   * undefined: an editor holds unsaved text of it, it left the disk, it is not UTF-8 now, or its text
   * on disk is not the one the change was computed on. Synchronous (the check right before the write).
   */
  private diskStale(file: FileChange): string | undefined {
    const name = vscode.workspace.asRelativePath(file.uri);
    if (openDocument(file.uri)?.isDirty) return `${name} changed in the editor since the agent read it (its editor holds unsaved text; the change was computed on the bytes on disk)`;
    const now = readDiskNow(file.uri);
    if ("gone" in now) return goneFromDisk(file, now.gone);
    if ("reason" in now) return `${name} is not UTF-8 text now (${now.reason})`;
    return now.text !== file.expected ? `${name} changed on disk since the agent read it` : undefined;
  }

  /** "Ask the agent again": the proposal is answered stale, so the agent reads the current text and redoes its change. */
  askAgain(id: string): Promise<void> | undefined {
    const p = this.live.get(id);
    if (!p || p.done) return undefined;
    const path = p.files.map((f) => f.uri.fsPath).join(", ");
    const why = p.stale ?? `${path} changed during the review`;
    return this.finish(p, p.anyApplied ? "partial" : "stale", `${why}${ASK_AGAIN_NOTE}`);
  }

  /** A view was closed without a choice: the rest is rejected, answered at once. */
  closed(id: string): void {
    const p = this.live.get(id);
    if (p && !p.done) void this.finish(p, p.anyApplied ? "partial" : "rejected", "the diff was closed without accepting");
  }

  /**
   * Re-checks the document, applies `hunks` together (one change), and checks what landed. Nothing is
   * awaited between the final text check and `workspace.applyEdit`: the edit then carries the version
   * that was checked, and VS Code refuses it (`false`: answered `stale`) if the document moved on
   * before it arrived. Once applied, keystrokes that followed it are the user's: what landed is
   * checked through the change events, and nothing is undone.
   */
  private async applyHunks(p: Proposal, file: FileChange, hunks: Hunk[]): Promise<{ outcome: "stale" | "failed" | "partial"; message: string } | undefined> {
    if (file.disk) return this.applyOnDisk(p, file, hunks);
    const edit = new vscode.WorkspaceEdit();
    const key = file.uri.toString();
    const creating = file.create && !p.createdApplied.has(key);
    let doc: vscode.TextDocument | undefined;
    if (creating) {
      edit.createFile(file.uri, { overwrite: false, ignoreIfExists: false });
    } else {
      // the slow checks (disk reads) first: nothing may be awaited after the text check below
      const gone = goneFromDisk(file, await diskState(file.uri));
      if (gone) return { outcome: p.anyApplied ? "partial" : "stale", message: `${gone}; nothing more was applied (it was not created again)` };
      const bad = await notUtf8(file.uri, file.doc ?? openDocument(file.uri));
      if (bad) return { outcome: p.anyApplied ? "partial" : "failed", message: `${file.uri.fsPath} is not UTF-8 text (${bad.reason}); nothing more was applied` };
      doc = file.doc ?? openDocument(file.uri);
      // never merged here: a change since the Accept is not the user's typing under review
      if (!doc || doc.isClosed || doc.getText() !== file.expected) {
        const where = doc && !doc.isClosed ? changedWhere(file, doc) : "in the editor";
        const message = `${file.uri.fsPath} changed ${where} during the review; nothing more was applied`;
        return { outcome: p.anyApplied ? "partial" : "stale", message };
      }
      // merged, nothing of the agent's applied yet: the document's unsaved text is the user's alone —
      // saved as a document without any when they saved their typing before accepting
      if (file.merged && !file.hunks.some((h) => h.state === "accepted")) file.wasDirty = doc.isDirty;
    }
    for (const h of hunks) {
      edit.replace(file.uri, new vscode.Range(h.range.start.line, h.range.start.character, h.range.end.line, h.range.end.character), h.newText);
    }
    const expected = applyToText(file.expected, hunks);
    const checked = doc ? { version: doc.version, text: file.expected } : undefined;
    // the path again, right before the write (nothing awaited from here to `applyEdit`): a folder swapped
    // for a link while the proposal waited must not carry the file outside the workspace (finding 20), nor
    // to another file than the one reviewed (a folder made a link to .git/hooks)
    const moved = (file.outsideAtArrival ? undefined : leadsOutside(file.uri)) ?? movedSince(file.uri, file.realAtArrival);
    if (moved) return { outcome: p.anyApplied ? "partial" : "stale", message: `${moved}; nothing more was applied` };
    const events: (readonly vscode.TextDocumentContentChangeEvent[])[] = [];
    const listener = doc ? vscode.workspace.onDidChangeTextDocument((e) => { if (e.document === doc && e.contentChanges.length > 0) events.push(e.contentChanges); }) : undefined;
    let ok: boolean;
    file.applying = true;
    try {
      ok = await vscode.workspace.applyEdit(edit); // same tick as the check above
    } catch (err) {
      file.applying = false;
      listener?.dispose();
      return { outcome: p.anyApplied ? "partial" : "failed", message: `VS Code could not apply the edit of ${file.uri.fsPath}: ${String(err instanceof Error ? err.message : err)}` };
    }
    file.applying = false;
    listener?.dispose();
    if (!ok) {
      const message = `${file.uri.fsPath} changed in the editor while the change was being applied (VS Code refused the edit); nothing more was applied`;
      return { outcome: p.anyApplied ? "partial" : creating ? "failed" : "stale", message };
    }
    if (creating) {
      p.createdApplied.add(key);
      file.doc = await vscode.workspace.openTextDocument(file.uri);
      if (file.doc.getText() !== expected) {
        return { outcome: p.anyApplied ? "partial" : "failed", message: `${file.uri.fsPath} does not hold the expected text after it was created` };
      }
    } else if (doc && checked) {
      const landed = whatLanded(checked, expected, doc, events);
      if (landed === "other") {
        const seen = events.map((e) => e.map((c) => `${c.rangeOffset}+${c.rangeLength}=${JSON.stringify(c.text)}`).join(" ")).join(" | ");
        this.log(`${file.uri.fsPath}: after the edit at version ${checked.version} the document is at ${doc.version}; the change events since (${seen}) do not replay to its text`);
        return { outcome: p.anyApplied ? "partial" : "failed", message: `${file.uri.fsPath} does not hold the expected text after the edit (another extension or a formatter changed it; version ${checked.version} → ${doc.version}, changes ${seen}); left as it is` };
      }
      if (landed === "none") {
        const message = `${file.uri.fsPath} changed in the editor while the change was being applied (VS Code dropped the edit); nothing more was applied`;
        return { outcome: p.anyApplied ? "partial" : "stale", message };
      }
      if (landed === "then-typed") file.typedAfter = true;
    }
    // Later hunks keep their anchors: shift them by what landed, from the bottom up.
    for (const h of [...hunks].sort((a, b) => b.index - a.index)) {
      h.state = "accepted";
      shiftPending(file.hunks, h);
    }
    file.expected = expected;
    return undefined;
  }

  /**
   * Applies `hunks` to a file proposed on its bytes on disk (`FileChange.disk`): checked, written in
   * place (its BOM kept, every other byte as it was) and read back, with nothing awaited in between.
   * A clean editor of it reloads from the disk.
   */
  private applyOnDisk(p: Proposal, file: FileChange, hunks: Hunk[]): { outcome: "stale" | "failed" | "partial"; message: string } | undefined {
    const key = file.uri.toString();
    const creating = file.create && !p.createdApplied.has(key);
    const moved = (file.outsideAtArrival ? undefined : leadsOutside(file.uri)) ?? movedSince(file.uri, file.realAtArrival);
    const stale = creating ? moved : this.diskStale(file) ?? moved;
    if (stale) return { outcome: p.anyApplied ? "partial" : "stale", message: `${stale}; nothing more was applied` };
    if (creating && existsSync(file.uri.fsPath)) return { outcome: p.anyApplied ? "partial" : "failed", message: `${file.uri.fsPath} already exists (created since the proposal arrived); nothing more was applied` };
    const now = creating ? undefined : readDiskNow(file.uri);
    const bom = now && "text" in now ? now.bom : file.disk!.bom;
    const expected = applyToText(file.expected, hunks);
    try {
      if (creating) mkdirSync(nodePath.dirname(file.uri.fsPath), { recursive: true });
      writeDiskNow(file.uri, expected, bom, creating);
      if (creating) p.createdApplied.add(key);
    } catch (err) {
      return { outcome: p.anyApplied ? "partial" : "failed", message: `could not write ${file.uri.fsPath}: ${String(err instanceof Error ? err.message : err)}; nothing more was applied` };
    }
    const back = readDiskNow(file.uri);
    if (!("text" in back) || back.text !== expected || back.bom !== bom) {
      return { outcome: p.anyApplied ? "partial" : "failed", message: `${file.uri.fsPath} does not hold the expected bytes after the write (another program wrote it at the same time?)` };
    }
    for (const h of [...hunks].sort((a, b) => b.index - a.index)) {
      h.state = "accepted";
      shiftPending(file.hunks, h);
    }
    file.expected = expected;
    return undefined;
  }

  /** Saves per `save`, builds the answer, settles and lets the view clean up. */
  async finish(p: Proposal, outcome: ApplyWorkspaceEditResult["outcome"], message?: string): Promise<void> {
    if (p.done) return;
    p.deciding = true; // a save participant's change is the editor's, never merged (see `merge`)
    const applied = p.anyApplied;
    const finalOutcome = outcome === "cancelled" && applied ? "partial" : outcome;
    const result: ApplyWorkspaceEditResult = { outcome: finalOutcome };
    if (message) result.message = message;
    if (applied) {
      result.applied = { documentChanges: [] };
      result.versions = {};
      let saved = true;
      const saveFailed: string[] = [];
      /** Per document whose save changed its text, the hash of the text before the save (what the save changed is its participants' alone). */
      const beforeSave: Record<string, string> = {};
      const notes: string[] = [];
      for (const op of p.opsApplied ? p.ops : []) {
        result.applied.documentChanges.push(
          op.kind === "rename" ? { kind: "rename", oldUri: op.uri.toString(), newUri: op.newUri!.toString() } : { kind: "delete", uri: op.uri.toString() },
        );
      }
      for (const file of p.files) {
        const accepted = file.hunks.filter((h) => h.state === "accepted");
        const created = p.createdApplied.has(file.uri.toString());
        const key = file.wireUri;
        if (accepted.length === 0 && !created) continue;
        if (created) result.applied.documentChanges.push({ kind: "create", uri: key, options: { overwrite: false, ignoreIfExists: false } });
        // Edited by the user: exactly what landed, as edits against the text the agent read (their
        // merged edits of other lines too: `merged` says so); else the agent's hunks as sent
        const edits = file.edited ? toWireEdits(file.base, lineEdits(file.base, file.expected), p.encoding) : accepted.map((h) => h.wire);
        result.applied.documentChanges.push({ textDocument: { uri: key, version: file.version }, edits });
        if (file.disk) {
          result.versions[key] = { version: null, sha256: sha256(file.expected) }; // written on disk as it was applied
          continue;
        }
        const doc = file.doc ?? openDocument(file.uri);
        const mustSave = (p.params.save ?? "if-clean") === "if-clean" && !file.wasDirty && !file.typedAfter;
        const moved = doc && mustSave
          ? (file.outsideAtArrival ? undefined : leadsOutside(doc.uri)) ?? movedSince(doc.uri, file.realAtArrival) : undefined;
        if (moved) {
          saved = false; // left unsaved in the editor: saving would write outside the workspace
          result.message = `${result.message ? result.message + "; " : ""}${moved}; not saved`;
        } else if (doc && mustSave) {
          let done = false;
          const unsaved = sha256(doc.getText());
          try {
            done = await doc.save();
          } catch {
            done = false;
          }
          if (!done || doc.isDirty) {
            // the user had nothing unsaved here: the agent's change is in the buffer only because the save failed
            saved = false;
            saveFailed.push(key);
            notes.push(SAVE_FAILED_NOTE);
          } else {
            if (sha256(doc.getText()) !== unsaved) beforeSave[key] = unsaved; // the save changed it
            const note = saveChangedNote(file.expected, doc.getText());
            if (note) {
              notes.push(note);
              p.savedOther.push({ uri: doc.uri, accepted: file.expected });
            }
          }
        } else {
          saved = false;
        }
        if (doc) result.versions[key] = { version: doc.version, sha256: sha256(doc.getText()) };
      }
      result.saved = saved;
      // the agent's hunks landed on top of the user's edits of other lines (made before the Accept)
      const merged = p.files.filter((f) => f.merged && f.hunks.some((h) => h.state === "accepted")).map((f) => f.wireUri);
      if (merged.length > 0) result._meta = { agentServer: { merged } };
      if (saveFailed.length > 0) result._meta = { agentServer: { ...result._meta?.agentServer, saveFailed } };
      if (Object.keys(beforeSave).length > 0) result._meta = { agentServer: { ...result._meta?.agentServer, beforeSave } };
      if (notes.length > 0) result.message = [result.message, ...new Set(notes)].filter(Boolean).join("; ");
    }
    p.settle(result);
    try {
      await this.view.finish(p, result);
    } catch (err) {
      this.log(`could not close the proposal view: ${String(err)}`);
    }
  }

  /** Every live proposal (for the views). */
  all(): Proposal[] {
    return [...this.live.values()];
  }
}
