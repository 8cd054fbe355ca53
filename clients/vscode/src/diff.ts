/**
 * The diff view of proposals: `vscode.diff` between the document and a virtual document
 * (`agent-proposal:` scheme) holding the proposed text, CodeLens per hunk (Accept / Reject), Accept
 * All / Reject All in the editor title, and "closing the diff without choosing is a reject".
 *
 * Must not: apply text itself (the `ProposalManager` does).
 */

import * as vscode from "vscode";
import type { ApplyWorkspaceEditResult } from "./client";
import type { FileChange, Proposal, ProposalManager, ProposalView } from "./proposals";
import { comparePositions, shiftPosition } from "./proposalModel";

export const PROPOSAL_SCHEME = "agent-proposal";

/** `agent-proposal:/<id>/<fileIndex>/<side>/<name>` */
export function proposalUri(p: Proposal, fileIndex: number, side: "old" | "new"): vscode.Uri {
  const name = p.files[fileIndex]!.uri.path.split("/").pop() ?? "file";
  return vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: `/${p.id}/${fileIndex}/${side}/${name}` });
}

export function parseProposalUri(uri: vscode.Uri): { id: string; fileIndex: number; side: string } | undefined {
  if (uri.scheme !== PROPOSAL_SCHEME) return undefined;
  const [, id, index, side] = uri.path.split("/");
  if (!id || index === undefined || !side) return undefined;
  return { id, fileIndex: Number(index), side };
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

/** Listener for the panel: a proposal was shown, changed, or answered. */
export interface ProposalPanel {
  proposalShown(p: Proposal): void;
  proposalChanged(p: Proposal): void;
  proposalFinished(p: Proposal, result: ApplyWorkspaceEditResult): void;
}

export class DiffView implements ProposalView, vscode.TextDocumentContentProvider, vscode.CodeLensProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  readonly onDidChangeCodeLenses = this.lensesChanged.event;
  manager!: ProposalManager;
  private readonly closing = new Set<string>();

  constructor(private readonly panel: ProposalPanel) {}

  register(): vscode.Disposable {
    return vscode.Disposable.from(
      vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, this),
      vscode.languages.registerCodeLensProvider({ scheme: PROPOSAL_SCHEME }, this),
      vscode.window.tabGroups.onDidChangeTabs((e) => this.onTabsChanged(e.closed)),
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const ref = parseProposalUri(uri);
    const p = ref && this.manager.get(ref.id);
    const file = p?.files[ref!.fileIndex];
    if (!p || !file) return "";
    return ref!.side === "old" ? file.expected : p.proposed(file);
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const ref = parseProposalUri(document.uri);
    const p = ref && this.manager.get(ref.id);
    const file = p?.files[ref!.fileIndex];
    if (!p || !file || ref!.side !== "new" || p.done) return [];
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

  async show(p: Proposal): Promise<void> {
    this.panel.proposalShown(p);
    for (let i = 0; i < p.files.length; i++) {
      const file = p.files[i]!;
      const left = file.create ? proposalUri(p, i, "old") : file.uri;
      await vscode.commands.executeCommand("vscode.diff", left, proposalUri(p, i, "new"), `${p.label} (proposal)`, { preview: false, preserveFocus: false });
    }
  }

  refresh(p: Proposal): void {
    p.files.forEach((_, i) => {
      this.changed.fire(proposalUri(p, i, "new"));
      this.changed.fire(proposalUri(p, i, "old"));
    });
    this.lensesChanged.fire();
    this.panel.proposalChanged(p);
  }

  async finish(p: Proposal, result: ApplyWorkspaceEditResult): Promise<void> {
    this.panel.proposalFinished(p, result);
    this.lensesChanged.fire();
    const ours = new Set(p.files.map((_, i) => proposalUri(p, i, "new").toString()));
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputTextDiff && ours.has(t.input.modified.toString()));
    if (tabs.length > 0) {
      this.closing.add(p.id);
      try {
        await vscode.window.tabGroups.close(tabs, true);
      } finally {
        this.closing.delete(p.id);
      }
    }
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
    return this.manager.all().find((p) => !p.done)?.id;
  }
}
