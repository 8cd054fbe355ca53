// The proposal life against in-memory documents: stale on arrival (both cases of the rule), hunks
// accepted one by one, the read-back after applying, save per `save`, close = reject, cancel.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, dirs, files, hooks, resetStub, unreadable, workspace } from "./../stub/vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "../../src/client";
import { applyToText, sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager, type ProposalView, whatLanded } from "../../src/proposals";

class RecordingView implements ProposalView {
  shown: Proposal[] = [];
  finished: ApplyWorkspaceEditResult[] = [];
  async show(p: Proposal) {
    this.shown.push(p);
  }
  refresh() {}
  async finish(_p: Proposal, r: ApplyWorkspaceEditResult) {
    this.finished.push(r);
  }
}

const PATH = "/ws/app.py";
const URI = `file://${PATH}`;
const BASE = "a = 1\nb = 2\nc = 3\n";

function proposal(version: number | null, edits: { line: number; from: number; to: number; text: string }[], save?: "never"): ApplyWorkspaceEditParams {
  return {
    sessionId: "s",
    label: "Edit app.py",
    edit: { documentChanges: [{ textDocument: { uri: URI, version }, edits: edits.map((e) => ({ range: { start: { line: e.line, character: e.from }, end: { line: e.line, character: e.to } }, newText: e.text })) }] },
    baseHashes: { [URI]: sha256(BASE) },
    ...(save ? { save } : {}),
  };
}

const TWO_HUNKS = [
  { line: 0, from: 4, to: 5, text: "10" },
  { line: 2, from: 4, to: 5, text: "30" },
];

let view: RecordingView;
let manager: ProposalManager;
beforeEach(() => {
  resetStub();
  view = new RecordingView();
  manager = new ProposalManager(view, () => {});
});

function openDoc(text: string, version: number, dirty: boolean): StubDocument {
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, text, version, dirty);
  workspace.textDocuments.push(doc);
  return doc;
}

