// The `accept-edits` write (docs/protocol.md "Edits in accept-edits"): `fs/write_text_file` with
// `_meta.agentServer {version, sha256}` of the document the agent read is refused as stale when the
// user typed since (version and text moved on), and applied when only the version moved (a save).
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, dirs, hooks, rawFiles, resetStub, workspace } from "./../stub/vscode";
import { readTextFile, writeTextFile } from "../../src/buffers";
import { sha256 } from "../../src/proposalModel";

const PATH = "/ws/guard.txt";

function open(text: string, version: number): StubDocument {
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, text, version, true);
  workspace.textDocuments.push(doc);
  return doc;
}

beforeEach(() => {
  resetStub();
  rawFiles.set(PATH, new TextEncoder().encode("one\n"));
});

describe("fs/write_text_file guarded by the document the agent read", () => {
  it("a keystroke since the read: refused as stale, the user's text kept", async () => {
    const doc = open("one, typed\n", 5);
    const meta = { agentServer: { version: 4, sha256: sha256("one\n") } };
    const err = await writeTextFile({ sessionId: "s", path: PATH, content: "ONE\n", _meta: meta }).then(
      () => undefined, (e: { code: number; data: unknown }) => e);
    expect(err?.code).toBe(-32603);
    expect(err?.data).toEqual({ agentServer: { stale: true } });
    expect(doc.text).toBe("one, typed\n");
  });

  it("the same text under another version, or the read's version: written", async () => {
    const doc = open("one\n", 6);
    await writeTextFile({ sessionId: "s", path: PATH, content: "ONE\n", _meta: { agentServer: { version: 4, sha256: sha256("one\n") } } });
    expect(doc.text).toBe("ONE\n");
    const version = doc.version;
    await writeTextFile({ sessionId: "s", path: PATH, content: "TWO\n", _meta: { agentServer: { version, sha256: "other" } } });
    expect(doc.text).toBe("TWO\n");
  });

  it("a file no editor holds keeps its BOM: writeTextFile dropped it", async () => {
    const path = "/ws/bom.txt";
    rawFiles.set(path, new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode("old\r\n")]));
    await writeTextFile({ sessionId: "s", path, content: "new\r\n" });
    expect(Array.from(rawFiles.get(path) ?? [])).toEqual([0xef, 0xbb, 0xbf, ...new TextEncoder().encode("new\r\n")]);
    rawFiles.set(path, new TextEncoder().encode("plain\n"));
    await writeTextFile({ sessionId: "s", path, content: "new\n" });  // nor is one added
    expect(Array.from(rawFiles.get(path) ?? [])).toEqual(Array.from(new TextEncoder().encode("new\n")));
  });

  it("a file deleted on disk while VS Code still held it clean was created again by the agent's write (F7, the server's guarded path)", async () => {
    // the server re-reads before its guarded write: a clean document whose file is gone reads as gone
    const doc = open("one\n", 4);
    doc.isDirty = false;
    rawFiles.delete(PATH);
    const read = await readTextFile({ sessionId: "s", path: PATH }).then(() => undefined, (e: { code: number }) => e);
    expect(read?.code).toBe(-32002);
    const err = await writeTextFile({ sessionId: "s", path: PATH, content: "ONE\n", _meta: { agentServer: { version: 4, sha256: sha256("one\n") } } }).then(
      () => undefined, (e: { code: number; data: unknown; message: string }) => e);
    expect(err?.data).toEqual({ agentServer: { stale: true } });
    expect(err?.message).toContain("was deleted on disk since the agent read it");
    expect(rawFiles.has(PATH)).toBe(false);
    expect(doc.saves).toBe(0);
    dirs.add(PATH); // replaced by a directory
    const err2 = await writeTextFile({ sessionId: "s", path: PATH, content: "ONE\n", _meta: { agentServer: { version: 4, sha256: sha256("one\n") } } }).then(
      () => undefined, (e: { message: string }) => e);
    expect(err2?.message).toContain("replaced by a directory");
    expect(doc.text).toBe("one\n");
  });
});

// Newcomer 6 finding 2's class: /undo's "Take the checkpoint" writes the checkpoint into the open clean
// buffer, whose save ran format-on-save; the server read back other text and said "not restored as it
// was" for ever. The answer names the hash of the text before the save: exactly what was written.
describe("fs/write_text_file into a clean buffer whose save changed it", () => {
  it("answers the text's hash before the save (beforeSave); a save that changed nothing, nothing", async () => {
    const doc = new StubDocument(vscode.Uri.file(PATH) as never, "one\n", 4, false);
    workspace.textDocuments.push(doc);
    hooks.beforeSave = (d) => { d.text = d.text.replace("ONE", "ONE "); };
    const r = await writeTextFile({ sessionId: "s", path: PATH, content: "ONE\n" });
    expect(r).toEqual({ _meta: { agentServer: { beforeSave: sha256("ONE\n") } } });
    expect(doc.text).toBe("ONE \n");
    hooks.beforeSave = undefined;
    expect(await writeTextFile({ sessionId: "s", path: PATH, content: "TWO\n" })).toEqual({});
  });
});
