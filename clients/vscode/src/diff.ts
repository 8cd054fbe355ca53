/**
 * The diff view of proposals: `vscode.diff` between the document and a virtual file
 * (`agent-proposal:` scheme, a file system provider; its path reads as the file's) holding the proposed text, CodeLens per hunk
 * (Accept / Reject), Accept All / Reject All in the editor title, and "closing the diff without
 * choosing is a reject". The proposed side is editable (CLIENTS.md "Edited before accepting"): what
 * the user types there is handed to the manager, which recomputes the hunks, so accepting applies the
 * user's text.
 *
 * Must not: apply text itself (the `ProposalManager` does).
 */

import * as vscode from "vscode";
import type { ApplyWorkspaceEditResult } from "./client";
import type { FileChange, Proposal, ProposalManager, ProposalView } from "./proposals";
import { comparePositions, shiftPosition } from "./proposalModel";

export const PROPOSAL_SCHEME = "agent-proposal";

/** Whether a side's text is `want` but for its line breaks (a text model holds one kind: a side
 * proposed on a file's bytes on disk may hold a mix, which it shows as the model's). */
export function sameText(text: string, want: string): boolean {
  return text === want || text.replace(/\r\n?/g, "\n") === want.replace(/\r\n?/g, "\n");
}

/**
 * What the diff's breadcrumb and tooltip show of a file: its workspace-relative path (with the
 * folder's name in a multi-root workspace; an absolute path outside the workspace), as a URI path.
 */
export function shownPath(uri: vscode.Uri): string {
  const rel = vscode.workspace.asRelativePath(uri, (vscode.workspace.workspaceFolders?.length ?? 0) > 1).replace(/\\/g, "/");
  return rel.startsWith("/") ? rel : `/${rel}`;
}

/**
 * `agent-proposal:/<the file's workspace-relative path>?<id>/<fileIndex>/<side>`: the path is what
 * the diff editor's breadcrumb shows, so it reads as the file's (the proposal's ids, in the query,
 * never show).
 */
export function proposalUri(p: Proposal, fileIndex: number, side: "old" | "new"): vscode.Uri {
  return vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: shownPath(p.files[fileIndex]!.uri), query: `${encodeURIComponent(p.id)}/${fileIndex}/${side}` });
}

export function parseProposalUri(uri: vscode.Uri): { id: string; fileIndex: number; side: string } | undefined {
  if (uri.scheme !== PROPOSAL_SCHEME) return undefined;
  const [id, index, side] = uri.query.split("/");
  if (!id || index === undefined || !/^\d+$/.test(index) || !side) return undefined;
  return { id: decodeURIComponent(id), fileIndex: Number(index), side };
}

