// Newcomer 5, finding 0: with format-on-save (a save participant) the card said "Applied" for what
// the save changed beyond the proposal, and for a save that never completed. Against the stub's
// documents: the answer and the card say what the disk holds.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, files, resetStub, workspace } from "./../stub/vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "../../src/client";
import type { ChatEvent } from "../../src/protocol";
import { sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager, type ProposalView } from "../../src/proposals";
import { fold, initialState, outcomeWord } from "../../webview/state";

class RecordingView implements ProposalView {
  shown: Proposal[] = [];
  async show(p: Proposal) {
    this.shown.push(p);
  }
  refresh() {}
  async finish(_p: Proposal, _r: ApplyWorkspaceEditResult) {}
}

const PATH = "/ws/cfg.json";
const URI = `file://${PATH}`;
const BASE = '{"a":1,"b":2,"c":[1,2,3]}';
const FORMATTED = '{\n    "a": 1,\n    "b": 3,\n    "c": [\n        1,\n        2,\n        3\n    ]\n}\n';

const params: ApplyWorkspaceEditParams = {
  sessionId: "s",
  label: "Edit cfg.json",
  edit: { documentChanges: [{ textDocument: { uri: URI, version: 1 }, edits: [{ range: { start: { line: 0, character: 13 }, end: { line: 0, character: 14 } }, newText: "3" }] }] },
  baseHashes: { [URI]: sha256(BASE) },
};

let view: RecordingView;
let manager: ProposalManager;
beforeEach(() => {
  resetStub();
  view = new RecordingView();
  manager = new ProposalManager(view, () => {});
});

async function accept(save: (doc: StubDocument) => Promise<boolean>): Promise<ApplyWorkspaceEditResult> {
  files.set(PATH, BASE);
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, BASE, 1, false);
  doc.save = () => save(doc);
  workspace.textDocuments.push(doc);
  const pending = manager.handle(params, new AbortController().signal, "utf-16");
  for (let i = 0; i < 50 && view.shown.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  await manager.decideHunk(view.shown[0]!.id, 0, 0, true);
  return pending;
}

function card(done: Extract<ChatEvent, { kind: "proposal-done" }>): string {
  const s = initialState();
  fold(s, { kind: "proposal", id: "p", label: "Edit cfg.json", files: ["cfg.json"], ops: [], hunks: [] } as ChatEvent);
  fold(s, done);
  const item = s.items.find((i) => i.type === "proposal") as { outcome: string; saved?: boolean; message?: string };
  return `${outcomeWord(item.outcome, item.saved)}${item.message ? `: ${item.message}` : ""}`;
}

describe("the card says what the save did", () => {
  it("a one-line proposal pretty-printed by format-on-save said Applied +1 -1", async () => {
    const r = await accept(async (doc) => {
      doc.text = FORMATTED; // the JSON formatter and insertFinalNewline, at save
      doc.version++;
      doc.isDirty = false;
      files.set(PATH, doc.text);
      return true;
    });
    expect(r.outcome).toBe("applied");
    expect(r.saved).toBe(true);
    expect(r.versions?.[URI]?.sha256).toBe(sha256(FORMATTED));
    expect(r.message).toMatch(/the editor's save \(format-on-save or another save participant\) changed 9 more lines than the proposal \(\+9 −1\)/);
    expect(card({ kind: "proposal-done", id: "p", outcome: r.outcome, message: r.message })).toMatch(/^Applied: the editor's save .* changed 9 more lines/);
  });

  it("the_format_on_save_difference_could_not_be_seen: the proposal keeps the text as accepted and the card offers to show it", async () => {
    const r = await accept(async (doc) => {
      doc.text = FORMATTED;
      doc.version++;
      doc.isDirty = false;
      files.set(PATH, doc.text);
      return true;
    });
    const p = view.shown[0]!;
    expect(p.savedOther.map((f) => [f.uri.fsPath, f.accepted])).toEqual([[PATH, p.files[0]!.expected]]);
    expect(p.files[0]!.expected).not.toBe(FORMATTED); // the one line as accepted, not the saved text
    const s = initialState();
    fold(s, { kind: "proposal", id: "p", label: "Edit cfg.json", files: ["cfg.json"], ops: [], hunks: [] } as ChatEvent);
    fold(s, { kind: "proposal-done", id: "p", outcome: r.outcome, message: r.message, saveChanged: true });
    expect((s.items.find((i) => i.type === "proposal") as { saveChanged?: boolean }).saveChanged).toBe(true);
  });

  it("an accepted edit whose save never completed said Applied", async () => {
    const r = await accept(async (doc) => {
      doc.isDirty = true; // stuck behind the formatter: nothing written
      return false;
    });
    expect(files.get(PATH)).toBe(BASE);
    expect(r.outcome).toBe("applied");
    expect(r.saved).toBe(false);
    expect(r._meta?.agentServer?.saveFailed).toEqual([URI]); // the server tells the model the save failed, not "the user's unsaved changes"
    expect(r.message).toMatch(/the editor's save did not complete/);
    const shown = card({ kind: "proposal-done", id: "p", outcome: r.outcome, message: r.message, saved: r.saved });
    expect(shown).toMatch(/^Applied in the editor, not saved: the editor's save did not complete/);
  });

  it("a save that changes nothing adds nothing to the card", async () => {
    const r = await accept(async (doc) => {
      doc.isDirty = false;
      files.set(PATH, doc.text);
      return true;
    });
    expect(view.shown[0]!.savedOther).toEqual([]);
    expect(r.saved).toBe(true);
    expect(r.message).toBeUndefined();
    expect(r._meta).toBeUndefined();
  });
});
