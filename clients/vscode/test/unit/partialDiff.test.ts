// A big file's diff carries only its changed region (docs/protocol.md, `_meta.agentServer.diff`):
// the permission diff's title says where in the file it starts.
import { describe, expect, it } from "vitest";
import { partialNote } from "../../src/permissions";

describe("partialNote", () => {
  it("names the file line of a partial diff, nothing for a whole one", () => {
    expect(partialNote({ path: "/w/big.txt", oldText: "a\n", newText: "b\n", _meta: { agentServer: { diff: { partial: true, oldLine: 249995, newLine: 249995 } } } })).toBe(" (the changed region, from line 249995)");
    expect(partialNote({ path: "/w/a.txt", oldText: "a\n", newText: "b\n" })).toBe("");
    expect(partialNote({ path: "/w/a.txt", oldText: null, newText: "b\n", _meta: { agentServer: { diff: { partial: true } } } })).toBe(" (the changed region)");
  });
});