/** The diff's title: the proposal's label, and the file's workspace-relative path when the label does not name the file. */
export function diffTitle(p: Proposal, fileIndex: number): string {
  const shown = shownPath(p.files[fileIndex]!.uri).replace(/^\//, "");
  const name = shown.split("/").pop()!;
  return `${p.label}${p.label.includes(name) ? "" : `: ${shown}`} (proposal)`;
}

/** Where each pending hunk starts in the proposed (right-side) text. */
export function proposedAnchors(file: FileChange): { index: number; line: number }[] {
  const pending = file.hunks.filter((h) => h.state === "pending").map((h) => ({ h, range: h.range }));
  const out: { index: number; line: number }[] = [];
  for (let i = 0; i < pending.length; i++) {
    const cur = pending[i]!;
    out.push({ index: cur.h.index, line: cur.range.start.line });
    for (let j = i + 1; j < pending.length; j++) {
      const later = pending[j]!;
      if (comparePositions(later.range.start, cur.range.end) >= 0) {
        const applied = { range: cur.range, newText: cur.h.newText };
        later.range = { start: shiftPosition(later.range.start, applied), end: shiftPosition(later.range.end, applied) };
      }
    }
  }
  return out;
}

/** The schemes of our own virtual documents: a proposal's sides, a permission question's diff, the Changes view's diff. */
export const OWN_SCHEMES = new Set([PROPOSAL_SCHEME, "agent-permission", "agent-change"]);

/**
 * Tabs showing one of our virtual documents that this extension host did not open: VS Code restores
 * a window's tabs after a reload (and in a second window on the same folder), but their text lived in
 * the extension host that is gone — its proposal was answered (cancelled) with it. Such a tab shows
 * "could not be opened" and would suggest the proposal is still live; they are closed.
 */
export function leftoverTabs(tabs: readonly vscode.Tab[], known: (uri: vscode.Uri) => boolean = () => false): vscode.Tab[] {
  const ours = (u: unknown): u is vscode.Uri => u instanceof vscode.Uri && OWN_SCHEMES.has(u.scheme);
  return tabs.filter((t) => {
    const input = t.input;
    const uris = input instanceof vscode.TabInputTextDiff ? [input.original, input.modified] : input instanceof vscode.TabInputText ? [input.uri] : [];
    return uris.some(ours) && !uris.some((u) => ours(u) && known(u));
  });
}

/** Listener for the panel: a proposal was shown, changed, or answered. */
export interface ProposalPanel {
  /** Whether the panel shows the session `p` belongs to (a proposal of another one opens no diff). */
  isShown(p: Proposal): boolean;
  proposalShown(p: Proposal): void;
  proposalChanged(p: Proposal): void;
  proposalFinished(p: Proposal, result: ApplyWorkspaceEditResult): void;
}

export class DiffView implements ProposalView, vscode.FileSystemProvider, vscode.CodeLensProvider {
  private readonly filesChanged = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeFile = this.filesChanged.event;
  readonly onDidChangeCodeLenses = this.lensesChanged.event;
  manager!: ProposalManager;
  private readonly closing = new Set<string>();
  /** mtime of each virtual file, bumped when its text changes (VS Code reloads on a new stat; the
   * same mtime and size would be "not modified since", and the reload dropped). */
  private readonly stamps = new Map<string, number>();
  /** Sides whose last change event left them with unsaved changes (typed by the user). */
  private readonly dirtySides = new Set<string>();
  /** The text each side was last changed again for (a reload that landed another): once per text, so
   * a text VS Code's model cannot hold as it is never reloads it in a loop. */
  private readonly reloadedFor = new Map<string, string>();
  /** Proposals on screen, kept until their tabs are closed (the manager forgets them once answered). */
  private readonly onScreen = new Map<string, Proposal>();
  /** Proposals of a session the panel did not show when they came: their diffs open once it does. */
  private readonly deferred = new Set<string>();

  /** `place`: where a proposal opens unasked (keyboard.ts: behind the user's editor unless the panel has the keyboard). */
  constructor(
    private readonly panel: ProposalPanel,
    private readonly place: () => { preserveFocus: true; background: boolean } = () => ({ preserveFocus: true, background: false }),
  ) {}

  register(): vscode.Disposable {
    // a proposal's file deleted or replaced on disk (a terminal's rm): its card turns stale at once
    const disk = vscode.workspace.createFileSystemWatcher("**/*");
    const onDisk = (uri: vscode.Uri) => void this.manager.diskChanged(uri);
    const onDiskChanged = (uri: vscode.Uri) => void this.manager.diskChanged(uri, true);
    return vscode.Disposable.from(
      disk,
      disk.onDidDelete(onDisk),
      disk.onDidCreate(onDisk),
      disk.onDidChange(onDiskChanged), // a file proposed on its bytes on disk, written by another program
      vscode.workspace.registerFileSystemProvider(PROPOSAL_SCHEME, this, { isCaseSensitive: true }),
      vscode.languages.registerCodeLensProvider({ scheme: PROPOSAL_SCHEME }, this),
      vscode.window.tabGroups.onDidChangeTabs((e) => {
        this.onTabsChanged(e.closed);
        this.closeLeftovers(e.opened);
      }),
      vscode.workspace.onDidChangeTextDocument((e) => this.onTyped(e)),
      vscode.workspace.onDidSaveTextDocument((d) => this.dirtySides.delete(d.uri.toString())),
    );
  }

  /** The text of a virtual file (the document's side, or the proposed side), undefined when gone. */
  private content(uri: vscode.Uri): { text: string; readonly: boolean } | undefined {
    const ref = parseProposalUri(uri);
    const p = ref && (this.manager.get(ref.id) ?? this.onScreen.get(ref.id));
    const file = p?.files[ref!.fileIndex];
    if (!p || !file) return undefined;
    // a file proposed on its bytes on disk: its proposed side is not editable (VS Code's model of it
    // changes the line breaks, so what is typed there could not be told from them); nor one holding
    // unusual line terminators (an editable editor of it asks to remove them)
    return ref!.side === "old" ? { text: file.expected, readonly: true } : { text: p.proposed(file), readonly: Boolean(file.disk || file.unusual) };
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    const c = this.content(uri);
    if (!c) throw vscode.FileSystemError.FileNotFound(uri);
    const size = new TextEncoder().encode(c.text).length;
    return { type: vscode.FileType.File, ctime: 0, mtime: this.stamps.get(uri.toString()) ?? 1, size, permissions: c.readonly ? vscode.FilePermission.Readonly : undefined };
  }

  readFile(uri: vscode.Uri): Uint8Array {
    const c = this.content(uri);
    if (!c) throw vscode.FileSystemError.FileNotFound(uri);
    return new TextEncoder().encode(c.text);
  }

  /** Saving the proposed side hands its text to the manager (typing already did); a saved copy of a
   * proposal that was answered meanwhile is dropped. */
  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    const ref = parseProposalUri(uri);
    const file = ref && this.manager.get(ref.id)?.files[ref.fileIndex];
    if (!ref || ref.side !== "new" || file?.disk || file?.unusual) throw vscode.FileSystemError.NoPermissions(uri);
    this.manager.edit(ref.id, ref.fileIndex, new TextDecoder().decode(content));
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => {});
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  /**
   * A document changed. One of ours: the user typed into a proposed side (its text is handed to the
   * manager, which recomputes that file's hunks), or VS Code reloaded a side we changed. A reload
   * never comes for a side with unsaved changes, and leaves it clean; one that loaded an older text
   * than the side's now (a change we made while VS Code still loaded the previous one) is followed by
   * another change of the side, so the diff ends on the current text whatever the typing's pace. A
   * document of a proposal's file: the manager checks it (stale, or the user's edits merged).
   */
  private onTyped(e: vscode.TextDocumentChangeEvent): void {
    const doc = e.document;
    const ref = parseProposalUri(doc.uri);
    if (!ref) {
      this.manager.documentChanged(doc); // its dirty state too: the first keystroke's event says clean
      return;
    }
    const key = doc.uri.toString();
    // typed: unsaved now, an undo or redo, or a change of a side that had unsaved changes (typing
    // that brings it back to its loaded text leaves it clean)
    const byUser = doc.isDirty || e.reason !== undefined || this.dirtySides.has(key);
    if (doc.isDirty) this.dirtySides.add(key);
    else this.dirtySides.delete(key);
    if (e.contentChanges.length === 0) return; // only its dirty state changed
    const file = this.manager.get(ref.id)?.files[ref.fileIndex];
    if (byUser) {
      if (ref.side === "new" && file && !file.disk && !file.unusual) this.manager.edit(ref.id, ref.fileIndex, doc.getText());
      return;
    }
    const want = this.content(doc.uri)?.text;
    if (want === undefined || sameText(doc.getText(), want) || this.reloadedFor.get(key) === want) return;
    this.reloadedFor.set(key, want);
    this.changed([doc.uri]);
  }

  /** The sides `uris` changed: VS Code reloads each (a new mtime, strictly later than the last). */
  private changed(uris: vscode.Uri[]): void {
    for (const uri of uris) this.stamps.set(uri.toString(), Math.max(Date.now(), (this.stamps.get(uri.toString()) ?? 0) + 1));
    this.filesChanged.fire(uris.map((uri) => ({ type: vscode.FileChangeType.Changed, uri })));
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const ref = parseProposalUri(document.uri);
    const p = ref && this.manager.get(ref.id);
    const file = p?.files[ref!.fileIndex];
    if (!p || !file || ref!.side !== "new" || p.done) return [];
    if (p.stale) {
      const top = new vscode.Range(0, 0, 0, 0);
      return [
        new vscode.CodeLens(top, { title: `$(warning) Stale: ${p.stale} — Ask the Agent Again`, command: "agentServer.askAgain", arguments: [p.id] }),
        new vscode.CodeLens(top, { title: "$(close) Reject", command: "agentServer.rejectProposal", arguments: [document.uri] }),
      ];
    }
    const lenses: vscode.CodeLens[] = [];
    for (const a of proposedAnchors(file)) {
      const line = Math.min(a.line, Math.max(document.lineCount - 1, 0));
      const range = new vscode.Range(line, 0, line, 0);
      const args = [p.id, ref!.fileIndex, a.index];
      lenses.push(new vscode.CodeLens(range, { title: `$(check) Accept change ${a.index + 1}`, command: "agentServer.acceptHunk", arguments: args }));
      lenses.push(new vscode.CodeLens(range, { title: `$(close) Reject change ${a.index + 1}`, command: "agentServer.rejectHunk", arguments: args }));
    }
    return lenses;
  }

  /**
   * A proposal came: the panel is told; its diff opens only while the panel shows its session — one of
   * a session the user switched away from opens nothing over what they work on (its session's row in
   * the panel says it waits; going to that session opens it: `sessionShown`).
   */
  async show(p: Proposal, asked = false): Promise<void> {
    this.onScreen.set(p.id, p);
    this.panel.proposalShown(p);
    if (!asked && !this.panel.isShown(p)) {
      this.deferred.add(p.id);
      return;
    }
    await this.openTabs(p, asked);
  }

  /** The panel shows `sessionId` now: the diffs of its proposals that waited unseen open. */
  sessionShown(sessionId: string | undefined): void {
    for (const id of [...this.deferred]) {
      const p = this.onScreen.get(id);
      if (!p || p.done) {
        this.deferred.delete(id);
        continue;
      }
      if (p.params.sessionId !== sessionId) continue;
      this.deferred.delete(id);
      void this.openTabs(p).then(undefined, () => undefined);
    }
  }

  /** Opens the proposal's diffs: unasked (it arrived), where `place` says — behind the user's editor,
   * then a notification offers Review; `asked` (the panel's Show, Review): in front, focused. */
  private async openTabs(p: Proposal, asked = false): Promise<void> {
    const where = asked ? { preserveFocus: false, background: false } : this.place();
    for (let i = 0; i < p.files.length; i++) {
      const file = p.files[i]!;
      // a file proposed on its bytes on disk: the left side is those bytes, never a document of the
      // file; one holding unusual line terminators: a read-only copy of its text (an editable editor
      // of the document would ask to remove them)
      const left = file.create || file.disk || file.unusual ? proposalUri(p, i, "old") : file.uri;
      await vscode.commands.executeCommand("vscode.diff", left, proposalUri(p, i, "new"), diffTitle(p, i), { preview: false, ...where });
    }
    if (where.background) {
      void vscode.window.showInformationMessage(`Agent: "${p.label}" waits for your review, in a tab behind your editor (your typing stays there).`, "Review").then((choice) => {
        if (choice === "Review" && !p.done) void this.show(p, true);
      });
    }
  }

  /** Shows the proposal's current state: a side whose text changed is reloaded (a proposed side the
   * user has typed into is rewritten in place: VS Code does not reload a document with unsaved changes). */
  refresh(p: Proposal): void {
    const changed: vscode.Uri[] = [];
    p.files.forEach((file, i) => {
      for (const side of ["new", "old"] as const) {
        const uri = proposalUri(p, i, side);
        const want = side === "old" ? file.expected : p.proposed(file);
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
        if (doc && sameText(doc.getText(), want)) continue;
        if (doc?.isDirty) {
          const edit = new vscode.WorkspaceEdit();
          edit.replace(uri, new vscode.Range(0, 0, doc.lineCount, 0), want);
          void vscode.workspace.applyEdit(edit);
          continue;
        }
        changed.push(uri);
      }
    });
    if (changed.length > 0) this.changed(changed);
    this.lensesChanged.fire();
    this.panel.proposalChanged(p);
  }

  async finish(p: Proposal, result: ApplyWorkspaceEditResult): Promise<void> {
    this.deferred.delete(p.id);
    this.panel.proposalFinished(p, result);
    this.lensesChanged.fire();
    const ours = new Set(p.files.map((_, i) => proposalUri(p, i, "new").toString()));
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputTextDiff && ours.has(t.input.modified.toString()));
    // A proposed side the user typed into is saved (into nothing: the proposal is answered) first, so
    // closing its tab asks nothing.
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.isDirty && ours.has(doc.uri.toString())) await doc.save().then(undefined, () => false);
    }
    try {
      if (tabs.length > 0) {
        this.closing.add(p.id);
        await vscode.window.tabGroups.close(tabs, true);
      }
    } finally {
      this.closing.delete(p.id);
      this.onScreen.delete(p.id);
    }
  }

  /**
   * Closes the tabs of proposals this extension host never showed (`leftoverTabs`): at activation
   * (a reload restored them) and whenever one opens (a window restoring its editors late). Only
   * proposal tabs are judged when they open: the permission and Changes diffs are opened by others.
   */
  closeLeftovers(tabs: readonly vscode.Tab[] = vscode.window.tabGroups.all.flatMap((g) => g.tabs), atStart = false): void {
    const known = (u: vscode.Uri) => {
      if (u.scheme !== PROPOSAL_SCHEME) return !atStart;
      const ref = parseProposalUri(u);
      return Boolean(ref && (this.manager.get(ref.id) ?? this.onScreen.get(ref.id)));
    };
    const stale = leftoverTabs(tabs, known);
    if (stale.length > 0) void Promise.resolve(vscode.window.tabGroups.close(stale, true)).then(undefined, () => false);
  }

  private onTabsChanged(closed: readonly vscode.Tab[]): void {
    for (const tab of closed) {
      if (!(tab.input instanceof vscode.TabInputTextDiff)) continue;
      const ref = parseProposalUri(tab.input.modified);
      if (ref && !this.closing.has(ref.id)) this.manager.closed(ref.id);
    }
  }

  /** The proposal of the active diff editor, if any (for the title-bar commands). */
  activeProposalId(arg?: unknown): string | undefined {
    if (arg instanceof vscode.Uri) {
      const ref = parseProposalUri(arg);
      if (ref) return ref.id;
    }
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    if (input instanceof vscode.TabInputTextDiff) return parseProposalUri(input.modified)?.id;
    // no diff in front: the shown session's waiting proposal (never one of a session not shown)
    return this.manager.all().find((p) => !p.done && this.panel.isShown(p))?.id;
  }
}