async function shown(): Promise<Proposal> {
  for (let i = 0; i < 50 && view.shown.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  return view.shown[view.shown.length - 1]!;
}

describe("stale on arrival", () => {
  it("is stale when the version and the text both changed: nothing applied", async () => {
    files.set(PATH, BASE);
    openDoc(BASE + "typed\n", 8, true);
    const r = await manager.handle(proposal(7, TWO_HUNKS), new AbortController().signal, "utf-16");
    expect(r.outcome).toBe("stale");
    expect(workspace.applyEditCalls).toBe(0);
    expect(view.shown).toHaveLength(0);
  });

  it("is not stale when only the version moved (a save), nor for a null version with the same text", async () => {
    files.set(PATH, BASE);
    openDoc(BASE, 9, false);
    const pending = manager.handle(proposal(7, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideAll(p.id, false);
    expect((await pending).outcome).toBe("rejected");

    const pending2 = manager.handle(proposal(null, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p2 = view.shown.length === 2 ? view.shown[1]! : (await new Promise((r) => setTimeout(r, 20)), view.shown[1]!);
    await manager.decideAll(p2.id, false);
    expect((await pending2).outcome).toBe("rejected");
  });

  it("compares the hash alone for a null version: a changed file is stale", async () => {
    files.set(PATH, "a = 1\nchanged\n");
    const r = await manager.handle(proposal(null, TWO_HUNKS), new AbortController().signal, "utf-16");
    expect(r.outcome).toBe("stale");
  });
});

describe("deciding", () => {
  it("accepting one hunk of two applies only it, at its anchor, and answers partial with exactly it", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, true);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideHunk(p.id, 0, 1, true); // the second hunk first
    await manager.decideHunk(p.id, 0, 0, false);
    const r = await pending;
    expect(r.outcome).toBe("partial");
    expect(doc.text).toBe("a = 1\nb = 2\nc = 30\n");
    expect(r.applied).toEqual({ documentChanges: [{ textDocument: { uri: URI, version: 3 }, edits: [{ range: { start: { line: 2, character: 4 }, end: { line: 2, character: 5 } }, newText: "30" }] }] });
    expect(r.saved).toBe(false); // it was dirty: never saved behind the user's back
    expect(doc.saves).toBe(0);
    expect(r.versions?.[URI]).toEqual({ version: doc.version, sha256: sha256(doc.text) });
  });

  it("accepting both one at a time shifts the later one and answers applied; a clean document is saved", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, false);
    const pending = manager.handle(proposal(3, [{ line: 0, from: 0, to: 5, text: "a = 1\nx = 0" }, { line: 2, from: 4, to: 5, text: "30" }]), new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideHunk(p.id, 0, 0, true);
    await manager.decideHunk(p.id, 0, 1, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(doc.text).toBe("a = 1\nx = 0\nb = 2\nc = 30\n");
    expect(r.saved).toBe(true);
    expect(files.get(PATH)).toBe(doc.text);
  });

  it("keystrokes during the review make the accept stale: nothing applied", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, true);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    doc.text = BASE + "typed";
    doc.version++;
    await manager.decideAll(p.id, true);
    expect((await pending).outcome).toBe("stale");
    expect(doc.text).toBe(BASE + "typed");
    expect(workspace.applyEditCalls).toBe(0);
  });

  it("a text that differs after applying (a formatter) is answered failed, never applied", async () => {
    files.set(PATH, BASE);
    openDoc(BASE, 3, true);
    hooks.afterApply = (d) => (d.text = d.text.replace("10", "10  "));
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    await manager.decideAll((await shown()).id, true);
    const r = await pending;
    expect(r.outcome).toBe("failed");
    expect(r.message).toMatch(/expected text/);
  });

  it("closing the diff without choosing is a reject, answered at once", async () => {
    files.set(PATH, BASE);
    openDoc(BASE, 3, false);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    manager.closed((await shown()).id);
    expect((await pending).outcome).toBe("rejected");
  });

  it("$/cancel_request while shown answers cancelled with nothing applied", async () => {
    files.set(PATH, BASE);
    openDoc(BASE, 3, false);
    const abort = new AbortController();
    const pending = manager.handle(proposal(3, TWO_HUNKS), abort.signal, "utf-16");
    await shown();
    abort.abort();
    expect((await pending).outcome).toBe("cancelled");
    expect(workspace.applyEditCalls).toBe(0);
  });

  it("save: never leaves even a clean document unsaved", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, false);
    const pending = manager.handle(proposal(3, TWO_HUNKS, "never"), new AbortController().signal, "utf-16");
    await manager.decideAll((await shown()).id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(r.saved).toBe(false);
    expect(doc.saves).toBe(0);
  });

  it("a CreateFile proposal creates the file with its text", async () => {
    const params: ApplyWorkspaceEditParams = {
      sessionId: "s",
      edit: { documentChanges: [{ kind: "create", uri: "file:///ws/new.py", options: { overwrite: false, ignoreIfExists: false } }, { textDocument: { uri: "file:///ws/new.py", version: null }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: "print(1)\n" }] }] },
      baseHashes: { "file:///ws/new.py": sha256("") },
    };
    const pending = manager.handle(params, new AbortController().signal, "utf-16");
    await manager.decideAll((await shown()).id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(files.get("/ws/new.py")).toBe("print(1)\n");
    expect(r.applied?.documentChanges[0]).toMatchObject({ kind: "create", uri: "file:///ws/new.py" });
  });
});

