// Issue 30, item 3: with a workspace opened through a symbolic link (dev -> share, opened as
// dev/proj) and the server naming the real path (share/proj/app.py), the read answered the disk's
// text and the edit went into a second, hidden document. Now a path is matched to the open documents
// by real path, and a file that is not open is named as the workspace spells it.
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, files, resetStub, workspace } from "./../stub/vscode";
import { editorUri, openDocument, readTextFile } from "../../src/buffers";

let real: string; // share/proj (the files' real folder)
let linked: string; // dev/proj, dev -> share (the workspace as the user opened it)

beforeEach(() => {
  resetStub();
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), "one-document-")));
  mkdirSync(join(tmp, "share", "proj"), { recursive: true });
  symlinkSync(join(tmp, "share"), join(tmp, "dev"));
  real = join(tmp, "share", "proj");
  linked = join(tmp, "dev", "proj");
  writeFileSync(join(real, "app.py"), "on disk\n");
  writeFileSync(join(real, "other.py"), "x\n");
  files.set(join(real, "app.py"), "on disk\n");
  workspace.workspaceFolders = [{ uri: vscode.Uri.file(linked) as never }];
});

describe("one document per file", () => {
  it("a read of the real path answers the unsaved buffer open through the link", async () => {
    const doc = new StubDocument(vscode.Uri.file(join(linked, "app.py")) as never, "unsaved\n", 7, true);
    workspace.textDocuments.push(doc);
    expect(openDocument(vscode.Uri.file(join(real, "app.py")) as never)).toBe(doc);
    const got = await readTextFile({ sessionId: "s", path: join(real, "app.py") });
    expect(got.content).toBe("unsaved\n");
    expect(got._meta).toEqual({ agentServer: { version: 7, dirty: true } });
  });

  it("and the other way: a document open by its real path is the file of the link's path", () => {
    const doc = new StubDocument(vscode.Uri.file(join(real, "app.py")) as never, "unsaved\n", 2, true);
    workspace.textDocuments.push(doc);
    expect(openDocument(vscode.Uri.file(join(linked, "app.py")) as never)).toBe(doc);
  });

  it("a file that is not open is named under the workspace folder, as the user opened it", () => {
    expect(editorUri(vscode.Uri.file(join(real, "other.py")) as never).fsPath).toBe(join(linked, "other.py"));
    expect(editorUri(vscode.Uri.file(join(real, "new", "made.py")) as never).fsPath).toBe(join(linked, "new", "made.py"));
    expect(editorUri(vscode.Uri.file("/elsewhere/x.py") as never).fsPath).toBe("/elsewhere/x.py");
  });
});
