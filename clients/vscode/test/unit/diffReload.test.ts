// Finding 7's diff under fast typing: the proposed side is a virtual file VS Code reloads after each
// merged keystroke. A reload that landed an older text (VS Code still loaded the previous one) was
// taken for the user's edit of the proposed text — their next keystrokes were then stale, and Accept
// would have applied the older text. Now a change of a side that had no unsaved changes and leaves it
// clean is a reload: when it is not the side's current text, the side is changed again (event-driven,
// no polling); typing there (dirty, an undo, or back to its loaded text) is the user's.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, files, resetStub, workspace } from "./../stub/vscode";
import type { ApplyWorkspaceEditResult } from "../../src/client";
import { DiffView, proposalUri, sameText } from "../../src/diff";
import { sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager, unusualLineTerminators } from "../../src/proposals";

const PATH = "/ws/a.txt";
const URI = `file://${PATH}`;
const BASE = "one\ntwo\nthree\n";

let view: DiffView;
let manager: ProposalManager;
let shown: Proposal[];
let reloads: string[][];
beforeEach(() => {
  resetStub();
  shown = [];
  reloads = [];
  view = new DiffView({ isShown: () => true, proposalShown: (p: Proposal) => shown.push(p), proposalChanged() {}, proposalFinished(_p: Proposal, _r: ApplyWorkspaceEditResult) {} });
  manager = new ProposalManager(view, () => {});
  view.manager = manager;
  view.onDidChangeFile((e) => reloads.push(e.map((c) => c.uri.toString())));
});

async function propose(): Promise<{ p: Proposal; doc: StubDocument; side: StubDocument }> {
  files.set(PATH, BASE);
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, BASE, 3, false);
  workspace.textDocuments.push(doc);
  void manager.handle({ sessionId: "s", edit: { documentChanges: [{ textDocument: { uri: URI, version: 3 }, edits: [{ range: { start: { line: 2, character: 0 }, end: { line: 2, character: 5 } }, newText: "THREE" }] }] }, baseHashes: { [URI]: sha256(BASE) } }, new AbortController().signal, "utf-16");
  for (let i = 0; i < 50 && shown.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  const p = shown[0]!;
  const side = new StubDocument(proposalUri(p, 0, "new") as never, p.proposed(p.files[0]!), 1, false);
  workspace.textDocuments.push(side);
  return { p, doc, side };
}

const changed = (doc: StubDocument, text: string, dirty: boolean, reason?: number) => {
  doc.text = text;
  doc.version++;
  doc.isDirty = dirty;
  (view as unknown as { onTyped(e: unknown): void }).onTyped({ document: doc, contentChanges: [{}], reason });
};

describe("the proposed side under fast typing (newcomer 4, finding 7)", () => {
  it("a reload that landed an older text is loaded again, never taken for the user's edit", async () => {
    const { p, doc, side } = await propose();
    changed(doc, "zero\n" + BASE, true); // merged: the side is reloaded
    changed(doc, "zero\nzero2\n" + BASE, true); // merged again before VS Code reloaded the side
    const before = reloads.length;
    changed(side, "zero\none\ntwo\nTHREE\n", false); // the first reload lands, with the older text
    expect(p.files[0]!.edited).toBe(false);
    expect(reloads.length).toBe(before + 1); // changed again: VS Code loads the current text
    changed(side, "zero\nzero2\none\ntwo\nTHREE\n", false); // which lands: nothing more
    expect(reloads.length).toBe(before + 1);
    // a text the side's model would not hold as it is: changed again once for it, never in a loop
    changed(doc, "zero\nzero2\nzero3\n" + BASE, true);
    const after = reloads.length;
    changed(side, "something else", false);
    changed(side, "something else", false);
    expect(reloads.length).toBe(after + 1);
    expect(p.stale).toBeUndefined();
  });

  it("typing into the side is the user's edit, also when it brings the side back to its loaded text", async () => {
    const { p, side } = await propose();
    changed(side, "one\ntwo\nTHREE!\n", true);
    expect(p.proposed(p.files[0]!)).toBe("one\ntwo\nTHREE!\n");
    changed(side, "one\ntwo\nTHREE\n", false); // the `!` deleted: clean again
    expect(p.proposed(p.files[0]!)).toBe("one\ntwo\nTHREE\n");
    changed(side, "one\ntwo\nTHREE!\n", false, 2); // redone
    expect(p.proposed(p.files[0]!)).toBe("one\ntwo\nTHREE!\n");
  });

  it("the stamps of a side only grow (the same mtime and size would be 'not modified since')", async () => {
    const { p, doc } = await propose();
    const uri = proposalUri(p, 0, "new");
    const mtimes: number[] = [];
    for (const line of ["a", "b", "c", "d"]) {
      changed(doc, `${line}\n` + BASE, true); // the same size each time, within one millisecond
      mtimes.push(view.stat(uri as never).mtime);
    }
    expect(new Set(mtimes).size).toBe(4);
    expect([...mtimes].sort((x, y) => x - y)).toEqual(mtimes);
  });
});

describe("unusual line terminators", () => {
  it("are U+2028 and U+2029 (VS Code's), not other breaks", () => {
    expect(unusualLineTerminators("a\u2028b")).toBe(true);
    expect(unusualLineTerminators("a\u2029b")).toBe(true);
    expect(unusualLineTerminators("a\u0085b\r\nc\rd\fe")).toBe(false);
  });
  it("a side compares equal to its text but for the line breaks a text model holds as its own", () => {
    expect(sameText("a\nb\nc", "a\r\nb\nc")).toBe(true);
    expect(sameText("a\nb", "a\nB")).toBe(false);
  });
});
