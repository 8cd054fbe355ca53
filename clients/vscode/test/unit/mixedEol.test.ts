// Newcomer 4, finding 6: a file whose line breaks VS Code's text model rewrites (a mix of CRLF and LF,
// lone CRs) is proposed on and written as its bytes on disk (a real temporary file here: the check and
// the write are synchronous node fs), never through a document; stale when the disk or an editor moved.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, files, resetStub, workspace } from "./../stub/vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "../../src/client";
import { modelChangesLineBreaks, sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager, type ProposalView } from "../../src/proposals";

class RecordingView implements ProposalView {
  shown: Proposal[] = [];
  async show(p: Proposal) {
    this.shown.push(p);
  }
  refresh() {}
  async finish() {}
}

const MIXED = "a\r\nb\nc\r\nd\n";
let dir: string;
let path: string;
let view: RecordingView;
let manager: ProposalManager;

beforeEach(() => {
  resetStub();
  dir = mkdtempSync(join(tmpdir(), "mixed-eol-"));
  path = join(dir, "mixed.txt");
  view = new RecordingView();
  manager = new ProposalManager(view, () => {});
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** `raw` on disk (and in the stub's disk, which `workspace.fs` reads). */
function onDisk(raw: Buffer): void {
  writeFileSync(path, raw);
  files.set(path, raw.toString("utf8").replace(/^\ufeff/, ""));
}

function shoutB(text: string, save?: "never"): ApplyWorkspaceEditParams {
  const uri = vscode.Uri.file(path).toString();
  return {
    sessionId: "s",
    label: "Edit mixed.txt",
    edit: { documentChanges: [{ textDocument: { uri, version: null }, edits: [{ range: { start: { line: 1, character: 0 }, end: { line: 1, character: 1 } }, newText: "B" }] }] },
    baseHashes: { [uri]: sha256(text) },
    ...(save ? { save } : {}),
  };
}

async function shown(): Promise<Proposal> {
  for (let i = 0; i < 100 && view.shown.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  return view.shown[view.shown.length - 1]!;
}

describe("line breaks VS Code's model rewrites", () => {
  it("are told from those it keeps", () => {
    expect(modelChangesLineBreaks("a\r\nb\nc\r\n")).toBe(true);
    expect(modelChangesLineBreaks("x1\ry2\r")).toBe(true);
    expect(modelChangesLineBreaks("a\r\nb\r\n")).toBe(false);
    expect(modelChangesLineBreaks("a\nb\n")).toBe(false);
    expect(modelChangesLineBreaks("\na\r\n")).toBe(true);
    expect(modelChangesLineBreaks("no break")).toBe(false);
  });
});

describe("a mixed-line-ending file not open in an editor", () => {
  it("was stale on arrival ('changed on disk since the agent read it'); now it is applied to its bytes on disk, BOM kept, no document opened", async () => {
    onDisk(Buffer.from("\ufeff" + MIXED, "utf8"));
    const pending = manager.handle(shoutB(MIXED), new AbortController().signal, "utf-16");
    const p = await shown();
    expect(p.files[0]!.disk).toEqual({ bom: true });
    await manager.decideAll(p.id, true);
    const r: ApplyWorkspaceEditResult = await pending;
    expect(r.outcome).toBe("applied");
    expect(readFileSync(path)).toEqual(Buffer.from("\ufeffa\r\nB\nc\r\nd\n", "utf8"));
    expect(workspace.textDocuments).toHaveLength(0);
    expect(workspace.applyEditCalls).toBe(0);
    expect(r.versions?.[vscode.Uri.file(path).toString()]).toEqual({ version: null, sha256: sha256("a\r\nB\nc\r\nd\n") });
  });

  it("one hunk of two accepted (its CodeLens), the other rejected: partial, only that hunk's bytes change", async () => {
    onDisk(Buffer.from("x1\ry2\rz3\r"));
    const uri = vscode.Uri.file(path).toString();
    const pending = manager.handle({
      sessionId: "s", label: "Edit mixed.txt",
      edit: { documentChanges: [{ textDocument: { uri, version: null }, edits: [
        { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 2 } }, newText: "X1" },
        { range: { start: { line: 2, character: 0 }, end: { line: 2, character: 2 } }, newText: "Z3\r\nextra" },
      ] }] },
      baseHashes: { [uri]: sha256("x1\ry2\rz3\r") },
    }, new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideHunk(p.id, 0, 1, true);
    expect(readFileSync(path, "utf8")).toBe("x1\ry2\rZ3\r\nextra\r");
    await manager.decideHunk(p.id, 0, 0, false);
    const r = await pending;
    expect(r.outcome).toBe("partial");
    expect(readFileSync(path, "utf8")).toBe("x1\ry2\rZ3\r\nextra\r");
    expect(workspace.applyEditCalls).toBe(0);
  });

  it("changed on disk during the review: marked stale, accepting writes nothing", async () => {
    onDisk(Buffer.from(MIXED));
    const pending = manager.handle(shoutB(MIXED), new AbortController().signal, "utf-16");
    const p = await shown();
    writeFileSync(path, "a\r\nb\nc\r\nd\ne\n");
    await manager.diskChanged(vscode.Uri.file(path), true);
    expect(p.stale).toMatch(/changed on disk since the agent read it/);
    await manager.decideAll(p.id, true);
    expect((await pending).outcome).toBe("stale");
    expect(readFileSync(path, "utf8")).toBe("a\r\nb\nc\r\nd\ne\n");
  });

  it("typed into in an editor opened during the review: stale 'in the editor', the disk untouched", async () => {
    onDisk(Buffer.from(MIXED));
    const pending = manager.handle(shoutB(MIXED), new AbortController().signal, "utf-16");
    const p = await shown();
    const doc = new StubDocument(vscode.Uri.file(path) as never, "a\nb\nc\nd\nmine\n", 2, true);
    workspace.textDocuments.push(doc);
    manager.documentChanged(doc as never);
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("stale");
    expect(r.message).toMatch(/changed in the editor/);
    expect(readFileSync(path, "utf8")).toBe(MIXED);
  });

  it("with save 'never' (no buffer to change without rewriting its line breaks): failed, said why, nothing written", async () => {
    onDisk(Buffer.from(MIXED));
    const r = await manager.handle(shoutB(MIXED, "never"), new AbortController().signal, "utf-16");
    expect(r.outcome).toBe("failed");
    expect(r.message).toMatch(/line breaks/);
    expect(readFileSync(path, "utf8")).toBe(MIXED);
  });
});

describe("a proposed text with line breaks the editor's model would rewrite", () => {
  const create = (uri: string, text: string): ApplyWorkspaceEditParams => ({
    sessionId: "s",
    label: "Create new.txt",
    edit: { documentChanges: [{ kind: "create", uri, options: { overwrite: false, ignoreIfExists: false } }, { textDocument: { uri, version: null }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: text }] }] } as never,
    baseHashes: { [uri]: sha256("") },
  });

  it("a file created with CRLF lines (VS Code's new document is LF) is created with exactly those bytes", async () => {
    const file = join(dir, "sub", "new.txt");
    const pending = manager.handle(create(vscode.Uri.file(file).toString(), "x\r\ny\r\n"), new AbortController().signal, "utf-16");
    const p = await shown();
    expect(p.files[0]!.disk).toEqual({ bom: false });
    await manager.decideAll(p.id, true);
    const r = await pending;
    expect(r.outcome).toBe("applied");
    expect(readFileSync(file, "utf8")).toBe("x\r\ny\r\n");
    expect(workspace.applyEditCalls).toBe(0);
  });

  it("an LF file not open rewritten with CRLF lines is written with exactly those bytes", async () => {
    onDisk(Buffer.from("a\nb\n"));
    const uri = vscode.Uri.file(path).toString();
    const pending = manager.handle({
      sessionId: "s", label: "Edit mixed.txt",
      edit: { documentChanges: [{ textDocument: { uri, version: null }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } }, newText: "a\r\nB\r\n" }] }] },
      baseHashes: { [uri]: sha256("a\nb\n") },
    }, new AbortController().signal, "utf-16");
    const p = await shown();
    await manager.decideAll(p.id, true);
    expect((await pending).outcome).toBe("applied");
    expect(readFileSync(path, "utf8")).toBe("a\r\nB\r\n");
  });

  it("an editor with unsaved text of the file: failed up front, said why, nothing applied", async () => {
    onDisk(Buffer.from("a\nb\n"));
    const doc = new StubDocument(vscode.Uri.file(path) as never, "a\nb\nmine\n", 2, true);
    workspace.textDocuments.push(doc);
    const uri = vscode.Uri.file(path).toString();
    const r = await manager.handle({
      sessionId: "s", label: "Edit mixed.txt",
      edit: { documentChanges: [{ textDocument: { uri, version: 2 }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } }, newText: "A\r\n" }] }] },
      baseHashes: { [uri]: sha256("a\nb\nmine\n") },
    }, new AbortController().signal, "utf-16");
    expect(r.outcome).toBe("failed");
    expect(r.message).toMatch(/line breaks .* unsaved text/);
    expect(doc.getText()).toBe("a\nb\nmine\n");
    expect(workspace.applyEditCalls).toBe(0);
  });
});
