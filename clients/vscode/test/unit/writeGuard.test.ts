// The `accept-edits` write (docs/protocol.md "Edits in accept-edits"): `fs/write_text_file` with
// `_meta.agentServer {version, sha256}` of the document the agent read is refused as stale when the
// user typed since (version and text moved on), and applied when only the version moved (a save).
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, rawFiles, resetStub, workspace } from "./../stub/vscode";
import { writeTextFile } from "../../src/buffers";
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
});