describe("a file gone from disk while its proposal waits (newcomer finding F7)", () => {
  // The agent read and edited gone.txt (x -> y); `rm gone.txt` while the proposal waited; Accept All
  // re-created it with y, no stale warning. Deleted, replaced by a directory or made unreadable, the
  // file is stale: Accept is refused as for a content change (the model reads again), nothing created.
  for (const [how, remove, says] of [
    ["deleted", () => files.delete(PATH), "was deleted on disk since the agent read it"],
    ["replaced by a directory", () => (files.delete(PATH), dirs.add(PATH)), "was replaced by a directory on disk"],
    ["made unreadable", () => unreadable.add(PATH), "can no longer be read on disk"],
  ] as const) {
    it(`accepting a proposal for a file ${how} meanwhile re-created it without a stale warning`, async () => {
      files.set(PATH, BASE);
      const doc = openDoc(BASE, 3, false); // the document VS Code still holds (a tab, or the proposal's own)
      const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
      const p = await shown();
      remove();
      await manager.diskChanged(doc.uri as never); // the file watcher: stale said at once
      expect(p.stale).toContain(says);
      await manager.decideAll(p.id, true);
      const r = await pending;
      expect(r.outcome).toBe("stale");
      expect(r.message).toContain(says);
      expect(workspace.applyEditCalls).toBe(0);
      expect(doc.saves).toBe(0);
      if (how !== "made unreadable") expect(files.has(PATH)).toBe(false);
    });
  }

  it("a file deleted between the agent's read and the proposal's arrival is stale on arrival", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, false);
    files.delete(PATH);
    const r = await manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    expect(r.outcome).toBe("stale");
    expect(r.message).toContain("was deleted on disk since the agent read it");
    expect(view.shown).toHaveLength(0);
    expect(doc.saves).toBe(0);
    expect(files.has(PATH)).toBe(false);
  });

  it("a file back on disk with the text the change was computed on is no longer stale", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, false);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    files.delete(PATH);
    await manager.diskChanged(doc.uri as never);
    expect(p.stale).toBeDefined();
    files.set(PATH, BASE);
    await manager.diskChanged(doc.uri as never);
    expect(p.stale).toBeUndefined();
    await manager.decideAll(p.id, true);
    expect((await pending).outcome).toBe("applied");
  });

  it("a stale file changed on disk (not in the editor) was described as changed in the editor", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, false);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    // VS Code reloads a clean document whose file changed on disk
    files.set(PATH, BASE + "from disk\n");
    doc.text = BASE + "from disk\n";
    doc.version++;
    manager.documentChanged(doc as never);
    expect(p.stale).toBe(`${PATH} changed on disk since the agent read it`);
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("stale");
    expect(r.message).toContain("changed on disk during the review");
    // typed into (unsaved): the editor
    const typed = openDoc(BASE, 3, true);
    typed.text += "typed";
    typed.version++;
    workspace.textDocuments.splice(0, workspace.textDocuments.length, typed);
    const pending2 = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    expect((await pending2).message).toContain("changed in the editor since the agent read it");
  });
});

describe("the user edits the proposed text before accepting", () => {
  const apply = (text: string, r: ApplyWorkspaceEditResult) =>
    applyToText(text, (r.applied!.documentChanges[0] as { edits: { range: never; newText: string }[] }).edits);

  it("accept all applies the user's text, and applied carries exactly it against the text the agent read", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, true);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    expect(p.proposed(p.files[0]!)).toBe("a = 10\nb = 2\nc = 30\n");
    manager.edit(p.id, 0, "a = 10  # mine\nb = 2\nc = 30\nd = 4\n");
    expect(p.files[0]!.hunks.filter((h) => h.state === "pending")).toHaveLength(2); // recomputed: line 1, lines 3-4
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(doc.text).toBe("a = 10  # mine\nb = 2\nc = 30\nd = 4\n");
    expect(apply(BASE, r)).toBe(doc.text);
    expect(r.versions?.[URI]).toEqual({ version: doc.version, sha256: sha256(doc.text) });
  });

  it("hunks are recomputed from the edited text: one accepted, the rest rejected is partial with exactly what landed", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, true);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    manager.edit(p.id, 0, "a = 11\nb = 2\nc = 33\n");
    const [first, second] = p.files[0]!.hunks;
    expect([first!.newText, second!.newText]).toEqual(["a = 11\n", "c = 33\n"]);
    await manager.decideHunk(p.id, 0, second!.index, true);
    await manager.decideHunk(p.id, 0, first!.index, false);
    const r = await pending;
    expect(r.outcome).toBe("partial");
    expect(doc.text).toBe("a = 1\nb = 2\nc = 33\n");
    expect(apply(BASE, r)).toBe(doc.text);
  });

  it("in utf-8 the rebuilt applied edits are in utf-8 columns of the text the agent read", async () => {
    const base = "é = 1\nb = 2\n";
    files.set(PATH, base);
    const doc = openDoc(base, 3, true);
    const params = proposal(3, [{ line: 1, from: 4, to: 5, text: "20" }]);
    params.baseHashes = { [URI]: sha256(base) };
    const pending = manager.handle(params, new AbortController().signal, "utf-8");
    const p = await shown();
    manager.edit(p.id, 0, "é = 1\nb = 20 # ok\n");
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(doc.text).toBe("é = 1\nb = 20 # ok\n");
    const edits = (r.applied!.documentChanges[0] as { edits: { range: { start: { line: number; character: number } } }[] }).edits;
    expect(edits.map((e) => e.range.start)).toEqual([{ line: 1, character: 0 }]);
  });

  it("taking every change out and accepting applies nothing and answers rejected", async () => {
    files.set(PATH, BASE);
    const doc = openDoc(BASE, 3, true);
    const pending = manager.handle(proposal(3, TWO_HUNKS), new AbortController().signal, "utf-16");
    const p = await shown();
    manager.edit(p.id, 0, BASE);
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("rejected");
    expect(r.applied).toBeUndefined();
    expect(doc.text).toBe(BASE);
    expect(workspace.applyEditCalls).toBe(0);
  });
});

