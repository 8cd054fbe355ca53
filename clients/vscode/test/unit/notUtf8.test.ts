// Documents that are not UTF-8 (docs/protocol.md "Files that are not UTF-8"): `fs/read_text_file`
// answered U+FFFD text for a latin1 file, and an accepted proposal saved the whole document as UTF-8,
// turning every byte VS Code could not decode into EF BF BD. Now: a JSON-RPC error for the read, and
// `failed` for the proposal, with the bytes on disk intact.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, rawFiles, resetStub, workspace } from "./../stub/vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "../../src/client";
import { firstInvalidUtf8, readTextFile, writeTextFile } from "../../src/buffers";
import { sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager, type ProposalView } from "../../src/proposals";

const PATH = "/ws/latin1.txt";
const URI = `file://${PATH}`;
const LATIN1 = new Uint8Array([...Buffer.from("caf"), 0xe9, ...Buffer.from(" na"), 0xef, ...Buffer.from("ve\nsecond line\n")]);
const LOSSY = new TextDecoder().decode(LATIN1); // what VS Code shows: "caf\ufffd na\ufffdve\n…"

class View implements ProposalView {
  shown: Proposal[] = [];
  async show(p: Proposal) {
    this.shown.push(p);
  }
  refresh() {}
  async finish() {}
}

function openLossy(encoding = "utf8"): StubDocument {
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, LOSSY, 3, false);
  doc.encoding = encoding;
  workspace.textDocuments.push(doc);
  return doc;
}

async function refusal(run: () => Promise<unknown>): Promise<{ code: number; message: string; data: { agentServer: unknown } }> {
  try {
    await run();
  } catch (err) {
    return err as never;
  }
  throw new Error("answered with text");
}

beforeEach(() => {
  resetStub();
  rawFiles.set(PATH, LATIN1);
});

describe("fs/read_text_file of a file that is not UTF-8 answers an error, never U+FFFD text", () => {
  it("closed: the disk bytes are decoded with a fatal decoder", async () => {
    const err = await refusal(() => readTextFile({ sessionId: "s", path: PATH }));
    expect(err.code).toBe(-32603);
    expect(err.message).toBe(`${PATH} is not UTF-8 text (its bytes on disk are not UTF-8 (the first invalid byte is at offset 3))`);
    expect(err.data.agentServer).toEqual({ notUtf8: true, encoding: null });
  });

  it("open, clean or dirty: the document's U+FFFD are not the file's bytes", async () => {
    const doc = openLossy();
    expect((await refusal(() => readTextFile({ sessionId: "s", path: PATH }))).data.agentServer).toEqual({ notUtf8: true, encoding: "utf8" });
    doc.isDirty = true;
    expect((await refusal(() => readTextFile({ sessionId: "s", path: PATH }))).code).toBe(-32603);
  });

  it("open in another encoding: VS Code's encoding says so, whatever the disk holds", async () => {
    rawFiles.clear();
    const doc = openLossy("windows1252");
    doc.text = "café\n";
    const err = await refusal(() => readTextFile({ sessionId: "s", path: PATH }));
    expect(err.message).toContain("VS Code holds it as windows1252");
    expect(err.data.agentServer).toEqual({ notUtf8: true, encoding: "windows1252" });
  });

  it("fs/write_text_file to the open document is refused too", async () => {
    const doc = openLossy();
    await refusal(() => writeTextFile({ sessionId: "s", path: PATH, content: "x\n" }));
    expect(doc.text).toBe(LOSSY);
    expect(rawFiles.get(PATH)).toEqual(LATIN1);
  });

  it("finds the first invalid byte (strict: overlong, surrogate, cut sequences)", () => {
    expect(firstInvalidUtf8(new TextEncoder().encode("a😀é"))).toBe(-1);
    expect(firstInvalidUtf8(LATIN1)).toBe(3);
    expect(firstInvalidUtf8(new Uint8Array([0x61, 0xc0, 0x80]))).toBe(1);
    expect(firstInvalidUtf8(new Uint8Array([0xed, 0xa0, 0x80]))).toBe(0);
    expect(firstInvalidUtf8(new Uint8Array([0x61, 0xe2, 0x82]))).toBe(1);
  });
});

describe("an accepted edit never rewrites the bytes of a file that is not UTF-8", () => {
  const params = (version: number | null): ApplyWorkspaceEditParams => ({
    sessionId: "s",
    label: "Edit latin1.txt",
    edit: { documentChanges: [{ textDocument: { uri: URI, version }, edits: [{ range: { start: { line: 1, character: 0 }, end: { line: 1, character: 11 } }, newText: "SECOND LINE" }] }] },
    baseHashes: { [URI]: sha256(LOSSY) },
  });

  for (const [what, open] of [["open", true], ["closed", false]] as const) {
    it(`${what}: answered failed, nothing applied or saved, the bytes intact`, async () => {
      const doc = open ? openLossy() : undefined;
      const view = new View();
      const manager = new ProposalManager(view, () => {});
      const result: ApplyWorkspaceEditResult = await manager.handle(params(open ? 3 : null), new AbortController().signal, "utf-16");
      expect(result.outcome).toBe("failed");
      expect(result.message).toContain("is not UTF-8 text");
      expect(view.shown).toEqual([]);
      expect(workspace.applyEditCalls).toBe(0);
      expect(doc?.saves ?? 0).toBe(0);
      expect(rawFiles.get(PATH)).toEqual(LATIN1);
    });
  }
});
