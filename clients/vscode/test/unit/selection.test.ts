import { describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { selectionBlock, selectionLines } from "../../src/selection";

const doc = (text: string) => {
  const lines = text.split("\n");
  return { uri: vscode.Uri.file("/ws/src/app.py") as never, lineCount: lines.length, lineAt: (l: number) => ({ text: lines[l] ?? "" }), getText: () => text };
};
const sel = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 }, isEmpty: l1 === l2 && c1 === c2 });

describe("a selection as an embedded resource", () => {
  it("goes out with a 1-based inclusive #L range and the selected text", () => {
    const { block } = selectionBlock(doc("a\nbcd\nef\ng"), sel(1, 1, 2, 1));
    expect(block).toEqual({ type: "resource", resource: { uri: "file:///ws/src/app.py#L2-L3", text: "cd\ne", mimeType: "text/plain" } });
  });
  it("leaves out a last line selected only up to column 0, and clamps past the end", () => {
    expect(selectionLines(sel(0, 0, 2, 0), 5)).toEqual({ first: 1, last: 2 });
    expect(selectionLines(sel(3, 0, 99, 4), 5)).toEqual({ first: 4, last: 5 });
  });
  it("sends the whole line for an empty selection", () => {
    expect(selectionBlock(doc("a\nbcd\n"), sel(1, 2, 1, 2)).block.resource).toMatchObject({ uri: "file:///ws/src/app.py#L2-L2", text: "bcd" });
  });
  it("the lines 3-L6 label: a selection's label says lines 3-6 (one line: 3), its URI #L3-L6", () => {
    const got = selectionBlock(doc("a\nb\nc\nd\ne\nf\ng"), sel(2, 0, 5, 1));
    expect([got.lines, got.range]).toEqual(["3-6", "L3-L6"]);
    expect(selectionBlock(doc("a\nb\nc"), sel(2, 0, 2, 1)).lines).toBe("3");
  });
});