describe("whatLanded (an accepted change, then keystrokes)", () => {
  const checked = { version: 4, text: "a = 1\nb = 2\n" };
  const expected = "a = 10\nb = 2\n";
  const ours = [{ rangeOffset: 4, rangeLength: 1, text: "10" }];
  const doc = (version: number, text: string) => ({ version, getText: () => text });

  it("the version one past the checked one: the text alone decides", () => {
    expect(whatLanded(checked, expected, doc(5, expected), [ours])).toBe("exact");
    expect(whatLanded(checked, expected, doc(5, "a = 10  \nb = 2\n"), [ours])).toBe("other");
  });

  it("keystrokes after the change replay onto what we applied: landed, then typed", () => {
    const typed = [{ rangeOffset: 0, rangeLength: 0, text: "zz\n" }];
    expect(whatLanded(checked, expected, doc(6, "zz\n" + expected), [ours, typed])).toBe("then-typed");
  });

  it("a first change that is not ours, or events that do not replay to the text, is other", () => {
    const typed = [{ rangeOffset: 0, rangeLength: 0, text: "zz\n" }];
    expect(whatLanded(checked, expected, doc(6, "zz\n" + expected), [typed, ours])).toBe("other");
    expect(whatLanded(checked, expected, doc(6, "zzz\n" + expected), [ours, typed])).toBe("other");
  });

  it("only keystrokes, which replay to the text: our change never landed (none)", () => {
    const z = (at: number, text: string) => [{ rangeOffset: at, rangeLength: 0, text }];
    expect(whatLanded(checked, expected, doc(7, "zz\n" + checked.text), [z(0, "z"), z(1, "z"), z(2, "\n")])).toBe("none");
    expect(whatLanded(checked, expected, doc(5, "z" + checked.text), [z(0, "z")])).toBe("none");
  });
});

