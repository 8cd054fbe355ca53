// The rest of finding 20's class (the last stop's open security item 1): right before a proposal is
// written, the client asked only whether its path still led inside the workspace, so a folder swapped
// for a link to `.git/hooks` while the proposal waited had Accept plant a git hook inside the workspace.
// The path must lead where it led when the proposal arrived (`movedSince`), on the real disk.
import { mkdirSync, mkdtempSync, rmSync, rmdirSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { movedSince, realPath } from "../../src/buffers";

let base = "";

afterEach(() => {
  if (base) rmSync(base, { recursive: true, force: true });
});

describe("a proposal's path must lead where it led when the proposal arrived", () => {
  it("a folder swapped for a link to .git/hooks while the proposal waited: refused with words", () => {
    base = mkdtempSync(join(tmpdir(), "moved-since-"));
    mkdirSync(join(base, ".git", "hooks"), { recursive: true });
    mkdirSync(join(base, "tools"));
    const uri = vscode.Uri.file(join(base, "tools", "pre-commit"));
    const atArrival = realPath(uri.fsPath);
    expect(movedSince(uri as never, atArrival)).toBeUndefined(); // unchanged: nothing to say
    rmdirSync(join(base, "tools"));
    symlinkSync(join(base, ".git", "hooks"), join(base, "tools"));
    const why = movedSince(uri as never, atArrival);
    expect(why).toContain("the path now leads to");
    expect(why).toContain(join(".git", "hooks", "pre-commit"));
  });

  it("a folder the proposal's own creation made on the way keeps the same real path", () => {
    base = mkdtempSync(join(tmpdir(), "moved-since-"));
    const uri = vscode.Uri.file(join(base, "new", "deeper", "file.txt"));
    const atArrival = realPath(uri.fsPath);
    mkdirSync(join(base, "new", "deeper"), { recursive: true });
    expect(movedSince(uri as never, atArrival)).toBeUndefined();
  });
});
