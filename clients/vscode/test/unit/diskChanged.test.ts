// Issue 30, item 8: a dirty buffer whose file changed on disk was read by the agent as if the disk
// held the same text. Now the read answers the buffer's text with `_meta.agentServer.diskChanged`
// (docs/protocol.md "Buffer versions"), and only then.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, files, mtimes, resetStub, workspace } from "./../stub/vscode";
import { readTextFile, trackDiskChanges } from "../../src/buffers";

const PATH = "/ws/app.py";

beforeEach(() => {
  resetStub();
  files.set(PATH, "saved\n");
  mtimes.set(PATH, 1000);
});

async function opened(): Promise<StubDocument> {
  const doc = new StubDocument(vscode.Uri.file(PATH) as never, "saved\n", 1, false);
  workspace.textDocuments.push(doc);
  trackDiskChanges(); // notes the disk's mtime of the documents open now
  await new Promise((r) => setTimeout(r, 0));
  doc.text = "saved\nunsaved\n";
  doc.version = 2;
  doc.isDirty = true;
  return doc;
}

describe("fs/read_text_file of a dirty buffer", () => {
  it("says diskChanged when the file changed on disk since the editor loaded it", async () => {
    await opened();
    files.set(PATH, "someone else's\n");
    mtimes.set(PATH, 2000);
    const got = await readTextFile({ sessionId: "s", path: PATH });
    expect(got.content).toBe("saved\nunsaved\n"); // the user's text, still
    expect(got._meta).toEqual({ agentServer: { version: 2, dirty: true, diskChanged: true } });
  });

  it("says nothing more when the disk is as the editor left it", async () => {
    await opened();
    const got = await readTextFile({ sessionId: "s", path: PATH });
    expect(got._meta).toEqual({ agentServer: { version: 2, dirty: true } });
  });
});