describe("typing on another line while a proposal waited made it stale (newcomer 4, finding 7)", () => {
  const FIVE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n";
  const params = (): ApplyWorkspaceEditParams => ({
    sessionId: "s",
    edit: { documentChanges: [{ textDocument: { uri: URI, version: 3 }, edits: [{ range: { start: { line: 3, character: 4 }, end: { line: 3, character: 5 } }, newText: "40" }] }] },
    baseHashes: { [URI]: sha256(FIVE) },
  });
  const type = (doc: StubDocument, text: string, dirty = true) => {
    doc.text = text;
    doc.version++;
    doc.isDirty = dirty;
    manager.documentChanged(doc as never);
  };

  it("typing on other lines is merged: accepted on top of it, unsaved, the answer says merged", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, false);
    const pending = manager.handle(params(), new AbortController().signal, "utf-16");
    const p = await shown();
    type(doc, "top\n" + FIVE.replace("a = 1", "a = 1  # mine"));
    expect(p.stale).toBeUndefined();
    expect(p.proposed(p.files[0]!)).toBe("top\na = 1  # mine\nb = 2\nc = 3\nd = 40\ne = 5\n");
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(doc.text).toBe("top\na = 1  # mine\nb = 2\nc = 3\nd = 40\ne = 5\n");
    expect(r._meta).toEqual({ agentServer: { merged: [URI] } });
    // the agent's hunk as sent, against the text it read
    expect(r.applied?.documentChanges).toEqual([{ textDocument: { uri: URI, version: 3 }, edits: [{ range: { start: { line: 3, character: 4 }, end: { line: 3, character: 5 } }, newText: "40" }] }]);
    expect(doc.saves).toBe(0); // the user's typing is not saved for them
    expect(r.versions?.[URI]).toEqual({ version: doc.version, sha256: sha256(doc.text) });
  });

  it("typing on the hunk's line stays stale, and Accept applies nothing", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, false);
    const pending = manager.handle(params(), new AbortController().signal, "utf-16");
    const p = await shown();
    type(doc, FIVE.replace("d = 4", "d = 4 X"));
    expect(p.stale).toMatch(/changed in the editor/);
    await manager.decideAll(p.id, true);
    expect((await pending).outcome).toBe("stale");
    expect(workspace.applyEditCalls).toBe(0);
  });

  it("a save participant's change after Accept (format on save) is the editor's, never merged", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, false);
    hooks.beforeSave = (d) => type(d, d.text.replace("a = 1", "a = 1 "), true); // another line, while the answer is built
    const pending = manager.handle(params(), new AbortController().signal, "utf-16");
    await manager.decideAll((await shown()).id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    // never merged; the hash of the text before the save is the applied text's: the save's change is its own
    expect(r._meta).toEqual({ agentServer: { beforeSave: { [URI]: sha256(FIVE.replace("d = 4", "d = 40")) } } });
    expect(doc.saves).toBe(1);
    // the hash of what was saved, not of what was applied: the server reads it back and tells the model
    expect(r.versions?.[URI]?.sha256).toBe(sha256(FIVE.replace("a = 1", "a = 1 ").replace("d = 4", "d = 40")));
  });

  it("the proposed text edited after a merge: the user's text lands, applied says it against the text the agent read", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, false);
    const pending = manager.handle(params(), new AbortController().signal, "utf-16");
    const p = await shown();
    type(doc, FIVE.replace("a = 1", "a = 1  # mine"));
    manager.edit(p.id, 0, FIVE.replace("a = 1", "a = 1  # mine").replace("d = 4", "d = 44"));
    expect(p.stale).toBeUndefined();
    await manager.decideAll(p.id, true);
    const r = await pending;
    const final = FIVE.replace("a = 1", "a = 1  # mine").replace("d = 4", "d = 44");
    expect(r.outcome).toBe("applied");
    expect(doc.text).toBe(final);
    expect(applyToText(FIVE, (r.applied!.documentChanges[0] as { edits: never[] }).edits)).toBe(final);
    expect(r._meta).toEqual({ agentServer: { merged: [URI] } });
  });

  it("typing merged and then saved by the user before Accept: the result is saved, as for a document without unsaved text", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, false);
    const pending = manager.handle(params(), new AbortController().signal, "utf-16");
    const p = await shown();
    type(doc, FIVE.replace("a = 1", "a = 1  # mine"));
    await doc.save(); // Ctrl+S: the user's typing on disk
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.saved).toBe(true);
    expect(files.get(PATH)).toBe(FIVE.replace("a = 1", "a = 1  # mine").replace("d = 4", "d = 40"));
    expect(r._meta).toEqual({ agentServer: { merged: [URI] } });
  });

  it("one hunk accepted, then typing on other lines, then the other hunk: both land, merged", async () => {
    files.set(PATH, FIVE);
    const doc = openDoc(FIVE, 3, true);
    const two: ApplyWorkspaceEditParams = { ...params(), edit: { documentChanges: [{ textDocument: { uri: URI, version: 3 }, edits: [
      { range: { start: { line: 0, character: 4 }, end: { line: 0, character: 5 } }, newText: "10" },
      { range: { start: { line: 4, character: 4 }, end: { line: 4, character: 5 } }, newText: "50" },
    ] }] } };
    const pending = manager.handle(two, new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideHunk(p.id, 0, 0, true);
    type(doc, doc.text.replace("c = 3\n", "c = 3\nmine\n"));
    expect(p.stale).toBeUndefined();
    await manager.decideHunk(p.id, 0, 1, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(doc.text).toBe("a = 10\nb = 2\nc = 3\nmine\nd = 4\ne = 50\n");
    expect(r._meta).toEqual({ agentServer: { merged: [URI] } });
  });
});
